"""An experiment's page (participants table with server-side paging, sorting and filtering, the
condition balance and completions chart; the listing and safety panels come from ``listing`` and
``safety``) and one participant's page (trials, events, debrief, QC, SONA credit)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import sqlalchemy as sa
from flask import abort, current_app, redirect, render_template, request, session, url_for

from humanlike.analysis.authenticity.verdict import VERDICTS
from humanlike.server import audit
from humanlike.server.admin import charts, stats
from humanlike.server.admin.auth import actor
from humanlike.server.admin.blueprint import bp
from humanlike.server.admin.experiments import experiment_or_404
from humanlike.server.admin.permissions import Permission, can, requires
from humanlike.server.database import as_utc
from humanlike.server.extensions import db
from humanlike.server.lifecycle import ParticipantStatus
from humanlike.server.live.authenticity import authenticity_reasons, stored_verdicts
from humanlike.server.live.qc import qc_in_words
from humanlike.server.participants import display, overrides, timeouts, trial_store
from humanlike.server.rights.pseudonyms import key_from_secret, pseudonym
from humanlike.server.sources import sona
from humanlike.server.tables.authenticity import ParticipantAuthenticity
from humanlike.server.tables.core import Event, Participant, ParticipantQC, Payment, Stimulus, Trial
from humanlike.server.trial_types import responses
from humanlike.server.trial_types.registry import TRIAL_TYPES, internal_types, rated_types

PAGE_SIZE = 50
SORTS: dict[str, Any] = {
    "id": Participant.id, "status": Participant.status, "condition": Participant.condition,
    "started_at": Participant.started_at, "completed_at": Participant.completed_at,
    "last_seen": ParticipantQC.last_trial_at, "progress": ParticipantQC.n_stored,
    "catch_accuracy": ParticipantQC.catch_accuracy,
    "repeat_reliability": ParticipantQC.repeat_reliability,
    "median_rt_ms": ParticipantQC.median_rt_ms, "too_fast_share": ParticipantQC.too_fast_share,
    "n_blur": ParticipantQC.n_blur, "n_fullscreen_exit": ParticipantQC.n_fullscreen_exit,
}
"""Columns the participants table sorts by (name in the query string -> column)."""


@dataclass(frozen=True)
class TableQuery:
    """The participants table's filters, sort and page, read from the query string; ``reveal``
    comes from the login session (set by a POST, never by a link)."""

    status: str = ""
    condition: str = ""
    excluded: str = ""
    qc: str = ""
    authenticity: str = ""
    sort: str = "id"
    order: str = "asc"
    page: int = 1
    reveal: bool = False

    @classmethod
    def from_args(cls, args: Any, reveal: bool = False) -> TableQuery:
        """Read and check the query string; unknown values fall back to the defaults."""
        sort = args.get("sort", "id")
        try:
            page = max(1, int(args.get("page", 1)))
        except ValueError:
            page = 1
        return cls(status=args.get("status", "")[:16] if args.get("status") in stats.STATUSES else "",
                   condition=args.get("condition", "")[:64],
                   excluded=args.get("excluded", "") if args.get("excluded") in ("yes", "no") else "",
                   qc=args.get("qc", "") if args.get("qc") in ("failed", "passed") else "",
                   authenticity=(args.get("authenticity", "")
                                 if args.get("authenticity") in VERDICTS else ""),
                   sort=sort if sort in SORTS else "id",
                   order="desc" if args.get("order") == "desc" else "asc", page=page,
                   reveal=reveal)

    def args(self, **change: Any) -> dict[str, Any]:
        """The query string of this view with ``change`` applied (links for sort and paging)."""
        values = {"status": self.status, "condition": self.condition, "excluded": self.excluded,
                  "qc": self.qc, "authenticity": self.authenticity, "sort": self.sort, "order": self.order, "page": self.page,
                  **change}
        return {k: v for k, v in values.items() if v not in ("", None)}


def participants_select(experiment_id: int, q: TableQuery) -> sa.Select:
    """Participants of the experiment with their stored QC, filtered as ``q`` says (unordered)."""
    stmt = (sa.select(Participant, ParticipantQC)
            .outerjoin(ParticipantQC, ParticipantQC.participant_id == Participant.id)
            .where(Participant.experiment_id == experiment_id))
    if q.status:
        stmt = stmt.where(Participant.status == q.status)
    if q.condition:
        stmt = stmt.where(Participant.condition == q.condition)
    if q.excluded:
        clause = stats.excluded_clause()
        stmt = stmt.where(clause if q.excluded == "yes" else ~clause)
    if q.qc:
        failed = sa.func.coalesce(ParticipantQC.qc_failed, sa.false())
        stmt = stmt.where(failed if q.qc == "failed" else ~failed)
    if q.authenticity:
        verdict = sa.select(ParticipantAuthenticity.verdict).where(
            ParticipantAuthenticity.participant_id == Participant.id).scalar_subquery()
        stmt = stmt.where(verdict == q.authenticity)
    return stmt


def simulated_ids(ids: list[int]) -> set[int]:
    """Which of these participants are simulated (recorded by the server at arrival with the
    researcher's rehearsal key, ``server.rehearsal``; what a browser sends marks nothing)."""
    if not ids:
        return set()
    return set(db.session.execute(sa.select(Participant.id).where(
        Participant.id.in_(ids), Participant.simulated)).scalars())


def task_total(p: Participant) -> int:
    """A participant's task trials as their progress bar counts them: the timeline less its
    internal entries (the closing debrief form); ``n_trials`` for a timeline not stored."""
    internal = set(internal_types())
    return sum(str(e.get("type")) not in internal
               for e in (p.timeline or {}).get("trials", [])) or p.n_trials


def internal_stored(ids: list[int]) -> dict[int, int]:
    """Stored trials of internal types (the debrief) per participant, to leave out of progress."""
    if not ids:
        return {}
    return dict(db.session.execute(  # type: ignore[arg-type]
        sa.select(Trial.participant_id, sa.func.count())
        .where(Trial.participant_id.in_(ids), Trial.trial_type.in_(list(internal_types())))
        .group_by(Trial.participant_id)).all())


def reward_of(exp: Any) -> float | None:
    """The listing's reward per participant in the study currency (Prolific's minor units / 100)."""
    from humanlike.server.admin.listing import _spec_listing

    if exp.platform != "prolific":
        return None
    reward = (exp.recruitment_meta or {}).get("study_reward", _spec_listing(exp).get("reward"))
    return reward / 100 if reward is not None else None


def _page(exp: Any, q: TableQuery) -> tuple[list[dict[str, Any]], int]:
    stmt = participants_select(exp.id, q)
    total = db.session.execute(sa.select(sa.func.count()).select_from(stmt.subquery())).scalar_one()
    column = SORTS[q.sort]
    ordered = column.desc() if q.order == "desc" else column.asc()
    rows = db.session.execute(
        stmt.order_by(ordered.nulls_last(), Participant.id)
        .limit(PAGE_SIZE).offset((q.page - 1) * PAGE_SIZE)).all()
    ids = [p.id for p, _ in rows]
    stored = stats.stored_counts(ids)
    internal = internal_stored(ids)
    # a QC row computed on as many trials as are stored now has their newest time; only the others
    # (participants still sending trials) are looked up
    seen = {p.id: as_utc(qc.last_trial_at) for p, qc in rows
            if qc is not None and qc.last_trial_at is not None and qc.n_stored == stored.get(p.id, 0)}
    seen.update(stats.last_seen([i for i in ids if i not in seen]))
    simulated = simulated_ids(ids)
    verdicts = stored_verdicts(exp, ids)
    reward = reward_of(exp)
    out = []
    for p, qc in rows:
        bonus = float(p.bonus) if p.bonus is not None else None
        earned = reward if reward is not None and p.status == ParticipantStatus.APPROVED else None
        started = as_utc(p.started_at or p.created_at)
        end = as_utc(p.completed_at) or seen.get(p.id)
        out.append({
            "p": p, "qc": qc, "stored": stored.get(p.id, 0) - internal.get(p.id, 0),
            "n_task": task_total(p),
            "progress": min(1.0, (stored.get(p.id, 0) - internal.get(p.id, 0)) / task_total(p))
            if task_total(p) else 1.0,
            "simulated": p.id in simulated,
            "authenticity": verdicts.get(p.id),
            "cost": None if earned is None and bonus is None else (earned or 0.0) + (bonus or 0.0),
            "started_at": started, "last_seen": seen.get(p.id),
            "duration_s": (end - started).total_seconds() if end and started else None,
            "excluded": overrides.excluded(p.analysis_override, qc.qc_failed if qc else None),
        })
    return out, total


REVEALED = "revealed"
"""Session key: the experiments (slug) and participants (``p:<public id>``) whose platform ids this
login has revealed (each reveal a CSRF-protected, audited POST)."""


def revealed(name: str) -> bool:
    """Whether this login revealed ``name`` (and still may: a revoked permission hides it again)."""
    if name not in session.get(REVEALED, []):
        return False
    exp = experiment_of_name(name)
    return exp is not None and can(Permission.REVEAL.value, exp)


def experiment_of_name(name: str) -> Any:
    """The experiment a ``revealed`` name stands for (a slug, or ``p:<public id>``)."""
    from humanlike.server.admin.permissions import experiment_of

    if name.startswith("p:"):
        return experiment_of({"public_id": name[2:]})
    return experiment_of({"slug": name})


def _set_revealed(name: str, on: bool) -> None:
    names = [n for n in session.get(REVEALED, []) if n != name]
    session[REVEALED] = [*names, name] if on else names


@bp.post("/experiments/<slug>/reveal")
@requires(Permission.REVEAL)
def reveal_experiment(slug: str):
    """Show the experiment's platform ids for this login (audited), or hide them (``hide=1``)."""
    exp = experiment_or_404(slug)
    hide = request.form.get("hide") == "1"
    if not hide:
        audit.record(actor(), "reveal_ids", experiment=exp.slug, target=exp.slug)
        db.session.commit()
    _set_revealed(exp.slug, not hide)
    return redirect(url_for("admin.experiment", slug=exp.slug, **TableQuery.from_args(
        request.form).args()))


@bp.post("/participants/<public_id>/reveal")
@requires(Permission.REVEAL)
def reveal_participant(public_id: str):
    """Show one participant's platform id for this login (audited)."""
    p = db.session.execute(sa.select(Participant).where(Participant.public_id == public_id)
                           ).scalar_one_or_none()
    if p is None:
        abort(404)
    audit.record(actor(), "reveal_ids", experiment=p.experiment.slug, target=p.public_id)
    db.session.commit()
    _set_revealed(f"p:{p.public_id}", True)
    return redirect(url_for("admin.participant", public_id=p.public_id))


def _table_context(slug: str) -> dict[str, Any]:
    exp = experiment_or_404(slug)
    q = TableQuery.from_args(request.args, reveal=revealed(exp.slug))
    rows, total = _page(exp, q)
    return {"exp": exp, "q": q, "rows": rows, "total": total,
            "pages": max(1, math.ceil(total / PAGE_SIZE)), "sorts": list(SORTS),
            "verdicts": VERDICTS}


@bp.get("/experiments/<slug>")
@requires(Permission.VIEW)
@stats.without_gc_pauses
def experiment(slug: str):
    """The experiment page: participants table, condition balance, completions over time."""
    exp = experiment_or_404(slug)
    if timeouts.sweep_experiment(exp):  # silent participants become timed_out (undone on return)
        db.session.commit()
    context = _table_context(slug)
    from humanlike.server.admin.listing import listing_view
    from humanlike.server.admin.safety import safety_view
    from humanlike.server.live.panel import panel_view

    return render_template(
        "admin/experiment.html", **context, statuses=stats.STATUSES, balance=stats.condition_balance(exp.id),
        conditions=[c["name"] for c in exp.spec.get("conditions", [])] or ["default"],
        completions=stats.completions_chart(exp.id), panel=panel_view(exp),
        listing=listing_view(exp), safety=safety_view(exp), time_taken=time_taken_chart(exp.id),
        timeout_minutes=timeouts.timeout_minutes(exp.spec))


def time_taken_chart(experiment_id: int) -> charts.Chart:
    """Histogram of minutes from start to completion over the finished participants."""
    return charts.histogram(stats.finished_minutes(experiment_id), bins=20, x_label="minutes",
                            y_label="participants")


@bp.get("/experiments/<slug>/rows")
@requires(Permission.VIEW)
@stats.without_gc_pauses
def experiment_rows_fragment(slug: str):
    """The participants table's body for the current query (htmx polls it)."""
    return render_template("admin/_participant_rows.html", **_table_context(slug))


def repeat_pairs(trials: Sequence[Any]) -> list[tuple[float, float]]:
    """(first, repeat) rating of each category of each repeated stimulus (the reliability scatter;
    the same pairing as the analysis package's ``repeat_pairs``: repeat_of names the first trial)."""
    rated = set(rated_types())
    first = {t.trial_index: t.response.get("ratings") for t in trials
             if t.trial_type in rated and not t.is_repeat and isinstance(t.response, dict)}
    pairs: list[tuple[float, float]] = []
    for t in trials:
        if t.trial_type not in rated or not t.is_repeat or not isinstance(t.response, dict):
            continue
        before, again = first.get(t.repeat_of if t.repeat_of is not None else -1), t.response.get(
            "ratings")
        if isinstance(before, dict) and isinstance(again, dict):
            pairs.extend((float(before[k]), float(again[k])) for k in again
                         if isinstance(before.get(k), (int, float)) and isinstance(again[k], (int, float)))
    return pairs


def _debrief(trials: Sequence[Any]) -> list[tuple[str, str]]:
    """The answers of the trials the timeline adds itself (the registry's internal types: the
    debrief)."""
    internal = set(internal_types())
    answers: list[tuple[str, str]] = []
    for t in trials:
        if t.trial_type in internal and isinstance(t.response, dict):
            raw = t.response.get("answers", t.response)
            if isinstance(raw, dict):
                answers.extend((str(k), str(v)) for k, v in raw.items())
    return answers


class TrialRow(NamedTuple):
    """One trial as the participant page shows it (a tuple: the template reads 820 of them)."""

    trial_index: int
    trial_type: str
    block: str | None
    stimulus_id: int | None
    response: Any
    rt_ms: float | None
    presented_ms: float | None
    frames: int | None
    is_repeat: bool
    repeat_of: int | None
    practice: bool


def _trial_rows(participant_id: int) -> list[TrialRow]:
    """The participant's trials in order as plain tuples (Python values, None where missing),
    from the one trial reader (``trial_store.trial_chunks``)."""
    frame = next(trial_store.trial_chunks(TrialRow._fields, participant_ids=[participant_id],
                                          chunk_rows=None))
    frame = frame.assign(response=responses.json_values(frame["response"])).astype(object)
    frame = frame.where(frame.notna(), None)
    return [TrialRow._make(row) for row in frame.itertuples(index=False, name=None)]


@bp.app_template_filter("duration")
def duration(seconds: float | None) -> str:
    """Seconds in words a reader takes in: '42 s' under a minute, '12.5 min' under an hour,
    '2 h 05 min' beyond; '–' when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "–"
    if seconds < 59.5:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes:02d} min"


@bp.app_template_filter("response_summary")
def response_summary(response: Any, trial_type: str | None = None) -> str:
    """A trial's response in a few words: its type's own summary (the registry's ``summary``: a
    triad's or a triplet's chosen image), the categories rated above 0 (highest first), the
    debrief's answers or the class chosen; otherwise its JSON."""
    kind = TRIAL_TYPES.get(trial_type) if trial_type else None
    if isinstance(response, dict) and kind is not None and kind.summary is not None:
        return kind.summary(response)
    if isinstance(response, dict):
        ratings = response.get("ratings")
        if isinstance(ratings, dict):
            rated = sorted(((v, k) for k, v in ratings.items()
                            if isinstance(v, int | float) and v > 0), key=lambda kv: -kv[0])
            return ", ".join(f"{k}: {v:g}" for v, k in rated) or "all 0"
        answers = response.get("answers")
        if isinstance(answers, dict):
            return "; ".join(f"{k}: {v}" for k, v in answers.items())
        if "response" in response:
            return str(response["response"])
        if isinstance(response.get("choice"), str):  # a classification
            return response["choice"]
    return json.dumps(response)


@bp.get("/participants/<public_id>")
@requires(Permission.VIEW)
@stats.without_gc_pauses
def participant(public_id: str):
    """One participant: progress, every trial, events, debrief answers, QC with reasons, figures."""
    p = db.session.execute(
        sa.select(Participant).where(Participant.public_id == public_id)).scalar_one_or_none()
    if p is None:
        abort(404)
    exp = p.experiment
    trials = _trial_rows(p.id)
    events = db.session.execute(sa.select(Event).where(Event.participant_id == p.id)
                                .order_by(Event.id)).scalars().all()
    payments = db.session.execute(sa.select(Payment).where(Payment.participant_id == p.id)
                                  .order_by(Payment.id)).scalars().all()
    stimuli = dict(db.session.execute(sa.select(Stimulus.id, Stimulus.key)
                                      .where(Stimulus.experiment_id == exp.id)).all())
    qc = db.session.get(ParticipantQC, p.id)  # computed in the background by the same QC code
    screened = stored_verdicts(exp, [p.id]).get(p.id)  # the authenticity screen, likewise
    internal = set(internal_types())
    rts = np.array([t.rt_ms for t in trials if t.rt_ms is not None
                    and t.trial_type not in internal and not t.practice], dtype=float)
    n_task = task_total(p)  # progress as the participant saw it (the debrief form is no trial)
    n_done = sum(t.trial_type not in internal for t in trials)
    key = key_from_secret(current_app.config["SECRET_KEY"])
    reveal = revealed(exp.slug) or revealed(f"p:{p.public_id}")
    return render_template(
        "admin/participant.html", p=p, exp=exp, trials=trials, events=events, payments=payments,
        stimuli=stimuli, debrief=_debrief(trials), qc=qc,
        qc_reasons=[r for r in (qc.qc_reasons if qc else "").split(";") if r],
        qc_stale=qc is None or qc.n_stored != len(trials),
        qc_words=qc_in_words(exp.spec.get("exclusion"), qc.metrics) if qc and qc.metrics else [],
        authenticity=screened, authenticity_reasons=authenticity_reasons(screened),
        scatter=charts.scatter(repeat_pairs(trials)),
        histogram=charts.histogram(rts), reveal=reveal,
        platform_id=p.platform_id if reveal else pseudonym(key, exp.slug, p.platform_id),
        progress=min(1.0, n_done / n_task) if n_task else 1.0, n_done=n_done, n_task=n_task,
        certificate=display.participant_certificate(p, exp.spec), sona_state=sona.grant_state(p))

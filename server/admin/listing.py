"""The experiment's listing on Prolific, on its dashboard page: study id and link, status, places
taken / total, reward, the listing's estimated minutes beside the measured median, last sync or
event, webhook warnings, and the money so far (rewards of approved participants, bonuses paid and
the fees Prolific reported for them), the submissions nobody here knows and the withdrawn
participants still to be paid. "Sync now" runs ``recruit prolific sync``'s code; publish /
pause / resume / stop / add places are confirmed first and audited, and fewer places are refused
here (Prolific only allows more)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import sqlalchemy as sa
from flask import flash, redirect, render_template, request, url_for
from flask_wtf import FlaskForm

from humanlike.server import audit
from humanlike.server.admin.auth import actor
from humanlike.server.admin.blueprint import bp
from humanlike.server.admin.experiments import experiment_or_404
from humanlike.server.admin.permissions import from_action, requires
from humanlike.server.extensions import db
from humanlike.server.lab.access import Permission
from humanlike.server.lifecycle import ParticipantStatus
from humanlike.server.participants.actions import PlatformError
from humanlike.server.rights import ledger as withdrawal_ledger
from humanlike.server.sources import listing
from humanlike.server.tables.core import Experiment, Participant, Payment

STUDY_URL = "https://app.prolific.com/researcher/workspaces/studies/{id}"
ACTIONS = {"publish": ("PUBLISH", "Publish the study"), "pause": ("PAUSE", "Pause the study"),
           "resume": ("START", "Resume the study"), "stop": ("STOP", "Stop the study for good"),
           "places": (None, "Add places")}
"""Listing actions: name -> (Prolific's study transition, label)."""
SPENDING = frozenset({"publish", "resume", "places"})
"""Listing actions that let more paid participants in (``spend``); pause and stop need ``act``."""


CURRENCY_SYMBOLS = {"GBP": "£", "USD": "$"}
"""The symbol of each currency a recruitment platform here pays in."""


def currency_of(exp: Experiment) -> str | None:
    """The currency of an experiment's rewards and bonuses: the spec's ``[recruitment.prolific]
    currency`` on Prolific, USD on MTurk (legacy HITs), None when not declared or not paid here."""
    if exp.platform == "mturk":
        return "USD"
    if exp.platform != "prolific":
        return None
    return _spec_listing(exp).get("currency")


@bp.app_template_filter("money")
def money_filter(amount: Any, exp: Experiment) -> str:
    """``amount`` (major units) with the experiment's currency: "£0.50", "$0.50", or "0.50" when
    the currency is not declared (the header then says "account currency"); "–" for none."""
    if amount is None:
        return "–"
    text = f"{Decimal(str(amount)):.2f}"
    code = currency_of(exp)
    return f"{CURRENCY_SYMBOLS[code]}{text}" if code in CURRENCY_SYMBOLS else text


@bp.app_template_global("currency_label")
def currency_label(exp: Experiment) -> str:
    """The table headers' unit: the currency's code, or "account currency" when not declared."""
    return currency_of(exp) or "account currency"


class ListingForm(FlaskForm):
    """CSRF token for the listing's forms (fields are read from the request)."""


@dataclass(frozen=True)
class ListingView:
    """What the listing panel shows (None: not known yet)."""

    ref: str
    link: str
    status: str | None
    places_taken: int | None
    places_total: int | None
    reward_minor: int | None
    estimated_minutes: int | None
    median_minutes: float | None
    n_finished: int
    last_sync: str | None
    last_event: str | None
    high_return_rate_at: str | None
    failed_deliveries: int
    hooks: bool
    rewards: Decimal
    bonuses: Decimal
    fees: Decimal
    unknown_bonuses: int
    unknown_submissions: tuple[dict[str, Any], ...] = ()
    """Submissions the last sync found that nobody here knows (participant, submission, status)."""
    withdrawn_owed: int = 0
    """Participants who finished, withdrew, and whose submission is not settled yet."""

    @property
    def slow(self) -> bool:
        """The measured median is above the listing's estimate (participants are underpaid)."""
        return bool(self.median_minutes and self.estimated_minutes
                    and self.median_minutes > self.estimated_minutes)


def _spec_listing(exp: Experiment) -> dict[str, Any]:
    """The loaded spec's ``[recruitment.prolific]`` table (kept out of the stored spec)."""
    from humanlike.server.study import experiments

    loaded = experiments.registry().get(exp.slug)
    recruitment = loaded.spec.recruitment if loaded is not None else None
    table = recruitment.prolific if recruitment is not None else None
    return table.model_dump() if table is not None else {}


def median_minutes(exp: Experiment) -> tuple[float | None, int]:
    """Median of completed_at - started_at over the finished participants, and their number."""
    from humanlike.server.admin.stats import finished_minutes

    minutes = finished_minutes(exp.id)
    return (float(np.median(minutes)) if minutes.size else None), int(minutes.size)


def money(exp: Experiment, reward_minor: int | None) -> tuple[Decimal, Decimal, Decimal, int]:
    """Rewards (approved participants x reward), bonuses paid, the fees Prolific reported for those
    bonuses (its bonus set-up reply, in minor units), and bonuses whose state is unknown."""
    approved = db.session.execute(sa.select(sa.func.count()).select_from(Participant).where(
        Participant.experiment_id == exp.id, Participant.status == ParticipantStatus.APPROVED)).scalar_one()
    rewards = Decimal(approved * (reward_minor or 0)) / 100
    payments = db.session.execute(
        sa.select(Payment.amount, Payment.status, Payment.reply)
        .join(Participant, Participant.id == Payment.participant_id)
        .where(Participant.experiment_id == exp.id)).all()
    bonuses = sum((Decimal(str(a)) for a, s, _ in payments if s in ("paid", "recorded")),
                  Decimal(0))
    fees = Decimal(0)
    for _, state, reply in payments:
        created = (reply or {}).get("created") if isinstance(reply, dict) else None
        if state == "paid" and isinstance(created, dict) and created.get("fees") is not None:
            fees += Decimal(str(created["fees"])) / 100
    unknown = sum(1 for _, s, _ in payments if s == "unknown")
    return rewards, bonuses, fees.quantize(Decimal("0.01")), unknown


def listing_view(exp: Experiment) -> ListingView | None:
    """The panel's numbers for a Prolific experiment with a listing; None otherwise."""
    if exp.platform != "prolific" or not exp.recruitment_ref:
        return None
    meta = exp.recruitment_meta or {}
    state = listing.state(exp)
    spec = _spec_listing(exp)
    reward = meta.get("study_reward", spec.get("reward"))
    median, finished = median_minutes(exp)
    rewards, bonuses, fees, unknown = money(exp, reward)
    return ListingView(
        ref=exp.recruitment_ref, link=STUDY_URL.format(id=exp.recruitment_ref),
        status=state.platform_status,
        places_taken=state.places_taken,
        places_total=state.places_total if state.places_total is not None else spec.get("places"),
        reward_minor=reward,
        estimated_minutes=meta.get("study_estimated_completion_time",
                                   spec.get("estimated_minutes")),
        median_minutes=median, n_finished=finished, last_sync=state.synced_at,
        last_event=meta.get("last_event_at"), high_return_rate_at=meta.get("high_return_rate_at"),
        failed_deliveries=int(meta.get("failed_deliveries") or 0), hooks=bool(meta.get("hooks")),
        rewards=rewards, bonuses=bonuses, fees=fees, unknown_bonuses=unknown,
        unknown_submissions=tuple(s for s in meta.get("unknown_submissions") or []
                                  if isinstance(s, dict)),
        withdrawn_owed=len(withdrawal_ledger.owed(exp.slug)))


def _client() -> Any:
    from humanlike.server.sources.prolific import ProlificClient

    return ProlificClient()


LISTING = "listing"
"""The flash category of a listing action's outcome: shown inside the panel the page scrolls to."""


def _back(exp: Experiment):
    return redirect(url_for("admin.experiment", slug=exp.slug) + "#listing")


@bp.post("/experiments/<slug>/listing/sync")
@requires(Permission.ACT)
def listing_sync(slug: str):
    """Sync now: the participants' statuses and the study's numbers from Prolific (audited)."""
    from humanlike.server.live.sync import sync_listing

    exp = experiment_or_404(slug)  # the CSRF token is checked app-wide before this runs
    try:
        report = sync_listing(exp, _client(), actor=actor())
    except (PlatformError, ValueError) as exc:
        db.session.rollback()
        flash(f"Sync failed, nothing changed: {exc}", LISTING)
        return _back(exp)
    audit.record(actor(), "listing_sync", experiment=exp.slug, target=exp.recruitment_ref,
                 detail={"changed": len(report.changed), "conflicts": len(report.conflicts),
                         "unknown": len(report.unknown), "seen": report.seen,
                         "withdrawn_approved": report.withdrawn_approved})
    db.session.commit()
    flash(sync_summary(report), LISTING)
    return _back(exp)


def sync_summary(report: Any) -> str:
    """What Sync now did, in one sentence: changes, conflicts, unknown submissions (listed in the
    panel) and withdrawn participants' submissions approved."""
    text = (f"Synced with Prolific: {report.seen} submission(s), {len(report.changed)} changed, "
            f"{len(report.conflicts)} conflict(s), {len(report.unknown)} unknown")
    approved = report.withdrawn_approved
    if approved:
        text += (", 1 withdrawn participant's submission approved" if approved == 1 else
                 f", {approved} withdrawn participants' submissions approved")
    failed = [w for w in report.withdrawn if w.get("error")]
    if failed:
        text += (f"; approving {len(failed)} withdrawn participant(s)' submission(s) failed: "
                 f"{failed[0]['error']}")
    return text


def _places(exp: Experiment, view: ListingView | None) -> tuple[int | None, str | None]:
    """The requested new total, or why it is refused (Prolific only allows more places)."""
    try:
        total = int(request.form.get("total", ""))
    except ValueError:
        return None, "give the new total number of places (a whole number)"
    return total, listing.places_refusal(view.places_total if view is not None else None, total)


@bp.post("/experiments/<slug>/listing/confirm")
@requires(from_action("action", SPENDING))
def listing_confirm(slug: str):
    """Say what the listing action will do and ask to confirm (nothing changes yet)."""
    exp = experiment_or_404(slug)
    action = request.form.get("action", "")
    if action not in ACTIONS:
        return render_template("message.html", title="Unknown action",
                               message=f"unknown listing action {action!r}"), 400
    view = listing_view(exp)
    total, error = _places(exp, view) if action == "places" else (None, None)
    return render_template("admin/listing_confirm.html", exp=exp, view=view, action=action,
                           label=ACTIONS[action][1], total=total, error=error,
                           form=ListingForm()), 400 if error else 200


@bp.post("/experiments/<slug>/listing/apply")
@requires(from_action("action", SPENDING))
def listing_apply(slug: str):
    """Do the confirmed listing action on Prolific; audited with Prolific's reply."""
    exp = experiment_or_404(slug)
    action = request.form.get("action", "")
    if action not in ACTIONS or request.form.get("confirmed") != "yes":
        return render_template("message.html", title="Confirm first",
                               message="confirm the listing action first"), 400
    view = listing_view(exp)
    if view is None:
        flash("This experiment has no Prolific listing yet (run `humanlike recruit prolific "
              "create`).")
        return _back(exp)
    total, error = _places(exp, view) if action == "places" else (None, None)
    if error:
        return render_template("admin/listing_confirm.html", exp=exp, view=view, action=action,
                               label=ACTIONS[action][1], total=total, error=error,
                               form=ListingForm()), 400
    try:
        client = _client()
        reply = (listing.set_places(exp, int(total or 0), client, actor(), view.places_total)
                 if action == "places"
                 else listing.transition(exp, str(ACTIONS[action][0]), client, actor()))
    except PlatformError as exc:
        db.session.commit()  # the audited failure
        flash(f"{ACTIONS[action][1]}: not done: {exc}", LISTING)
        return _back(exp)
    db.session.commit()
    flash(f"{ACTIONS[action][1]}: done" + (f" (now {reply['status']})" if reply.get("status")
                                           else ""), LISTING)
    return _back(exp)

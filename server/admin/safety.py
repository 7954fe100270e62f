"""The experiment page's safety pieces (issues 28 and 29): the circuit breaker's banner with its
confirmed, audited "Resume recruitment"; participants refused on their return (the researcher
decides about paying for the part they did); the number who withdrew; SONA's credit grants with a
confirmed "Retry" for a pending or failed one. The work is done by ``breaker``, ``resume_policy``,
``withdrawal`` and ``sona``; this module only reads their answers for the page and takes the
researcher's two actions."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from flask import abort, flash, redirect, render_template, request, url_for

from humanlike.server.admin.auth import actor
from humanlike.server.admin.blueprint import bp
from humanlike.server.admin.experiments import experiment_or_404
from humanlike.server.admin.permissions import requires
from humanlike.server.extensions import db
from humanlike.server.lab.access import Permission
from humanlike.server.live import breaker
from humanlike.server.participants import resume_policy
from humanlike.server.rights import withdrawal
from humanlike.server.sources import sona
from humanlike.server.tables.core import AuditEntry, Experiment, Participant
from humanlike.server.tables.sona import GrantState

RETRYABLE = frozenset({GrantState.PENDING.value, GrantState.FAILED.value})
"""Grant states the page offers to send again (a granted one is done, a sending one is in flight)."""
NOTE_LIMIT = 1000


@dataclass(frozen=True)
class RuleRow:
    """One breaker rule as the banner shows it: what was measured against the spec's limit."""

    name: str
    label: str
    measured: str
    limit: str
    fired: bool


@dataclass(frozen=True)
class Banner:
    """The open trip: when, why, the window's counts, each rule, what the platform was told."""

    id: int
    tripped_at: dt.datetime
    reason: str
    counts: str
    rules: list[RuleRow]
    platform_action: str | None


@dataclass(frozen=True)
class SafetyView:
    """What the experiment page shows of the breaker, refusals, withdrawals and SONA grants."""

    banner: Banner | None
    refusals: list[dict[str, Any]]
    withdrawn: int
    grants: list[dict[str, Any]]

    @property
    def grants_open(self) -> int:
        """Grants not credited yet (pending, sending or failed)."""
        return sum(1 for g in self.grants if g["state"] != GrantState.GRANTED.value)


def _share(value: Any) -> str:
    return "–" if value is None else f"{100 * float(value):.0f}%"


def _rules(numbers: dict[str, Any], slug: str) -> list[RuleRow]:
    """The five rules (``breaker.read``'s names), measured at the trip against the served spec's
    limits; ``fired`` as the trip recorded it."""
    rules = breaker.rules_for(slug)
    fired = {str(f).split(" ", 1)[0] for f in numbers.get("fired") or []}

    def limit(name: str, side: str) -> str:
        value = getattr(rules, name, None) if rules is not None else None
        return "off" if value is None else f"{side} {_share(value)}"

    n = numbers.get
    return [
        RuleRow("qc_fail_share", "failed QC",
                f"{n('n_qc_failed', 0)} of {n('n_finished', 0)} finished "
                f"({_share(n('qc_fail_share'))})", limit("max_qc_fail_share", "above"),
                "qc_fail_share" in fired),
        RuleRow("return_share", "returned the study",
                f"{n('n_returned', 0)} of {n('n_finished', 0) + n('n_returned', 0)} "
                f"({_share(n('return_share'))})", limit("max_return_share", "above"),
                "return_share" in fired),
        RuleRow("error_rate", "server errors",
                f"{n('api_errors', 0)} of {n('api_answers', 0)} answers "
                f"({_share(n('error_rate'))})", limit("max_error_rate", "above"),
                "error_rate" in fired),
        RuleRow("median_time_share", "median time on task",
                f"{_share(n('median_time_share'))} of the timeline's estimate",
                limit("min_time_share", "below"), "median_time_share" in fired),
        RuleRow("flagged_share", "flagged by the authenticity screen",
                f"{n('n_flagged', 0)} of {n('n_finished', 0)} finished "
                f"({_share(n('flagged_share'))})", limit("max_flagged_share", "above"),
                "flagged_share" in fired),
    ]


def banner(exp: Experiment) -> Banner | None:
    """The open trip of ``exp`` for the banner (``breaker.notice``), or None."""
    notice = breaker.notice(exp)
    if notice is None:
        return None
    numbers = notice["numbers"] or {}
    counts = (f"{numbers.get('n_arrived', 0)} arrived · {numbers.get('n_finished', 0)} finished · "
              f"{numbers.get('n_returned', 0)} returned")
    if "n_sources" in numbers:  # trips since issue 45: what the breaker counted
        counts += (f" · {numbers.get('n_declined', 0)} declined (not counted) · "
                   f"{numbers['n_sources']} sources counted")
    return Banner(notice["id"], notice["tripped_at"], notice["reason"], counts,
                  _rules(numbers, exp.slug), notice["platform_action"])


def safety_view(exp: Experiment) -> SafetyView:
    """Five small queries, none per row."""
    return SafetyView(banner(exp), resume_policy.refusals(exp.id),
                      withdrawal.withdrawn_count(exp.slug), sona.grants(exp.slug))


@bp.get("/experiments/<slug>/breaker")
@requires(Permission.VIEW)
def breaker_fragment(slug: str):
    """The banner's slot (htmx asks every 10 s while nothing is tripped): the banner once a trip is
    open, else the empty slot again."""
    exp = experiment_or_404(slug)
    return render_template("admin/_breaker_slot.html", exp=exp, b=banner(exp))


@bp.app_template_filter("away")
def away(minutes: Any) -> str:
    """An absence in words: minutes under two hours, hours under two days, else days."""
    if minutes is None:
        return "–"
    value = float(minutes)
    if value < 120:
        return f"{value:.0f} min"
    if value < 48 * 60:
        return f"{value / 60:.1f} h"
    return f"{value / (24 * 60):.1f} days"


def _refused(message: str, status: int = 400):
    """A refused action: a page saying why; nothing was changed."""
    return render_template("message.html", title="Not done", message=message), status


@bp.post("/experiments/<slug>/breaker/resume")
@requires(Permission.SPEND)  # recruitment starts again: places are paid for
def breaker_resume(slug: str):
    """Resume recruitment after a trip: needs the tick and a note; ``breaker.resume`` closes the
    trip, sends Prolific START where there is a listing and writes the audit row."""
    exp = experiment_or_404(slug)  # the CSRF token is checked app-wide before this runs
    note = (request.form.get("note") or "").strip()
    if request.form.get("confirmed") != "yes":
        return _refused("tick the box to confirm that recruitment should resume (nothing was "
                        "changed)")
    if not note:
        return _refused("write a note saying why recruitment can resume: it goes into the "
                        "audit log (nothing was changed)")
    if len(note) > NOTE_LIMIT:
        return _refused(f"the note is longer than {NOTE_LIMIT} characters (nothing was changed)")
    trip = breaker.resume(exp, actor(), note)
    if trip is None:
        return _refused("recruitment is not paused by the circuit breaker: nothing to resume",
                        409)
    said = db.session.execute(sa.select(AuditEntry.detail).where(
        AuditEntry.action == "breaker_resume", AuditEntry.target == str(trip.id))
        .order_by(AuditEntry.id.desc()).limit(1)).scalar_one_or_none() or {}
    flash(f"Recruitment resumed: {said.get('platform_action', '')}. The breaker counts only "
          "participants arriving from now on.")
    return redirect(url_for("admin.experiment", slug=exp.slug))


@bp.post("/experiments/<slug>/sona/<public_id>/retry")
@requires(Permission.ACT)
def sona_retry(slug: str, public_id: str):
    """Send one participant's pending or failed SONA grant now (``sona.retry_one``, which audits
    the outcome), once the tick confirms it."""
    exp = experiment_or_404(slug)
    participant = db.session.execute(sa.select(Participant).where(
        Participant.public_id == public_id, Participant.experiment_id == exp.id)
    ).scalar_one_or_none()
    if participant is None:
        abort(404)
    if request.form.get("confirmed") != "yes":
        return _refused("tick the box to confirm that SONA should be asked to grant the credit "
                        "(nothing was sent)")
    state = sona.grant_state(participant)
    if state not in RETRYABLE:
        return _refused(f"this participant's SONA credit is {state or 'not a grant'}: nothing to "
                        "retry (nothing was sent)", 409)
    new = sona.retry_one(participant, actor=actor())
    flash(f"SONA credit for {participant.public_id}: {new}")
    if request.form.get("back") == "participant":
        return redirect(url_for("admin.participant", public_id=participant.public_id))
    return redirect(url_for("admin.experiment", slug=exp.slug) + "#sona")

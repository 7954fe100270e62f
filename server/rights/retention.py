"""Minimal storage and retention (spec ``[privacy]``): the user agent only when asked for, no IP
address (psiTurk's own ``ipaddress`` column aside, emptied here), and after ``retention_days`` the
participant's platform ids replaced by their keyed hash (the export's pseudonym,
``pseudonyms.pseudonym``) in every table: the participant's row, every row referring to it
(psiTurk's records, SONA's grant URL and reply included) and every other table holding one (the
audit log, the webhook events: ``scrub_elsewhere``)."""

from __future__ import annotations

import datetime as dt
import functools
import re
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from flask import current_app

from humanlike.server import audit
from humanlike.server.extensions import db
from humanlike.server.rights.deletion import referring
from humanlike.server.rights.pseudonyms import PREFIX, key_from_secret, pseudonym
from humanlike.server.study import experiments
from humanlike.server.study.spec import Privacy
from humanlike.server.tables.core import Experiment, Participant, Trial, utcnow

PERSONAL_COLUMNS = ("platform_id", "session_id", "assignment_id")
"""A participant's own ids on the platform: replaced wherever they occur."""
LISTING_COLUMNS = ("study_id", "hit_id")
"""The listing's ids on a participant's row: replaced there (the experiment keeps its listing)."""
IP_COLUMNS = ("ipaddress", "ip_address")
"""Columns holding a client's IP address (psiTurk's ``psiturk_assignment.ipaddress``, kept as psiTurk
keeps it): emptied by retention with the ids."""
MIN_SUBSTRING = 6
"""Ids this long are replaced wherever they occur inside a text."""
MIN_TOKEN = 4
"""Shorter ids (a SONA survey code has 5 digits) are replaced where they stand as a whole token,
not inside a longer word or number (a timestamp's digits); ids under 4 characters only where they
are a whole value."""
LIKE_CHUNK = 50
"""Ids per ``LIKE`` prefilter query of ``scrub_elsewhere``."""
ACTION = "retention"


def privacy(slug: str) -> Privacy:
    """The served spec's ``[privacy]`` table (a deployment setting, not stored with spec versions)."""
    loaded = experiments.registry().get(slug)
    return loaded.spec.privacy if loaded is not None else Privacy()


def _key() -> bytes:
    return key_from_secret(current_app.config["SECRET_KEY"])


def hashed(slug: str, value: str) -> str:
    """The keyed hash that replaces ``value`` (the export's pseudonym of it)."""
    return pseudonym(_key(), slug, value)


def is_hashed(value: str | None) -> bool:
    """True for a value already replaced by its keyed hash."""
    return bool(value) and str(value).startswith(PREFIX)


@functools.lru_cache(maxsize=4096)
def _token(value: str) -> re.Pattern[str]:
    """``value`` as a whole token: neither preceded nor followed by a letter or digit."""
    return re.compile(rf"(?<![0-9A-Za-z]){re.escape(value)}(?![0-9A-Za-z])")


def scrub(value: Any, mapping: dict[str, str]) -> Any:
    """``value`` (text or JSON) with every id of ``mapping`` replaced by its hash (inside texts:
    ids of ``MIN_SUBSTRING`` characters anywhere, of ``MIN_TOKEN`` as whole tokens)."""
    if isinstance(value, str):
        if value in mapping:
            return mapping[value]
        for old, new in mapping.items():
            if old not in value:
                continue
            if len(old) >= MIN_SUBSTRING:
                value = value.replace(old, new)
            elif len(old) >= MIN_TOKEN:
                value = _token(old).sub(new, value)
        return value
    if isinstance(value, dict):
        return {scrub(k, mapping): scrub(v, mapping) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, mapping) for v in value]
    return value


def _texts(table: sa.Table, skip: sa.Column[Any] | None = None) -> list[sa.Column[Any]]:
    """The table's text and JSON columns (its key and ``skip`` aside)."""
    keys = list(table.primary_key.columns)
    return [c for c in table.columns if c not in keys and c is not skip and (
        isinstance(c.type, (sa.String, sa.Text, sa.JSON)) or c.type.__class__.__name__ == "JSONB"
        or isinstance(getattr(c.type, "impl", None), sa.JSON))]


def _scrub_selected(table: sa.Table, texts: list[sa.Column[Any]], where: Any,
                    mapping: dict[str, str]) -> list[Any]:
    """Scrub ``texts`` of ``table``'s rows matching ``where``; the rows' keys."""
    keys = list(table.primary_key.columns)
    rows = db.session.execute(sa.select(*keys, *texts).where(where)).all()
    for row in rows:
        values = dict(zip([c.name for c in texts], row[len(keys):], strict=True))
        changed = {k: None if k in IP_COLUMNS else scrub(v, mapping)
                   for k, v in values.items() if v is not None}
        changed = {k: v for k, v in changed.items() if v != values[k]}
        if changed:
            match = sa.and_(*(k == row[i] for i, k in enumerate(keys)))
            db.session.execute(sa.update(table).where(match).values(**changed))
    return [row[: len(keys)] for row in rows]


def _scrub_rows(table: sa.Table, column: sa.Column[Any], ids: list[Any],
                mapping: dict[str, str]) -> None:
    """Scrub the text and JSON columns of ``table``'s rows whose ``column`` is in ``ids``, and of
    the rows referring to those (recursively)."""
    if not ids:
        return
    rows = _scrub_selected(table, _texts(table, column), column.in_(ids), mapping)
    if len(table.primary_key.columns) == 1:
        own = [row[0] for row in rows]
        for child, fk in referring(table):
            _scrub_rows(child, fk, own, mapping)


def _below_participant() -> set[str]:
    """Names of the tables whose rows belong to a participant (referring to it, at any depth)."""
    found: set[str] = set()
    todo = [Participant.__table__]
    while todo:
        for child, _ in referring(todo.pop()):
            if child.name not in found:
                found.add(child.name)
                todo.append(child)
    return found


def _like(column: sa.Column[Any], value: str) -> Any:
    escaped = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return sa.cast(column, sa.Text).like(f"%{escaped}%", escape="\\")


def scrub_elsewhere(mapping: dict[str, str]) -> None:
    """Replace the ids of ``mapping`` in every table that does not belong to a participant (the
    audit log, webhook events, experiments' listing notes, panel results ... any table added
    later): rows found with a ``LIKE`` per text column, then scrubbed as ``scrub`` does."""
    ids = sorted(k for k in mapping if len(k) >= MIN_TOKEN)
    whole = sorted(k for k in mapping if len(k) < MIN_TOKEN)
    skip = _below_participant() | {Participant.__tablename__}
    for table in db.metadata.sorted_tables:
        if table.name in skip or not list(table.primary_key.columns):
            continue  # rows are rewritten by their key
        for column in _texts(table):
            for start in range(0, len(ids), LIKE_CHUNK):
                chunk = ids[start:start + LIKE_CHUNK]
                _scrub_selected(table, [column], sa.or_(*(_like(column, v) for v in chunk)),
                                mapping)
            if whole and isinstance(column.type, sa.String):
                _scrub_selected(table, [column], column.in_(whole), mapping)


@dataclass(frozen=True)
class RetentionRun:
    """What one run did: participants whose ids were replaced, and the cutoff it used."""

    slug: str
    retention_days: int | None
    cutoff: dt.datetime | None
    public_ids: list[str]


def last_activity_column() -> Any:
    """SQL: a participant's last activity (last stored trial, completion, or arrival)."""
    last_trial = (sa.select(sa.func.max(Trial.server_time))
                  .where(Trial.participant_id == Participant.id).scalar_subquery())
    return sa.func.coalesce(last_trial, Participant.completed_at, Participant.created_at)


def due(exp: Experiment, cutoff: dt.datetime) -> list[Participant]:
    """The experiment's participants last active before ``cutoff`` whose ids are still in clear."""
    return list(db.session.execute(
        sa.select(Participant).where(Participant.experiment_id == exp.id,
                                     sa.not_(Participant.platform_id.startswith(PREFIX)),
                                     last_activity_column() < cutoff)
        .order_by(Participant.id)).scalars())


def pseudonymise_participant(participant: Participant, slug: str) -> dict[str, str]:
    """Replace the participant's ids by their keyed hashes everywhere; returns the mapping used."""
    mapping = {v: hashed(slug, v) for v in (getattr(participant, c) for c in PERSONAL_COLUMNS)
               if v and not is_hashed(v)}
    for column in PERSONAL_COLUMNS + LISTING_COLUMNS:
        value = getattr(participant, column)
        if value and not is_hashed(value):
            setattr(participant, column, hashed(slug, value))
    db.session.flush()
    for child, fk in referring(Participant.__table__):
        _scrub_rows(child, fk, [participant.id], mapping)
    return mapping


def run(slug: str, actor: str, now: dt.datetime | None = None) -> RetentionRun:
    """Apply the experiment's retention period at ``now``: replace the ids of every participant
    last active more than ``retention_days`` ago, scrub the audit log, audit the run; committed."""
    exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == slug)).scalar_one_or_none()
    if exp is None:
        raise LookupError(f"no experiment {slug!r} in the database")
    from humanlike.server.rights.ledger import forget_late_events

    forget_late_events()  # webhooks about a withdrawn participant's submission, since
    days = privacy(slug).retention_days
    if days is None:
        db.session.commit()
        return RetentionRun(slug, None, None, [])
    now = now or utcnow()
    cutoff = now - dt.timedelta(days=days)
    done, mapping = [], {}
    for participant in due(exp, cutoff):
        mapping.update(pseudonymise_participant(participant, slug))
        done.append(participant.public_id)
    if mapping:
        scrub_elsewhere(mapping)
    if done:
        audit.record(actor, ACTION, experiment=slug, detail={
            "retention_days": days, "cutoff": cutoff.isoformat(), "n_participants": len(done)})
    db.session.commit()
    return RetentionRun(slug, days, cutoff, done)


def hashed_elsewhere(slugs: list[str], platform: str, platform_id: str | None) -> bool:
    """True when this platform id took part in one of the experiments ``slugs`` and its id there
    was since replaced (``allocation.took_part_elsewhere`` compares ids in clear)."""
    if not platform_id or not slugs:
        return False
    either = sa.or_(*(sa.and_(Experiment.slug == slug, Participant.platform_id == hashed(slug, platform_id))
                      for slug in slugs))
    return db.session.execute(sa.select(Participant.id).join(Experiment).where(
        Participant.platform == platform, either).limit(1)).first() is not None


def hashed_participant(exp: Experiment, platform: str, platform_id: str | None) -> bool:
    """True when a participant with this platform id took part and its id was since replaced."""
    if not platform_id:
        return False
    return db.session.execute(sa.select(Participant.id).where(
        Participant.experiment_id == exp.id, Participant.platform == platform,
        Participant.platform_id == hashed(exp.slug, platform_id)).limit(1)).first() is not None


def stored_note(slug: str) -> dict[str, str]:
    """What was stored for ``slug`` and for how long: the codebook's ``stored`` section."""
    from humanlike.server.rights.withdrawal import withdrawn_count

    settings = privacy(slug)
    days = settings.retention_days
    return {
        "user_agent": ("stored (participants.user_agent): [privacy] store_user_agent = true"
                       if settings.store_user_agent else
                       "not stored ([privacy] store_user_agent = false): participants.user_agent "
                       "is empty; the User-Agent header is only read to refuse phones"),
        "ip_address": "never stored",
        "platform_ids": (f"kept in clear for {days} days after a participant's last activity, "
                         "then replaced by the keyed hash 'pn-' + 16 hex digits (humanlike "
                         "retention, audited)" if days else
                         "kept until the participant is deleted (no [privacy] retention_days)"),
        "withdrawals": (f"{withdrawn_count(slug)} participant(s) withdrew: every row about them "
                        "was deleted and is in no file"),
        "resume_policy": ("events of type resume_policy: the decision on each return (action, "
                          "policy, block, age_minutes, reason; restarted: the answers of a "
                          "restarted block, asked again); events of type stale_trial: a trial "
                          "answered before its block restarted and sent afterwards (the trial as "
                          "sent, its attempt and the participant's current one)"),
    }

"""The experiments a server runs: specs loaded from disk and checked against their manifests, then
snapshotted in the database as immutable versions; each participant is served the version it was
allocated under, and new participants the experiment's current version (the DB decides, not a
worker's copy of the file)."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import markdown
import sqlalchemy as sa
from flask import Flask, current_app
from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from humanlike.server import audit
from humanlike.server.extensions import db
from humanlike.server.lifecycle import PRE_TRIAL, ExperimentStatus, ParticipantStatus
from humanlike.server.study.manifest import StimulusRecord, read_manifest, sha256_of
from humanlike.server.study.spec import Block, ExperimentSpec, SpecError, load_spec, version_hash
from humanlike.server.tables.core import Experiment, Participant, SpecVersion, Stimulus
from humanlike.server.trial_types.registry import TRIAL_TYPES
from humanlike.vocabulary import StimulusKind

log = logging.getLogger(__name__)
#: Seconds a worker trusts its memory of an experiment's current version before asking the DB.
CURRENT_TTL_S = 1.0
TEXT_FIELDS = ("consent", "instructions")


class SpecChangeRefused(SpecError):
    """The spec on disk differs from the current version while participants exist."""


@dataclass(frozen=True)
class LoadedExperiment:
    """A validated spec with its folder, stimulus folder, manifest rows and rendered texts.

    ``version_id`` is the ``spec_version`` row it is stored as (None until synced)."""

    spec: ExperimentSpec
    spec_path: Path
    root: Path
    stimulus_root: Path
    stimuli: tuple[StimulusRecord, ...]
    texts: Mapping[str, str]
    version_id: int | None = None

    @property
    def slug(self) -> str:
        return self.spec.slug

    def markdown_html(self, field: str) -> str:
        """The consent or instructions text as HTML, as rendered when the version was loaded."""
        return self.texts[field]

    @cached_property
    def version_hash(self) -> str:
        """The hash that identifies this version (spec, texts and manifest rows)."""
        return version_hash(self.spec, self.texts, self.stimulus_rows())

    def stimulus_rows(self) -> list[dict[str, Any]]:
        """The manifest rows as JSON-ready dicts (as snapshotted)."""
        return [dataclasses.asdict(r) for r in self.stimuli]

    @cached_property
    def stimulus_hashes(self) -> dict[str, str]:
        """Key -> the sha256 this version was validated with (its manifest rows)."""
        return {s.key: s.sha256 for s in self.stimuli}

    def stimulus_keys(self) -> set[str]:
        """Keys of every file this experiment may serve (stimuli and mask)."""
        keys = {s.key for s in self.stimuli}
        masks = [self.spec.presentation.mask] + [
            c.presentation.mask for c in self.spec.conditions if c.presentation
        ]
        keys.update(m for m in masks if m)
        return keys


def render_markdown(text: str) -> str:
    """A text's Markdown as the HTML participants see (raw HTML in it is escaped)."""
    return markdown.markdown(text.replace("<", "&lt;"), extensions=["extra"])


def render_texts(root: Path, spec: ExperimentSpec) -> dict[str, str]:
    """Consent and instructions Markdown rendered to HTML (raw HTML in them is escaped)."""
    return {field: render_markdown((root / getattr(spec, field)).read_text(encoding="utf-8"))
            for field in TEXT_FIELDS}


def text_sources(root: Path, spec: Mapping[str, Any], texts: Mapping[str, str]) -> dict[str, str]:
    """Each text's Markdown file under ``root``, URLs cut as a dataset publishes them
    (``disclosure.scrub``), where it still renders to the HTML the version showed (``texts``)."""
    from humanlike.analysis.psychds.disclosure import scrub

    sources = {}
    for field in TEXT_FIELDS:
        try:
            source = scrub((root / str(spec[field])).read_text(encoding="utf-8"))
        except (KeyError, OSError, UnicodeDecodeError):
            continue
        if render_markdown(source) == texts.get(field):
            sources[field] = source
    return sources


def _check_counts(spec_path: Path, i: int, block: Block, records: tuple[StimulusRecord, ...]) -> None:
    """Catch trials and practice trials the manifest cannot supply are an error unless ``cap``
    (how many practice trials it supplies is the block type's ``practice_supply``)."""
    if block.cap:
        return
    n_catch = sum(r.kind == StimulusKind.CATCH for r in records)
    if block.catch_trials > n_catch:
        raise SpecError(
            f"{spec_path}: blocks.{i} ({block.name}).catch_trials: asks for {block.catch_trials} catch trials but "
            f"the manifest holds {n_catch} catch stimuli (set cap = true to use what there is)"
        )
    available = TRIAL_TYPES[block.trial_type].practice_supply(block, records)
    if block.practice > available:
        raise SpecError(
            f"{spec_path}: blocks.{i} ({block.name}).practice: asks for {block.practice} practice trials but the "
            f"manifest supplies {available} (set cap = true to use what there is)"
        )


def _check_timelines(spec_path: Path, spec: ExperimentSpec,
                     records: tuple[StimulusRecord, ...]) -> None:
    """Build one seeded timeline per condition (the ``[adaptive]`` block as its uniform draw), so
    that what would fail at a participant's arrival fails at load, naming the block's field."""
    from humanlike.server.study import adaptive
    from humanlike.server.study.timeline import TimelineProblem, generate_timeline

    drawn = None
    if spec.adaptive is not None:
        by_kind: dict[str, list[str]] = {}
        for rec in records:
            by_kind.setdefault(rec.kind, []).append(rec.key)
        pool = adaptive.pool_keys(spec, by_kind, {r.key: r.meta.get("block") for r in records})
        draw = adaptive.draw(spec, pool, None, seed=0)
        drawn = {draw["block"]: draw["random"] + draw["weighted"]}
    for condition in spec.conditions:
        try:
            generate_timeline(spec, list(records), condition.name, seed=0, drawn=drawn)
        except TimelineProblem as exc:
            i = spec.blocks.index(exc.block)
            field = f"blocks.{i} ({exc.block.name})" + (f".{exc.field}" if exc.field else "")
            raise SpecError(f"{spec_path}: {field}: {exc} (condition {condition.name!r}: no "
                            "participant's timeline could be built)") from exc
        except (ValueError, KeyError, IndexError) as exc:
            raise SpecError(f"{spec_path}: condition {condition.name!r}: no participant's "
                            f"timeline could be built: {exc}") from exc


def load_experiment(spec_path: str | Path) -> LoadedExperiment:
    """Load a spec and its manifest and check they fit together (each block's type checks the
    rows it needs: ``TrialType.check_manifest``); ``SpecError`` names what is wrong."""
    spec_path = Path(spec_path).resolve()
    spec = load_spec(spec_path)
    root = spec_path.parent
    manifest_path = root / spec.manifest
    records = tuple(read_manifest(manifest_path))
    labels = {c.label for c in spec.categories}
    kinds = {r.kind for r in records}
    for i, block in enumerate(spec.blocks):
        missing = [str(k) for k in block.kinds if k not in kinds]
        if missing:
            raise SpecError(
                f"{spec_path}: blocks.{i} ({block.name}).kinds: the manifest {spec.manifest} has no stimuli of "
                f"kind {missing}"
            )
        if block.catch_trials and StimulusKind.CATCH not in kinds:
            raise SpecError(f"{spec_path}: blocks.{i} ({block.name}).catch_trials: the manifest has "
                            "no catch stimuli")
        _check_counts(spec_path, i, block, records)
        check = TRIAL_TYPES[block.trial_type].check_manifest
        problem = check(block, records) if check is not None else None
        if problem is not None:
            raise SpecError(f"{manifest_path}: {problem}")
    if labels and any(TRIAL_TYPES[b.trial_type].needs_categories for b in spec.blocks):
        for r in records:
            if (r.true_class is not None and r.kind in (StimulusKind.NATURAL, StimulusKind.CATCH)
                    and r.true_class not in labels):
                raise SpecError(
                    f"{manifest_path}: stimulus {r.key!r}: true_class {r.true_class!r} is not a "
                    f"category label ({sorted(labels)})"
                )
    stimulus_root = manifest_path.parent
    masks = [spec.presentation.mask] + [c.presentation.mask for c in spec.conditions if c.presentation]
    for mask in filter(None, masks):
        if not (stimulus_root / mask).resolve().is_file():
            raise SpecError(f"{spec_path}: presentation.mask: file not found: {mask}")
    _check_timelines(spec_path, spec, records)
    return LoadedExperiment(spec, spec_path, root, stimulus_root, records,
                            render_texts(root, spec))


class _State:
    """Per-process registry state: what each spec file held at boot, and the versions seen since."""

    def __init__(self, loads: dict[str, LoadedExperiment | SpecError]):
        self.loads = loads  # resolved spec path -> the loaded file, or why it could not be loaded
        self.lock = threading.RLock()
        self.reconciled = False
        self.problems: list[str] = []
        self.versions: dict[int, LoadedExperiment] = {}  # immutable, so cached for good
        self.current: dict[str, tuple[float, int | None, tuple[int, ...]]] = {}


def _stored_version_exists(app: Flask, source: str) -> bool:
    """True when the database holds a version loaded from this spec file (False if it cannot tell)."""
    with app.app_context():
        try:
            return db.session.execute(
                sa.select(SpecVersion.id).where(SpecVersion.source == source).limit(1)
            ).first() is not None
        except SQLAlchemyError:
            db.session.rollback()
            return False
        finally:
            db.session.remove()


def init_app(app: Flask) -> None:
    """Load and validate every spec in ``EXPERIMENT_PATHS`` (``app.extensions['humanlike']``).

    A file that fails validation raises ``SpecError``, unless the database already holds a version
    loaded from it: the error is then logged and that stored version is served (a TOML typo never
    takes a running server down)."""
    registry: dict[str, LoadedExperiment] = {}
    loads: dict[str, LoadedExperiment | SpecError] = {}
    for path in app.config.get("EXPERIMENT_PATHS", []):
        source = str(Path(path).resolve())
        try:
            loaded = load_experiment(path)
        except SpecError as exc:
            if not _stored_version_exists(app, source):
                raise
            app.logger.error("%s\n(serving the last good version stored in the database)", exc)
            loads[source] = exc
            continue
        if loaded.slug in registry:
            raise SpecError(f"{path}: slug {loaded.slug!r} is used by two experiments")
        registry[loaded.slug] = loaded
        loads[source] = loaded
    app.extensions["humanlike"] = registry
    app.extensions["humanlike_specs"] = _State(loads)


def _state() -> _State:
    return current_app.extensions["humanlike_specs"]


def registry() -> dict[str, LoadedExperiment]:
    """The experiments this app serves, by slug (after reconciling the spec files with the DB)."""
    _ensure_reconciled()
    return current_app.extensions["humanlike"]


def _ensure_reconciled() -> None:
    state = _state()
    if not state.reconciled:
        reconcile(current_app)


def _is_legacy_same_spec(exp: Experiment, loaded: LoadedExperiment) -> bool:
    """The current version was backfilled by migration 0004 and holds exactly this spec."""
    row = db.session.execute(sa.select(SpecVersion).where(
        SpecVersion.experiment_id == exp.id, SpecVersion.hash == exp.spec_hash)).scalar_one_or_none()
    return (row is not None and row.texts is None
            and row.spec == loaded.spec.model_dump(mode="json"))


def sync(loaded: LoadedExperiment, allow_change: bool = False) -> LoadedExperiment:
    """Make ``loaded`` its experiment's current version: snapshot it, update the experiment row and
    its stimuli (by key; existing rows keep their ids). Returns it with its ``version_id``.

    A version other than the current one is refused (``SpecChangeRefused``, nothing written) while
    the experiment has participants, unless ``allow_change``; a change is audit-logged."""
    for attempt in range(3):  # a concurrent worker may insert the same rows first
        try:
            return _sync_once(loaded, allow_change)
        except IntegrityError:
            db.session.rollback()
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _sync_once(loaded: LoadedExperiment, allow_change: bool) -> LoadedExperiment:
    digest = loaded.version_hash
    exp = db.session.execute(
        sa.select(Experiment).where(Experiment.slug == loaded.slug)
    ).scalar_one_or_none()
    spec_json = loaded.spec.model_dump(mode="json")
    previous = None if exp is None else exp.spec_hash
    if exp is not None and exp.spec_hash != digest:
        previous = exp.spec_hash
        n = db.session.execute(
            sa.select(sa.func.count()).where(Participant.experiment_id == exp.id)
        ).scalar_one()
        if n and not allow_change and not _is_legacy_same_spec(exp, loaded):
            raise SpecChangeRefused(
                f"{loaded.spec_path}: the spec of experiment {loaded.slug!r} changed (version "
                f"{exp.spec_hash[:12]} -> {digest[:12]}) while {n} participants exist: refused, "
                f"the stored version {exp.spec_hash[:12]} stays in use. Restore the file, or restart with "
                "--allow-spec-change (config ALLOW_SPEC_CHANGE) to give new participants the new "
                "version (participants already allocated keep theirs)"
            )
        changed, active = _renamed_content(exp, loaded)
        if changed:
            shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5
                                             else "")
            raise SpecChangeRefused(
                f"{loaded.spec_path}: stimulus file(s) {shown} of experiment {loaded.slug!r} have "
                f"new content under the same name while {active} participant(s) of an older "
                "version are still in progress (they would be shown the new file): refused. Give "
                "the changed file a new name in the manifest (a new version then serves both), or "
                "restore it")
        audit.record("server", "spec_change", experiment=loaded.slug, target=digest[:64],
                     detail={"from": previous, "to": digest, "participants": n,
                             "source": str(loaded.spec_path)})
    if exp is None:
        exp = Experiment(
            slug=loaded.slug,
            title=loaded.spec.title,
            spec=spec_json,
            spec_hash=digest,
            root=str(loaded.root),
            status=ExperimentStatus.LIVE.value,
            platform=loaded.spec.platform_name,
        )
        db.session.add(exp)
        db.session.flush()
    else:
        exp.title, exp.spec, exp.spec_hash = loaded.spec.title, spec_json, digest
        exp.root, exp.platform = str(loaded.root), loaded.spec.platform_name
    version = db.session.execute(sa.select(SpecVersion).where(
        SpecVersion.experiment_id == exp.id, SpecVersion.hash == digest)).scalar_one_or_none()
    if version is None:
        version = SpecVersion(experiment_id=exp.id, hash=digest, spec=spec_json,
                              texts=dict(loaded.texts), stimuli=loaded.stimulus_rows(),
                              source=str(loaded.spec_path))
        db.session.add(version)
    existing = {
        s.key: s
        for s in db.session.execute(sa.select(Stimulus).where(Stimulus.experiment_id == exp.id))
        .scalars()
        .all()
    }
    for rec in loaded.stimuli:
        row = existing.get(rec.key)
        if row is None:
            db.session.add(
                Stimulus(
                    experiment_id=exp.id,
                    key=rec.key,
                    sha256=rec.sha256,
                    kind=rec.kind,
                    true_class=rec.true_class,
                    meta=rec.meta,
                )
            )
        else:
            row.sha256, row.kind, row.true_class, row.meta = (
                rec.sha256,
                rec.kind,
                rec.true_class,
                rec.meta,
            )
    db.session.flush()
    version_id = version.id
    db.session.commit()
    return dataclasses.replace(loaded, version_id=version_id)


def reconcile(app: Flask) -> list[str]:
    """Bring this process' registry in line with the DB: adopt each valid spec file as its
    experiment's current version where allowed, else serve the stored current version.

    Returns the problems (refused changes, unreadable files), which are also logged."""
    state: _State = app.extensions["humanlike_specs"]
    allow = bool(app.config.get("ALLOW_SPEC_CHANGE"))
    served_by_slug: dict[str, LoadedExperiment] = app.extensions["humanlike"]
    with state.lock, app.app_context():
        problems = []
        for source, outcome in state.loads.items():
            served: LoadedExperiment | None
            if isinstance(outcome, LoadedExperiment):
                try:
                    served = sync(outcome, allow_change=allow)
                except SpecChangeRefused as exc:
                    db.session.rollback()
                    app.logger.error("%s", exc)
                    problems.append(str(exc))
                    served = _stored_current(outcome.slug, fallback=outcome)
            else:
                problems.append(str(outcome))
                served = _stored_by_source(source)
            if served is not None:
                served_by_slug[served.slug] = served
                if served.version_id is not None:
                    state.versions[served.version_id] = served
        state.current.clear()
        state.problems, state.reconciled = problems, True
    return problems


def _stored_current(slug: str, fallback: LoadedExperiment | None = None) -> LoadedExperiment | None:
    """The experiment's current version as stored in the DB."""
    row = db.session.execute(
        sa.select(SpecVersion.id).join(Experiment, SpecVersion.experiment_id == Experiment.id)
        .where(Experiment.slug == slug, SpecVersion.hash == Experiment.spec_hash)
    ).scalar_one_or_none()
    return fallback if row is None else _version(row, fallback)


def _stored_by_source(source: str) -> LoadedExperiment | None:
    """The current version of the experiment last loaded from this spec file."""
    slug = db.session.execute(
        sa.select(Experiment.slug).join(SpecVersion, SpecVersion.experiment_id == Experiment.id)
        .where(SpecVersion.source == source).order_by(SpecVersion.id.desc()).limit(1)
    ).scalar_one_or_none()
    return None if slug is None else _stored_current(slug)


def _version(version_id: int, fallback: LoadedExperiment | None = None) -> LoadedExperiment | None:
    """A stored version rebuilt from its snapshot (cached: versions never change)."""
    state = _state()
    cached = state.versions.get(version_id)
    if cached is not None:
        return cached
    row = db.session.get(SpecVersion, version_id)
    if row is None:
        return fallback
    exp = db.session.get(Experiment, row.experiment_id)
    assert exp is not None  # foreign key
    if fallback is None:
        fallback = current_app.extensions["humanlike"].get(exp.slug)
    try:
        spec = ExperimentSpec.model_validate(row.spec)
    except ValidationError:  # a backfilled version of an older spec format
        return fallback
    root = Path(exp.root)
    if row.texts is not None:
        texts: Mapping[str, str] = row.texts
    elif fallback is not None:
        texts = fallback.texts
    else:
        texts = {field: "" for field in TEXT_FIELDS}
    if row.stimuli is not None:
        stimuli = tuple(StimulusRecord(**r) for r in row.stimuli)
    else:
        stimuli = tuple(
            StimulusRecord(s.key, s.kind, s.true_class, s.sha256, s.meta or {})
            for s in db.session.execute(sa.select(Stimulus).where(
                Stimulus.experiment_id == exp.id).order_by(Stimulus.id)).scalars()
        )
    loaded = LoadedExperiment(
        spec=spec, spec_path=Path(row.source) if row.source else root / "experiment.toml",
        root=root, stimulus_root=(root / spec.manifest).parent, stimuli=stimuli, texts=texts,
        version_id=row.id,
    )
    state.versions[version_id] = loaded
    return loaded


def _current_ids(slug: str) -> tuple[int | None, tuple[int, ...]]:
    """(current version id, every version id) of an experiment, rechecked every CURRENT_TTL_S."""
    state = _state()
    now = time.monotonic()
    cached = state.current.get(slug)
    if cached is not None and now - cached[0] < CURRENT_TTL_S:
        return cached[1], cached[2]
    rows = db.session.execute(
        sa.select(SpecVersion.id, SpecVersion.hash == Experiment.spec_hash)
        .join(Experiment, SpecVersion.experiment_id == Experiment.id)
        .where(Experiment.slug == slug).order_by(SpecVersion.id)
    ).all()
    current = next((vid for vid, is_current in rows if is_current), None)
    ids = tuple(vid for vid, _ in rows)
    state.current[slug] = (now, current, ids)
    return current, ids


def get(slug: str) -> LoadedExperiment | None:
    """The version of this experiment new participants are allocated under (the DB's current)."""
    served = registry()
    current, _ = _current_ids(slug)
    if current is None:
        return served.get(slug)
    return _version(current, served.get(slug))


def for_participant(participant: Participant) -> LoadedExperiment | None:
    """The version a participant was allocated under (the current one for rows from before 0004)."""
    if participant.spec_version_id is None:
        return get(participant.experiment.slug)
    _ensure_reconciled()
    return _version(participant.spec_version_id)


_FILE_HASHES: dict[str, tuple[int, int, str]] = {}
"""Path -> (mtime_ns, size, sha256): a file is hashed again only when its stat changes."""
_WARNED: set[tuple[str, str | None]] = set()


def current_sha256(path: Path) -> str | None:
    """The sha256 of the file's bytes now (None when it is missing), cached by its stat."""
    try:
        stat = path.stat()
    except OSError:
        return None
    cached = _FILE_HASHES.get(str(path))
    if cached is not None and cached[:2] == (stat.st_mtime_ns, stat.st_size):
        return cached[2]
    digest = sha256_of(path)
    _FILE_HASHES[str(path)] = (stat.st_mtime_ns, stat.st_size, digest)
    return digest


def stimulus_root_for(slug: str, filename: str) -> Path | None:
    """The folder to serve ``filename`` from: that of a version of the experiment that lists it and
    whose recorded sha256 the file on disk still has (a mask, outside the manifest, is not hashed).
    A listed file whose bytes match no such version is refused (None) and logged once."""
    current = get(slug)
    _, ids = _current_ids(slug)
    seen: tuple[str, str | None] | None = None
    for version in (current, *(_version(vid) for vid in reversed(ids))):
        if version is None or filename not in version.stimulus_keys():
            continue
        expected = version.stimulus_hashes.get(filename)
        digest = current_sha256(version.stimulus_root / filename)
        if expected is None or digest == expected:
            return version.stimulus_root
        seen = (str(version.stimulus_root / filename), digest)
    if seen is not None and seen not in _WARNED:  # once per file and content
        _WARNED.add(seen)
        log.error(
            "stimulus %s/%s changed on disk since its spec version was validated: not served "
            "(restore the file, or give new content a new name)", slug, filename)
    return None


ACTIVE = PRE_TRIAL | {ParticipantStatus.STARTED, ParticipantStatus.TIMED_OUT}
"""Participants who may still load stimuli (a timed-out one may resume)."""


def _renamed_content(exp: Experiment, loaded: LoadedExperiment) -> tuple[list[str], int]:
    """Keys the new version gives other bytes than a stored version whose participants are still
    active, and how many such participants there are."""
    active = db.session.execute(
        sa.select(SpecVersion.stimuli, sa.func.count(Participant.id))
        .join(Participant, Participant.spec_version_id == SpecVersion.id)
        .where(SpecVersion.experiment_id == exp.id,
               Participant.status.in_([s.value for s in ACTIVE]))
        .group_by(SpecVersion.id, SpecVersion.stimuli)).all()
    changed: set[str] = set()
    for stimuli, _ in active:
        old = {r["key"]: r["sha256"] for r in stimuli or []}
        changed.update(k for k, digest in loaded.stimulus_hashes.items()
                       if k in old and old[k] != digest)
    return sorted(changed), sum(int(n) for _, n in active)


def version_hashes(experiment_id: int) -> dict[int, str]:
    """Version id -> version hash for one experiment (the export's ``spec_version`` column)."""
    return dict(db.session.execute(
        sa.select(SpecVersion.id, SpecVersion.hash).where(SpecVersion.experiment_id == experiment_id)
    ).all())


def sync_all(app: Flask) -> list[str]:
    """Sync every served experiment into the database; returns the problems (also logged)."""
    return reconcile(app)

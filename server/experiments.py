"""The experiments a server runs: specs loaded from disk, checked against their manifests, synced to the DB."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import markdown
import sqlalchemy as sa
from flask import Flask, current_app

from humanlike.server.extensions import db
from humanlike.server.lifecycle import ExperimentStatus
from humanlike.server.manifest import StimulusRecord, read_manifest
from humanlike.server.models import Experiment, Stimulus
from humanlike.server.spec import Block, ExperimentSpec, SpecError, load_spec
from humanlike.server.trial_types import TRIAL_TYPES
from humanlike.vocabulary import StimulusKind


@dataclass(frozen=True)
class LoadedExperiment:
    """A validated spec together with its folder, stimulus folder and manifest rows."""

    spec: ExperimentSpec
    spec_path: Path
    root: Path
    stimulus_root: Path
    stimuli: tuple[StimulusRecord, ...]

    @property
    def slug(self) -> str:
        return self.spec.slug

    def markdown_html(self, field: str) -> str:
        """The consent or instructions Markdown file rendered to HTML (raw HTML in it is escaped)."""
        return self._rendered[field]

    @cached_property
    def _rendered(self) -> dict[str, str]:
        """Consent and instructions rendered once per process (the files are part of the spec)."""
        out = {}
        for field in ("consent", "instructions"):
            text = (self.root / getattr(self.spec, field)).read_text(encoding="utf-8")
            out[field] = markdown.markdown(text.replace("<", "&lt;"), extensions=["extra"])
        return out

    def stimulus_keys(self) -> set[str]:
        """Keys of every file this experiment may serve (stimuli and mask)."""
        keys = {s.key for s in self.stimuli}
        masks = [self.spec.presentation.mask] + [
            c.presentation.mask for c in self.spec.conditions if c.presentation
        ]
        keys.update(m for m in masks if m)
        return keys


def _check_counts(spec_path: Path, i: int, block: Block, records: tuple[StimulusRecord, ...]) -> None:
    """Catch trials and practice trials the manifest cannot supply are an error unless ``cap``."""
    if block.cap:
        return
    n_catch = sum(r.kind == StimulusKind.CATCH for r in records)
    if block.catch_trials > n_catch:
        raise SpecError(
            f"{spec_path}: blocks.{i}.catch_trials: asks for {block.catch_trials} catch trials but "
            f"the manifest holds {n_catch} catch stimuli (set cap = true to use what there is)"
        )
    if block.trial_type == "triad":
        levels: dict[str, int] = {}
        for r in records:
            if r.kind in block.kinds:
                seq = str(r.meta.get("sequence"))
                levels[seq] = levels.get(seq, 0) + 1
        available = sum(n * (n - 1) * (n - 2) // 6 for n in levels.values())
    else:
        pool = sum(r.kind in block.kinds for r in records)
        spare = n_catch - block.catch_trials
        available = spare if spare > 0 else pool
    if block.practice > available:
        raise SpecError(
            f"{spec_path}: blocks.{i}.practice: asks for {block.practice} practice trials but the "
            f"manifest supplies {available} (set cap = true to use what there is)"
        )


def load_experiment(spec_path: str | Path) -> LoadedExperiment:
    """Load a spec and its manifest and check they fit together; ``SpecError`` names what is wrong."""
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
                f"{spec_path}: blocks.{i}.kinds: the manifest {spec.manifest} has no stimuli of "
                f"kind {missing}"
            )
        if block.catch_trials and StimulusKind.CATCH not in kinds:
            raise SpecError(f"{spec_path}: blocks.{i}.catch_trials: the manifest has no catch stimuli")
        _check_counts(spec_path, i, block, records)
        if block.trial_type == "triad":
            for r in records:
                if r.kind == StimulusKind.MLDS and not {"sequence", "level"} <= r.meta.keys():
                    raise SpecError(
                        f"{manifest_path}: mlds stimulus {r.key!r} needs columns sequence and level"
                    )
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
    return LoadedExperiment(spec, spec_path, root, stimulus_root, records)


def init_app(app: Flask) -> None:
    """Load every experiment named in ``EXPERIMENT_PATHS`` into ``app.extensions['humanlike']``."""
    registry: dict[str, LoadedExperiment] = {}
    for path in app.config.get("EXPERIMENT_PATHS", []):
        loaded = load_experiment(path)
        if loaded.slug in registry:
            raise SpecError(f"{path}: slug {loaded.slug!r} is used by two experiments")
        registry[loaded.slug] = loaded
    app.extensions["humanlike"] = registry


def registry() -> dict[str, LoadedExperiment]:
    """The experiments this app serves, by slug."""
    return current_app.extensions["humanlike"]


def get(slug: str) -> LoadedExperiment | None:
    """The loaded experiment with this slug, if the app serves it."""
    return registry().get(slug)


def sync(loaded: LoadedExperiment) -> Experiment:
    """Insert or update the experiment row and its stimuli (by key); existing rows keep their ids."""
    exp = db.session.execute(
        sa.select(Experiment).where(Experiment.slug == loaded.slug)
    ).scalar_one_or_none()
    spec_json = loaded.spec.model_dump(mode="json")
    if exp is None:
        exp = Experiment(
            slug=loaded.slug,
            title=loaded.spec.title,
            spec=spec_json,
            spec_hash=loaded.spec.spec_hash(),
            root=str(loaded.root),
            status=ExperimentStatus.LIVE.value,
            platform=loaded.spec.platform,
        )
        db.session.add(exp)
        db.session.flush()
    else:
        exp.title, exp.spec, exp.spec_hash = loaded.spec.title, spec_json, loaded.spec.spec_hash()
        exp.root, exp.platform = str(loaded.root), loaded.spec.platform
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
    db.session.commit()
    return exp


def sync_all(app: Flask) -> None:
    """Sync every served experiment into the database."""
    with app.app_context():
        for loaded in app.extensions["humanlike"].values():
            sync(loaded)

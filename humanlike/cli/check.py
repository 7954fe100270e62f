"""``humanlike check PATH``: validate an experiment folder without starting a server.

Reports every problem it can find in one pass: the spec's field errors (a misspelt field gets a
"did you mean"), missing consent / instructions / manifest files, the manifest's own errors and,
when both load, whether they fit together (``experiments.load_experiment``)."""

from __future__ import annotations

import difflib
import tomllib
import typing
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel, ValidationError


def _models(model: type[BaseModel], seen: set[type[BaseModel]] | None = None) -> set[type[BaseModel]]:
    """``model`` and every pydantic model reachable through its fields' annotations."""
    seen = set() if seen is None else seen
    if model in seen:
        return seen
    seen.add(model)
    stack: list[Any] = [f.annotation for f in model.model_fields.values()]
    while stack:
        annotation = stack.pop()
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            _models(annotation, seen)
        stack.extend(typing.get_args(annotation))
    return seen


def field_names() -> list[str]:
    """Every field name of the spec and its tables (what a misspelt key is compared with)."""
    from humanlike.server.study.spec import ExperimentSpec

    return sorted({name for m in _models(ExperimentSpec) for name in m.model_fields})


def _spec_problems(path: Path, raw: dict[str, Any]) -> list[str]:
    from humanlike.server.study.spec import ExperimentSpec, describe_loc

    try:
        ExperimentSpec.model_validate(raw)
    except ValidationError as exc:
        names = field_names()
        problems = []
        for err in exc.errors():
            loc = describe_loc(tuple(err["loc"]), raw)
            text = f"{path}: {loc}: {err['msg']}"
            key = str(err["loc"][-1]) if err["loc"] else ""
            if err["type"] == "extra_forbidden" and (close := difflib.get_close_matches(
                    key, names, n=1, cutoff=0.75)):
                text += f" (did you mean {close[0]!r}?)"
            problems.append(text)
        return problems
    return []


def check_experiment(path: Path) -> tuple[list[str], str]:
    """``(problems, summary)`` of the experiment at ``path`` (its folder or its spec file)."""
    from humanlike.server.study import languages
    from humanlike.server.study.experiments import load_experiment
    from humanlike.server.study.manifest import read_manifest
    from humanlike.server.study.spec import SpecError

    spec_path = path / "experiment.toml" if path.is_dir() else path
    if not spec_path.is_file():
        return [f"{spec_path}: experiment spec not found"], ""
    try:
        raw = tomllib.loads(spec_path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return [f"{spec_path}: not valid TOML: {exc}"], ""
    problems = _spec_problems(spec_path, raw)
    root = spec_path.parent
    manifest_ok = False
    for field in ("consent", "instructions", "manifest"):
        name = raw.get(field)
        if not isinstance(name, str):
            continue  # the spec's own errors say it is missing
        target = (root / name).resolve()
        if not target.is_relative_to(root.resolve()):
            problems.append(f"{spec_path}: {field}: must lie inside the experiment folder")
        elif not target.is_file():
            problems.append(f"{spec_path}: {field}: file not found: {name}")
        elif field == "manifest":
            try:
                read_manifest(target)
                manifest_ok = True
            except (SpecError, ValueError, OSError) as exc:
                problems.append(str(exc))
    if problems or not manifest_ok:
        return problems, ""
    try:
        loaded = load_experiment(spec_path)
    except (SpecError, ValueError, OSError) as exc:
        return [str(exc)], ""
    spec = loaded.spec
    untranslated = languages.missing(spec.language)
    if untranslated:
        shown = "; ".join(repr(m) for m in untranslated[:5])
        more = f" and {len(untranslated) - 5} more" if len(untranslated) > 5 else ""
        return [f"{spec_path}: language: the {spec.language!r} catalogue "
                f"({languages.CATALOGUES / spec.language / 'LC_MESSAGES' / 'messages.po'}) misses "
                f"{len(untranslated)} translation(s) the participant pages use: {shown}{more}"], ""
    kinds = sorted({r.kind for r in loaded.stimuli})
    blocks = ", ".join(f"{b.name} ({b.trial_type})" for b in spec.blocks)
    return [], (f"{spec_path}: experiment {spec.slug!r} is valid: {len(spec.blocks)} block(s) "
                f"[{blocks}], {len(loaded.stimuli)} stimuli ({', '.join(kinds)}), "
                f"{len(spec.conditions)} condition(s)")


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
def command(path: Path) -> None:
    """Validate the experiment at PATH (its folder or experiment.toml): spec fields, texts and
    manifest, all problems at once, without a database or a server. Exit status 1 on problems."""
    problems, summary = check_experiment(path)
    if problems:
        for problem in problems:
            click.echo(problem, err=True)
        raise SystemExit(1)
    click.echo(summary)



"""``humanlike analyze ratings``: noise ceiling, model scores, bootstrap tests and figures for ratings.

EXPORT is an export folder (``ratings.csv``/``.parquet`` + ``stimuli`` + ``participants``), a ratings
CSV/Parquet file, or a human-response CSV in the Golan et al. (2020) long format, read by
:mod:`humanlike.analysis.io.export` (practice trials out, the export's exclusions applied). RESPONSES is the
model-responses frame (``model, stimulus, category, probability[, logit]``) or a Golan model CSV.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import click
from tqdm import tqdm

from humanlike.analysis.exclusions import ExclusionRules
from humanlike.analysis.io.export import read_export
from humanlike.analysis.ratings.analysis import analyze_ratings
from humanlike.analysis.ratings.scores import load_model_responses
from humanlike.cli.options import alpha_option, confidence_option, n_resamples_option


def _rules(rules_file: Path | None, overrides: tuple[str, ...]) -> ExclusionRules:
    mapping: dict[str, object] = {}
    if rules_file is not None:
        text = rules_file.read_text()
        try:
            loaded = tomllib.loads(text) if rules_file.suffix == ".toml" else json.loads(text)
        except (ValueError, tomllib.TOMLDecodeError) as error:
            raise click.BadParameter(
                f"cannot parse {rules_file}: {error}", param_hint="--rules"
            ) from error
        mapping.update(loaded.get("exclusion", loaded) if isinstance(loaded, dict) else {})
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--rule")
        mapping[key.strip()] = None if value.strip().lower() in ("", "none", "off") else value
    try:
        return ExclusionRules.from_mapping(mapping)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--rules/--rule") from None


@click.command("ratings")
@click.argument("export", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--models",
    "responses",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Model responses: model, stimulus, category, probability[, logit].",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the tables and figures.",
)
@n_resamples_option(10_000, "Bootstrap resamples of participants and stimuli.")
@confidence_option
@alpha_option
@click.option(
    "--calibrate/--no-calibrate",
    default=False,
    show_default=True,
    help="Fit one logit slope and intercept per model (and for the noise ceiling).",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Random seed.")
@click.option(
    "--rules",
    "rules_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="JSON or TOML exclusion rules (keys of ExclusionRules, or an [exclusion] table).",
)
@click.option(
    "--rule",
    "rule_overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="One exclusion rule, e.g. min_natural_accuracy=0.8 (repeatable).",
)
@click.option(
    "--n-jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Threads for the bootstrap (default: all available CPUs).",
)
@click.option(
    "--bias-correct-bounds/--no-bias-correct-bounds",
    default=True,
    show_default=True,
    help="Re-centre the noise-ceiling bounds' bootstrap distributions on their estimates.",
)
@click.option(
    "--ignore-export-exclusions",
    "--include-excluded",
    "ignore_export_exclusions",
    is_flag=True,
    help="Re-include participants that participants.csv marks as excluded.",
)
@click.option("--include-simulated", is_flag=True,
              help="Analyse simulated participants too (a rehearsal: humanlike simulate).")
def command(
    export: Path,
    responses: Path,
    out_dir: Path,
    n_resamples: int,
    confidence: float,
    alpha: float,
    calibrate: bool,
    seed: int,
    rules_file: Path | None,
    rule_overrides: tuple[str, ...],
    n_jobs: int | None,
    bias_correct_bounds: bool,
    ignore_export_exclusions: bool,
    include_simulated: bool,
) -> None:
    """Score models against human ratings in EXPORT with a noise ceiling and bootstrap CIs."""
    rules = _rules(rules_file, rule_overrides)
    try:
        data = read_export(export, table="ratings", include_excluded=ignore_export_exclusions,
                           include_simulated=include_simulated)
        frame = data.ratings()
        models = load_model_responses(responses)
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    with tqdm(total=n_resamples, desc="bootstrap", unit="resample", leave=False) as bar:
        try:
            result = analyze_ratings(
                frame,
                models,
                participants=data.participants,
                rules=rules,
                n_resamples=n_resamples,
                confidence_level=confidence,
                alpha=alpha,
                calibrate=calibrate,
                random_state=seed,
                n_jobs=n_jobs,
                progress=bar.update,
                respect_export_exclusions=not data.include_excluded,
                bias_correct_bounds=bias_correct_bounds,
            )
        except ValueError as error:
            raise click.ClickException(str(error)) from None
    written = result.save(out_dir, sources={"export": str(export), "models": str(responses)})
    if (sentence := data.sample_sentence()) is not None:
        click.echo(sentence)
    click.echo(result.summary())
    n_figures = sum(path.suffix == ".png" for path in written)
    click.echo(
        f"wrote {len(result.tables())} tables, {n_figures} figures and summary.json to {out_dir}"
    )

"""``humanlike analyze ratings``: noise ceiling, model scores, bootstrap tests and figures for ratings.

EXPORT is an export folder (``ratings.csv``/``.parquet`` + ``stimuli`` + ``participants``), a ratings
CSV/Parquet file, or a human-response CSV in the Golan et al. (2020) long format. RESPONSES is the
model-responses frame (``model, stimulus, category, probability[, logit]``) or a Golan model CSV.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import cast

import click
import matplotlib.pyplot as plt
import pandas as pd
from tqdm import tqdm

from humanlike.analysis.ratings.analysis import analyze_ratings
from humanlike.analysis.ratings.data import ExclusionRules, load_participants, load_ratings
from humanlike.analysis.ratings.plots import (
    plot_model_scores,
    plot_repeat_reliability,
    plot_rt_histograms,
)
from humanlike.analysis.ratings.scores import load_model_responses
from humanlike.server.commands.options import (
    alpha_option,
    confidence_option,
    n_resamples_option,
)


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
    is_flag=True,
    help="Re-include participants that participants.csv marks as excluded.",
)
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
) -> None:
    """Score models against human ratings in EXPORT with a noise ceiling and bootstrap CIs."""
    rules = _rules(rules_file, rule_overrides)
    try:
        frame = load_ratings(export)
        participants = load_participants(export)
        models = load_model_responses(responses)
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    with tqdm(total=n_resamples, desc="bootstrap", unit="resample", leave=False) as bar:
        try:
            result = analyze_ratings(
                frame,
                models,
                participants=participants,
                rules=rules,
                n_resamples=n_resamples,
                confidence_level=confidence,
                alpha=alpha,
                calibrate=calibrate,
                random_state=seed,
                n_jobs=n_jobs,
                progress=bar.update,
                respect_export_exclusions=not ignore_export_exclusions,
                bias_correct_bounds=bias_correct_bounds,
            )
        except ValueError as error:
            raise click.ClickException(str(error)) from None

    out_dir.mkdir(parents=True, exist_ok=True)
    for name, table in result.tables().items():
        table.to_csv(out_dir / f"{name}.csv", index=False)
    figures = {}
    for subset in sorted(set(result.bootstrap.scores["subset"])):
        for metric, suffix in (("pearson_r", ""), ("mse", "_mse")):
            figures[f"scores_{subset}{suffix}.png"] = plot_model_scores(
                result.bootstrap, subset, metric
            )
    figures["repeat_reliability.png"] = plot_repeat_reliability(result.cleaned)
    figures["rt_histograms.png"] = plot_rt_histograms(result.cleaned, rules.min_trial_rt_ms)
    for name, figure in figures.items():
        figure.savefig(out_dir / name, dpi=150)
        plt.close(figure)

    scores = result.bootstrap.scores.query("metric == 'pearson_r'")
    ceilings = result.bootstrap.ceilings.query("metric == 'pearson_r'").set_index(
        ["subset", "bound"]
    )
    summary = {
        "export": str(export),
        "models": str(responses),
        "participants": len(result.qc),
        "excluded": int(result.qc["excluded"].sum()),
        "analysed_participants": len(result.ratings.participants),
        "stimuli": {
            kind: result.ratings.kinds.count(kind) for kind in sorted(set(result.ratings.kinds))
        },
        "categories": len(result.ratings.categories),
        "missing_share": float(1.0 - result.ratings.observed.mean()),
        "n_resamples": n_resamples,
        "confidence_level": confidence,
        "seed": seed,
        "calibrate": calibrate,
        "bias_correct_bounds": bias_correct_bounds,
        "rules": {k: v for k, v in vars(rules).items() if v is not None},
        "split_half_spearman_brown": result.split_half.spearman_brown,
        "upper_bound_shift": result.bootstrap.upper_bound_shift,
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")

    click.echo(
        f"{summary['analysed_participants']} of {summary['participants']} participants analysed "
        f"({summary['excluded']} excluded); split-half reliability (Spearman-Brown) "
        f"{result.split_half.spearman_brown:.3f}"
    )
    for key, rows in scores.groupby("subset", sort=False):
        subset = cast(str, key)
        # one row each of the (subset, bound) index: a Series, not the scalar the stubs assume
        low = cast(pd.Series, ceilings.loc[(subset, "lower")])
        high = cast(pd.Series, ceilings.loc[(subset, "upper")])
        click.echo(
            f"[{subset}] noise ceiling r: lower {low['estimate']:.3f} "
            f"[{low['ci_low']:.3f}, {low['ci_high']:.3f}], upper {high['estimate']:.3f}"
        )
        for row in rows.sort_values("estimate", ascending=False).itertuples():
            click.echo(
                f"  {row.model:<24} r = {row.estimate:.3f} [{row.ci_low:.3f}, {row.ci_high:.3f}]"
            )
    click.echo(
        f"wrote {len(result.tables())} tables, {len(figures)} figures and summary.json to {out_dir}"
    )

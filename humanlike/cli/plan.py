"""``humanlike plan EXPERIMENT``: plan a model-comparison study by model recovery.

For each candidate model as the generating observer (with human-like noise), R simulated studies
at each N are decided as the report decides them; the plan prints the recovery matrix, the false
decisions and the N that meets the target, and writes tables and figures with ``--out``
(docs/planning.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
import pandas as pd

from humanlike.cli.options import n_resamples_option

if TYPE_CHECKING:
    from humanlike.analysis.planning import Plan


def _sizes(value: str) -> list[int]:
    try:
        sizes = [int(v) for v in value.split(",") if v.strip()]
    except ValueError as error:
        raise click.BadParameter(f"expected numbers separated by commas, got {value!r}",
                                 param_hint="--n") from error
    if not sizes or min(sizes) < 2:
        raise click.BadParameter("every N must be at least 2 participants", param_hint="--n")
    return sizes


@click.command("plan")
@click.argument("experiment", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--models", "models_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Model responses CSV (default: the spec's [panel] model_responses).")
@click.option("--n", "sizes", default="5,10,20,40,80", show_default=True,
              help="Participant numbers to simulate, comma-separated.")
@click.option("--replications", default=200, show_default=True, type=click.IntRange(1),
              help="Simulated studies per N per generating model.")
@n_resamples_option(1000, "Bootstrap resamples of each simulated study's analysis.")
@click.option("--noise-sd", type=click.FloatRange(0, 1, min_open=True),
              help="Human rating noise SD (default: the spec's [adaptive] noise_sd, else 0.25).")
@click.option("--pilot", type=click.Path(exists=True, path_type=Path),
              help="A pilot export: its ratings' pooled SD is the human noise.")
@click.option("--trials", type=click.IntRange(1),
              help="Stimuli rated per participant (default: the rating block's max_trials).")
@click.option("--target", default=0.8, show_default=True, type=click.FloatRange(0, 1),
              help="Share of studies with every comparison decided.")
@click.option("--rule", type=click.Choice(["all", "winner"]), default="all", show_default=True,
              help="What the target counts: every comparison decided, or the generating model "
                   "declared the winner.")
@click.option("--alpha", type=click.FloatRange(0, 0.5, min_open=True),
              help="Holm-Sidak alpha (default: the spec's [stopping] alpha, else 0.05).")
@click.option("--monitoring", type=click.Choice(["fixed_n", "continuous", "group_sequential"]),
              default=None, help="How each simulated study is looked at (default: the spec's "
              "[stopping] monitoring for comparisons_decided, else fixed_n); group_sequential "
              "uses the --n list as its declared looks.")
@click.option("--test", "test", type=click.Choice(["betting_mixture", "betting", "safe_t"]), default=None,
              help="Continuous monitoring's e-process (default: the spec's [stopping] test, else "
              "betting_mixture).")
@click.option("--min-difference", default=0.01, show_default=True, type=click.FloatRange(0),
              help="Score difference (r) below which two models count as practically equal.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--jobs", default=1, show_default=True, type=int,
              help="Local processes (joblib; -1: all CPUs).")
@click.option("--dask", "dask_address", metavar="ADDRESS",
              help="Run the replications on this Dask scheduler (e.g. tcp://host:8786).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the tables, figures and plan.json.")
def command(experiment: Path, models_path: Path | None, sizes: str, replications: int,
            n_resamples: int, noise_sd: float | None, pilot: Path | None, trials: int | None,
            target: float, rule: str, alpha: float | None, monitoring: str | None,
            test: str | None, min_difference: float, seed: int, jobs: int,
            dask_address: str | None, out: Path | None) -> None:
    """Plan a study on EXPERIMENT (its experiment.toml) by model recovery."""
    from humanlike.analysis.planning.inputs import fit_noise, plan_inputs, read_model_responses
    from humanlike.analysis.planning.recovery import plan_study
    from humanlike.server.study.experiments import load_experiment
    from humanlike.server.study.spec import SpecError
    from humanlike.server.trial_types.registry import TRIAL_TYPES

    n_list = _sizes(sizes)
    try:
        loaded = load_experiment(experiment)
    except SpecError as error:
        raise click.ClickException(str(error)) from error
    spec = loaded.spec
    if models_path is None:
        if spec.panel is None or not spec.panel.model_responses:
            raise click.UsageError(f"{experiment}: no [panel] model_responses; pass --models")
        models_path = loaded.root / spec.panel.model_responses[0]
    rating_blocks = [b for b in spec.blocks if TRIAL_TYPES[b.trial_type].rated]
    if not rating_blocks:
        raise click.UsageError(f"{experiment}: no rating block to plan")
    stimuli = pd.DataFrame([{"stimulus": r.key, "kind": r.kind, **r.meta} for r in loaded.stimuli])
    n_trials = trials or rating_blocks[0].max_trials or len(stimuli)
    adaptive = getattr(spec, "adaptive", None)
    if pilot is not None:
        from humanlike.analysis.io.export import read_export

        noise = fit_noise(read_export(pilot, table="ratings").ratings())
    else:
        noise = noise_sd or getattr(adaptive, "noise_sd", None) or 0.25
    alpha = alpha or (spec.stopping.alpha if spec.stopping is not None else 0.05)
    monitoring = monitoring or (spec.stopping.monitoring if spec.stopping is not None
                                and spec.stopping.measure == "comparisons_decided" else "fixed_n")
    test = test or (spec.stopping.test if spec.stopping is not None else "betting_mixture")
    try:
        inputs = plan_inputs(read_model_responses(models_path), stimuli, n_trials, noise)
    except ValueError as error:
        raise click.ClickException(f"{models_path}: {error}") from error
    plan = plan_study(inputs, n_list, replications, n_resamples=n_resamples, alpha=alpha,
                      target=target, seed=seed, n_jobs=jobs, dask_address=dask_address,
                      min_difference=min_difference, rule=rule, monitoring=monitoring, test=test)
    click.echo(plan.summary())
    if out is not None:
        for path in plan.save(out):
            click.echo(f"wrote {path}")
        click.echo(f"wrote {_plan_page(plan, experiment.name, out / 'plan.html')}")


def _plan_page(plan: Plan, name: str, path: Path) -> Path:
    """The plan as a report page: the report's section with the recovery matrix and power curves."""
    from humanlike.analysis.planning.report import plan_section
    from humanlike.analysis.report import Report, ReportSettings
    from humanlike.analysis.report.sections import StudyResults

    section = plan_section(plan)
    return Report(f"Plan: {name}", [section], StudyResults(), "", ReportSettings()).save(path)

"""The live analysis panel: the study's scientific answer so far, computed in the background.

Where it runs: a daemon thread per server process (``PANEL_THREAD``, on with ``humanlike serve``
in production or ``HUMANLIKE_PANEL_THREAD=1``) or a separate ``humanlike panel-worker`` process;
never inside a participant's request. Every ``PANEL_INTERVAL`` seconds each experiment's *data
version* (spec hash, trials stored, newest trial id, researcher overrides) is compared with the one
stored in ``panel_result``; a worker that finds it changed claims the row's lease with one atomic
UPDATE (``WHERE data_version <> :new AND lease expired``), so however many processes run, the panel
is computed at most once per data change. The pass refreshes the stored per-participant QC
(``qc.refresh_qc``) and runs the analysis package on the stored trials.

Rating experiments: the participants x stimuli x categories rating array is read from the database
in chunks (``panel_ratings``: the array the export path gives, without the 16.4 M-row long frame
of a 2,000 x 820 study), then noise ceiling (lower / upper) with bootstrap CIs, the spec's models
with CIs and Holm-Sidak-corrected pairwise decisions (``score_rating_array``, the part of
``analyze_ratings`` after QC; the exclusions are the stored QC's and the researcher's). Triad and
classification trials: MLDS scales and the kappa matrix (``panel_sections``), from a temporary
export of the tables they read (``write_export``, the same code as ``humanlike export``; written
only when the experiment has such trials). The stopping indicator (``stopping``) is documented in
docs/dashboard.md."""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import math
import os
import tempfile
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError, IntegrityError

from humanlike.server.database import as_utc
from humanlike.server.extensions import db
from humanlike.server.live.authenticity import refresh_authenticity
from humanlike.server.live.panel_ratings import PanelRatings, panel_ratings, stored_trial_types
from humanlike.server.live.panel_sections import MLDS_SECTION
from humanlike.server.live.qc import refresh_qc
from humanlike.server.psiturk.progress import is_psiturk, psiturk_panel
from humanlike.server.tables.core import Experiment, PanelResult, Participant, Trial, utcnow
from humanlike.server.trial_types.registry import TRIAL_TYPES, rated_types

log = logging.getLogger(__name__)
LEASE = dt.timedelta(seconds=45)
NEVER = dt.datetime.max.replace(tzinfo=dt.UTC)  # sorts a participant without a time last
"""A lease not renewed for this long is taken to belong to a worker that died mid-computation
(a killed or redeployed server's panel is computed again within a minute)."""
RENEW_EVERY = 10.0
"""Seconds between renewals of the lease by the computing worker (``LeaseKeeper``)."""
REFERENCE_MODEL = "__reference__"
"""Placeholder model scored when the spec names none (the analysis needs one); never shown."""
SECTIONS = ("qc", "psiturk", "ratings", MLDS_SECTION, "ec", "stopping")
"""The parts of a pass that fail alone: each one's error is stored in the result's ``errors``
(shown on the dashboard) while the others compute."""


def data_version(exp: Experiment) -> str:
    """What the panel's result depends on: spec, trials stored, newest trial, overrides."""
    n, newest = db.session.execute(
        sa.select(sa.func.count(Trial.id), sa.func.max(Trial.id))
        .join(Participant, Trial.participant_id == Participant.id)
        .where(Participant.experiment_id == exp.id)).one()
    decisions = db.session.execute(
        sa.select(Participant.public_id, Participant.analysis_override)
        .where(Participant.experiment_id == exp.id, Participant.analysis_override.is_not(None))
        .order_by(Participant.public_id)).all()
    digest = hashlib.sha256(repr(decisions).encode()).hexdigest()[:16]
    return f"{exp.spec_hash[:16]}:{n}:{newest}:{digest}"


def claim(exp: Experiment, version: str, owner: str, force: bool = False) -> bool:
    """Atomically take the right to compute ``version`` of the experiment's panel (one worker wins
    across processes); False when it is computed already or another worker holds the lease."""
    if db.session.get(PanelResult, exp.id) is None:
        db.session.add(PanelResult(experiment_id=exp.id))
        try:
            db.session.commit()
        except IntegrityError:
            db.session.rollback()
    now = utcnow()
    stale = sa.or_(PanelResult.data_version.is_(None), PanelResult.data_version != version)
    free = sa.or_(PanelResult.lease_until.is_(None), PanelResult.lease_until < now)
    result = db.session.execute(
        sa.update(PanelResult)
        .where(PanelResult.experiment_id == exp.id, free, *(() if force else (stale,)))
        .values(lease_owner=owner, lease_until=now + LEASE)
        .execution_options(synchronize_session=False))
    db.session.commit()
    return bool(getattr(result, "rowcount", 0) == 1)


class LeaseKeeper(threading.Thread):
    """Renews ``owner``'s lease every ``RENEW_EVERY`` seconds while the pass computes, on a
    connection of its own (the pass's session may be inside a long read)."""

    def __init__(self, engine: sa.Engine, experiment_id: int, owner: str) -> None:
        super().__init__(name="humanlike-panel-lease", daemon=True)
        self.engine, self.experiment_id, self.owner = engine, experiment_id, owner
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(RENEW_EVERY):
            try:
                with self.engine.begin() as conn:
                    conn.execute(sa.update(PanelResult).where(
                        PanelResult.experiment_id == self.experiment_id,
                        PanelResult.lease_owner == self.owner).values(
                        lease_until=utcnow() + LEASE))
            except Exception as exc:  # the database away for a moment: the next renewal retries
                log.debug("live panel lease renewal failed: %s", exc)

    def __enter__(self) -> LeaseKeeper:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.join()


def failure(exc: BaseException) -> str:
    """One line for a section's error: the exception and where it was raised; a database error
    by its driver's first line (the statement and its parameters are never shown)."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" ({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    if isinstance(exc, DBAPIError):
        first = (str(exc.orig).strip().splitlines() or [""])[0]
        return f"{type(exc).__name__} ({type(exc.orig).__name__}): {first}{where}"
    return f"{type(exc).__name__}: {exc}{where}"


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _records(frame: pd.DataFrame, columns: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for row in frame[columns].to_dict("records"):
        out.append({str(k): (_finite(v) if isinstance(v, (int, float, np.number)) and not isinstance(
            v, (bool, np.bool_)) else (bool(v) if isinstance(v, (bool, np.bool_)) else v))
            for k, v in row.items()})
    return out


def panel_threads() -> int | None:
    """Bootstrap threads: every CPU (None) in a process below normal priority, else one."""
    # humanlike panel-worker runs at nice 10 (and SCHED_IDLE on Linux), so it only gets the CPU
    # time the app servers leave it; the panel thread inside a server process shares its CPU with
    # participants' requests. The results do not depend on it.
    try:
        niced = os.getpriority(os.PRIO_PROCESS, 0) > 0
    except (AttributeError, OSError):  # not on a Unix
        niced = False
    return None if niced else 1


def _model_responses(exp: Experiment, ratings: PanelRatings) -> tuple[pd.DataFrame, bool]:
    """The spec's model responses, or the hidden reference model when it names none."""
    from humanlike.analysis.ratings.scores import load_model_responses

    names = (exp.spec.get("panel") or {}).get("model_responses") or []
    if names:
        return pd.concat([load_model_responses(Path(exp.root) / n) for n in names],
                         ignore_index=True), False
    array = ratings.array
    cells = pd.DataFrame({"stimulus": np.repeat(array.stimuli, len(array.categories)),
                          "category": np.tile(array.categories, len(array.stimuli))})
    true_class = cells["stimulus"].map(ratings.true_class).astype(str)
    probability = np.where(true_class == cells["category"].astype(str), 0.9, 0.1)
    return cells.assign(model=REFERENCE_MODEL, probability=probability), True


def _ratings_panel(exp: Experiment, settings: dict[str, Any],
                   stopping: dict[str, Any] | None) -> dict[str, Any]:
    """Noise ceiling, model scores and comparisons of the participants that pass: Pearson r with
    bootstrap intervals, or for an adaptively allocated study design-weighted scores
    (``_weighted_panel``)."""
    # the same numbers as analyze_ratings on a fresh export with the seed 0 (its split-half
    # reliability, not shown, is skipped but its random splits are drawn)
    from humanlike.analysis.exclusions import ExclusionRules
    from humanlike.analysis.ratings.analysis import score_rating_array

    rules = ExclusionRules.from_mapping(exp.spec.get("exclusion", {}))
    threads = panel_threads()
    ratings = panel_ratings(exp, rules.min_trial_rt_ms, threads=threads is None)
    db.session.rollback()  # end the read transaction: the bootstrap below may take a while
    models, reference = _model_responses(exp, ratings)
    alpha = float((stopping or {}).get("alpha", 0.05))
    level = float(settings.get("confidence_level", 0.95))
    decides = bool(stopping and stopping.get("measure") == "comparisons_decided")
    if exp.spec.get("adaptive") is not None and not reference:
        return _weighted_panel(exp, ratings, models, level, alpha, stopping if decides else None)
    _, boot = score_rating_array(  # r only: the panel shows no MSE
        ratings.array, models,
        n_resamples=int(settings.get("n_resamples", 1000)),
        confidence_level=level, alpha=alpha,
        random_state=0, n_jobs=threads, split_half=False, metrics=("pearson_r",))
    ceilings = boot.ceilings[boot.ceilings["metric"] == "pearson_r"]
    scores = boot.scores[(boot.scores["metric"] == "pearson_r")]
    comparisons = boot.comparisons[boot.comparisons["metric"] == "pearson_r"]
    if reference:
        scores = scores[scores["model"] != REFERENCE_MODEL]
        comparisons = comparisons.iloc[0:0]
    sequential = None
    if decides and len(comparisons):
        from humanlike.analysis.ratings.scores import model_predictions, participant_scores
        from humanlike.analysis.sequential.decide import BOUND  # |r_a - r_b| <= 2
        from humanlike.analysis.sequential.monitored import pair_differences

        predictions = model_predictions(models, ratings.array)
        r, _ = participant_scores(ratings.array, predictions.probabilities)
        index = {str(m): i for i, m in enumerate(predictions.models)}
        pairs = [(str(a), str(b)) for a, b in comparisons.loc[comparisons["subset"] == "all",
                                                            ["a", "b"]].itertuples(index=False)
                 if str(a) in index and str(b) in index]  # model pairs (not a model vs a ceiling)
        if pairs:
            sequential = _sequential(exp, ratings, pair_differences(r, list(index), pairs), pairs,
                                     stopping or {}, bound=BOUND)
    return _ratings_record(ratings, sequential, level, alpha, ceilings, scores, comparisons)


def _ratings_record(ratings: PanelRatings, sequential: dict[str, Any] | None, level: float,
                    alpha: float, ceilings: pd.DataFrame, scores: pd.DataFrame,
                    comparisons: pd.DataFrame, score_label: str | None = None) -> dict[str, Any]:
    """The ratings panel's stored record."""
    return {
        "sequential": sequential,
        "kind": "ratings",
        "score_label": score_label,
        "n_participants": len(ratings.array.participants),
        "n_excluded": ratings.n_excluded,
        "confidence_level": level,
        "ceilings": _records(ceilings, ["subset", "bound", "estimate", "ci_low", "ci_high"]),
        "scores": _records(scores, ["subset", "model", "estimate", "ci_low", "ci_high"]),
        "comparisons": _records(comparisons, ["subset", "a", "b", "difference", "ci_low",
                                              "ci_high", "p_holm_sidak", "significant"]),
        "alpha": alpha,
    }


def _weighted_panel(exp: Experiment, ratings: PanelRatings, responses: pd.DataFrame,
                    level: float, alpha: float, stopping: dict[str, Any] | None) -> dict[str, Any]:
    """An adaptively allocated study's panel: design-weighted (Horvitz-Thompson) scores, ceilings
    and comparisons on the adaptive block's stimuli (``analysis.ratings.weighted``), and the
    declared monitoring's decisions from the same per-participant scores."""
    from humanlike.analysis.ratings.scores import model_predictions
    from humanlike.analysis.ratings.weighted import SCORE_LABEL, inclusion_array, weighted_scores
    from humanlike.server.live.adaptive import experiment_pool
    from humanlike.server.study.adaptive import design_matrix, inclusion_lookup
    from humanlike.server.study.spec import ExperimentSpec

    array = ratings.array
    lookup = inclusion_lookup(exp.id)
    pool = experiment_pool(exp, ExperimentSpec.model_validate(exp.spec))
    n_pool = len(pool)
    # each participant's design over the arrays' stimuli (inf: outside the pool, never drawn by
    # it), then over the pool's stimuli nobody rated yet
    full = design_matrix(exp.id, list(map(str, array.participants)), pool)
    column = {key: j for j, key in enumerate(pool)}
    rated = [column.get(str(s)) for s in array.stimuli]
    rest = sorted(set(range(n_pool)) - {j for j in rated if j is not None})
    design = np.concatenate([np.stack([full[:, j] if j is not None else np.full(len(full), np.inf)
                                       for j in rated], axis=1), full[:, rest]], axis=1)
    db.session.rollback()
    rows = pd.DataFrame([(p, s, v) for p, drawn in lookup.items() for s, v in drawn.items()],
                        columns=["participant", "stimulus", "inclusion_probability"])
    pi = inclusion_array(rows, array.participants, array.stimuli)
    predictions = model_predictions(responses, array)
    names = list(map(str, predictions.models))
    result = weighted_scores(array.values, predictions.probabilities, pi, names, level, alpha,
                             n_stimuli=n_pool, design=design)
    sequential = None
    if stopping and result.pairs:  # each participant's differences scaled by its design's bound
        sequential = _sequential(exp, ratings, result.scaled, result.pairs, stopping, bound=1.0,
                                 shown=result.differences)
    return _ratings_record(ratings, sequential, level, alpha, result.ceilings, result.models,
                           result.comparisons, score_label=SCORE_LABEL)


def _sequential(exp: Experiment, ratings: PanelRatings, differences: np.ndarray,
                pairs: list[tuple[str, str]], stopping: dict[str, Any], bound: float,
                shown: np.ndarray | None = None) -> dict[str, Any]:
    """The model pairs under the declared monitoring (``analysis.sequential.monitored_differences``)
    from each analysed participant's score difference per pair (participants x pairs, in
    [-bound, bound]; ``shown``: the differences to show when those are rescaled), participants in
    completion order."""
    from humanlike.analysis.sequential.monitored import monitored_differences

    array = ratings.array
    finished = dict(db.session.execute(
        sa.select(Participant.public_id, sa.func.coalesce(Participant.completed_at,
                                                          Participant.created_at))
        .where(Participant.experiment_id == exp.id,
               Participant.public_id.in_(list(array.participants)))).all())
    db.session.rollback()
    order = sorted(range(len(array.participants)),
                   key=lambda i: (as_utc(finished.get(array.participants[i])) or NEVER, i))
    return monitored_differences(differences[order], pairs, stopping, bound,
                                 shown=None if shown is None else shown[order])


SECTION_TABLES = ("triads", "classifications", "participants", "stimuli")
"""The export tables the MLDS and error-consistency sections read (and ``decisions``, the rating
trials read as decisions, for a study small enough: ``panel_sections.section_tables``)."""


def section_types() -> set[str]:
    """The trial types whose export tables the MLDS and error-consistency sections read."""
    return {t.name for t in TRIAL_TYPES.values() if t.table in SECTION_TABLES}


def compute(exp: Experiment, errors: dict[str, str] | None = None) -> dict[str, Any]:
    """The panel of one experiment from its stored trials (no database writes). A section that
    fails is stored as its error (in ``result["errors"]`` and the section's place) and the others
    still compute."""
    # ratings: the rating array read in chunks; triads and classifications: a temporary export of
    # the tables they read, written only when the experiment has such trials
    from humanlike.analysis.io.export import read_export
    from humanlike.server.export.writer import write_export
    from humanlike.server.live import panel_sections
    from humanlike.server.live.stopping import evaluate

    errors = dict(errors or {})
    settings = exp.spec.get("panel") or {}
    stopping = exp.spec.get("stopping")
    types = stored_trial_types(exp)
    result: dict[str, Any] = {"kind": None, "n_participants": 0}
    if is_psiturk(exp):  # no native trials: the study's own numbers
        try:
            result = psiturk_panel(exp)
        except Exception as exc:
            db.session.rollback()
            errors["psiturk"] = failure(exc)
            result = {"kind": "psiturk", "n_participants": 0, "error": errors["psiturk"]}
    if types & set(rated_types()) and exp.spec.get("categories"):
        try:
            result = _ratings_panel(exp, settings, stopping)
        except ValueError as exc:  # e.g. fewer than two participants pass QC: a state, not a fault
            db.session.rollback()
            result = {"kind": "ratings", "n_participants": 0, "error": str(exc)}
        except Exception as exc:
            db.session.rollback()
            errors["ratings"] = failure(exc)
            result = {"kind": "ratings", "n_participants": 0, "error": errors["ratings"]}
    alpha = float((stopping or {}).get("alpha", 0.05))
    result[MLDS_SECTION] = result["ec"] = None
    tables = panel_sections.section_tables(exp, types, section_types(), SECTION_TABLES)
    if tables:
        with tempfile.TemporaryDirectory(prefix="humanlike-panel-") as tmp:
            try:
                write_export(exp.slug, Path(tmp), raw_parquet=False, tables=tables)
                db.session.rollback()  # end the read transaction: the analysis may take a while
                data = read_export(tmp)
            except Exception as exc:  # both sections read this export
                db.session.rollback()
                data, errors[MLDS_SECTION] = None, failure(exc)
                errors["ec"] = errors[MLDS_SECTION]
            if data is not None:
                for name, section in ((MLDS_SECTION, lambda: panel_sections.mlds_section(
                        data, settings)), ("ec", lambda: panel_sections.ec_section(
                        data, settings, alpha))):
                    try:
                        result[name] = section()
                    except Exception as exc:
                        errors[name] = failure(exc)
        for name in (MLDS_SECTION, "ec"):
            if name in errors:
                result[name] = {"n_participants": 0, "error": f"Failed: {errors[name]}"}
    result["sample"] = panel_sections.sample_summary(exp)  # the analysed set (analysis.sample)
    result["n_participants"] = max(int(result.get("n_participants") or 0),
                                   panel_sections.n_participants(result[MLDS_SECTION],
                                                                 result["ec"]))
    result["stopping"] = None
    if stopping:
        try:
            result["stopping"] = evaluate(stopping, result)
        except Exception as exc:
            errors["stopping"] = failure(exc)
    result["errors"] = errors
    return result


def refresh(exp: Experiment, owner: str | None = None, force: bool = False) -> bool:
    """Recompute the experiment's QC and panel if its data changed and this worker wins the lease;
    True when it computed. A section that fails is stored as its error with the data version (so
    the same data is not retried every cycle) and logged in one line when its error is new."""
    owner = owner or f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    version = data_version(exp)
    previous = db.session.execute(sa.select(PanelResult.data_version, PanelResult.result).where(
        PanelResult.experiment_id == exp.id)).one_or_none()
    if not claim(exp, version, owner, force):
        return False
    started = time.perf_counter()
    errors: dict[str, str] = {}
    with LeaseKeeper(db.engine, exp.id, owner):
        # the stored QC is the panel's exclusions: under a changed spec (rules, categories) it is
        # recomputed for everyone, as a fresh export would compute it
        spec_changed = (previous is not None and previous[0] is not None
                        and previous[0].split(":")[0] != version.split(":")[0])
        try:
            refresh_qc(exp, everyone=spec_changed)
        except Exception as exc:  # the panel then excludes by the QC stored before
            db.session.rollback()
            errors["qc"] = failure(exc)
        try:
            result = compute(exp, errors)
        except Exception as exc:  # outside every section: stored as the panel's one error
            db.session.rollback()
            errors["panel"] = failure(exc)
            result = {"kind": None, "n_participants": 0, "error": errors["panel"],
                      MLDS_SECTION: None, "ec": None, "stopping": None, "errors": errors}
        before = ((previous[1] or {}).get("errors") or {}) if previous is not None else {}
        for name, message in result["errors"].items():
            if before.get(name) != message:
                log.error("live panel of %s: %s failed: %s", exp.slug, name, message)
        owned = sa.and_(PanelResult.experiment_id == exp.id, PanelResult.lease_owner == owner)
        db.session.execute(sa.update(PanelResult).where(owned).values(
            data_version=version, computed_at=utcnow(), seconds=time.perf_counter() - started,
            n_participants=int(result.get("n_participants") or 0), result=result))
        db.session.commit()  # the panel shows now; the authenticity verdicts follow, still leased
        try:
            refresh_authenticity(exp)
        except Exception as exc:  # the dashboard then shows the verdicts stored before
            db.session.rollback()
            message = failure(exc)
            if before.get("authenticity") != message:
                log.error("live panel of %s: authenticity failed: %s", exp.slug, message)
            result = {**result, "errors": {**result["errors"], "authenticity": message}}
            db.session.execute(sa.update(PanelResult).where(owned).values(result=result))
    db.session.execute(sa.update(PanelResult).where(
        PanelResult.experiment_id == exp.id, PanelResult.lease_owner == owner).values(
        lease_owner=None, lease_until=None))
    db.session.commit()
    from humanlike.server.live.adaptive import (
        refresh_weights,  # [adaptive]: weights from this panel
    )
    refresh_weights(exp, result)
    return True


def refresh_all(owner: str | None = None) -> dict[str, bool]:
    """One pass over every experiment; which ones were recomputed."""
    done = {}
    for exp in db.session.execute(sa.select(Experiment).order_by(Experiment.id)).scalars().all():
        try:
            done[exp.slug] = refresh(exp, owner)
        except Exception as exc:  # one experiment's failure must not stop the others
            log.error("live panel of %s failed: %s", exp.slug, failure(exc))
            db.session.rollback()
            done[exp.slug] = False
    return done


def panel_view(exp: Experiment) -> dict[str, Any] | None:
    """What the experiment page shows: the stored result, when and on how many participants, and
    whether newer data is waiting."""
    row = db.session.get(PanelResult, exp.id)
    if row is None or row.result is None:
        return None
    lease = as_utc(row.lease_until)
    return {"result": row.result, "computed_at": as_utc(row.computed_at), "seconds": row.seconds,
            "n_participants": row.n_participants,
            "computing": lease is not None and lease > utcnow()}


class PanelWorker(threading.Thread):
    """The background thread: ``refresh_all`` every ``interval`` seconds until ``stop()``."""

    def __init__(self, app: Any, interval: float) -> None:
        super().__init__(name="humanlike-panel", daemon=True)
        self.app, self.interval = app, interval
        self.owner = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            with self.app.app_context():
                try:
                    refresh_all(self.owner)
                except Exception:
                    log.exception("live panel pass failed")
                finally:
                    db.session.remove()
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        """Finish the current pass and end."""
        self._stop_event.set()
        self.join(120)


def start_worker(app: Any) -> PanelWorker:
    """Start the app's background panel thread (kept in ``app.extensions['panel_worker']``) and
    its runner of bulk-action jobs (``humanlike.server.participants.jobs``: resumes a job whose runner died)."""
    from humanlike.server.participants.jobs import wake

    worker = PanelWorker(app, float(app.config.get("PANEL_INTERVAL", 5)))
    app.extensions["panel_worker"] = worker
    worker.start()
    wake(app)
    return worker

"""Adaptive stimulus allocation (the spec's ``[adaptive]``, docs/adaptive.md).

The panel worker calls :func:`recompute` after each panel refresh: from the panel's decisions
(under the declared monitoring when the stopping indicator decides pairs, else its comparisons) it
takes the model pairs still undecided, from the analysed ratings the human's mean and noise per
stimulus, and stores Neyman-allocation weights (``analysis.planning.adaptive.neyman_weights``) as a
new ``adaptive_design`` version when they changed. A participant's arrival only reads the latest version
and draws (``study/adaptive.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import sqlalchemy as sa

from humanlike.analysis.planning.adaptive import (
    human_means,
    neyman_weights,
    stimulus_noise,
    weights_hash,
)
from humanlike.analysis.planning.decide import model_pairs
from humanlike.server.extensions import db
from humanlike.server.study.adaptive import current_design, pool_keys
from humanlike.server.study.spec import ExperimentSpec
from humanlike.server.tables.adaptive import AdaptiveDesign
from humanlike.server.tables.core import Experiment, Stimulus


def _probabilities(exp: Experiment, pool: list[str], labels: list[str]) -> tuple[np.ndarray, list[str]]:
    """The candidate models' (M, S, K) probabilities on the pool (0 where a model gives none)."""
    from humanlike.analysis.ratings.scores import load_model_responses

    names = (exp.spec.get("panel") or {}).get("model_responses") or []
    frame = pd.concat([load_model_responses(Path(exp.root) / n) for n in names], ignore_index=True)
    frame["category"] = frame["category"].astype(str)
    models = sorted(frame["model"].astype(str).unique())
    wide = frame.pivot_table(index=["model", "stimulus"], columns="category", values="probability")
    y = np.stack([wide.loc[m].reindex(index=pool, columns=labels).to_numpy(float) for m in models])
    return np.nan_to_num(y, nan=0.0), models


def undecided_pairs(result: dict[str, Any], models: list[str]) -> np.ndarray:
    """(P,) pairs (``model_pairs`` order) the panel leaves undecided: under the declared monitoring
    (``result["sequential"]``) when the panel decides pairs that way, else by its comparisons on all
    stimuli (a pair the panel has not compared counts as undecided)."""
    sequential = result.get("sequential") or {}
    if sequential.get("pairs"):
        decided = {frozenset((p["a"], p["b"])) for p in sequential["pairs"] if p.get("decided")}
    else:
        decided = {frozenset((c["a"], c["b"])) for c in result.get("comparisons") or []
                   if c.get("subset") == "all" and c.get("significant")}
    return np.array([frozenset((models[a], models[b])) not in decided
                     for a, b in model_pairs(len(models))])


def experiment_pool(exp: Experiment, spec: ExperimentSpec) -> list[str]:
    """The stimuli of the experiment's adaptive block (``study.adaptive.pool_keys``), in manifest
    order."""
    rows = db.session.execute(sa.select(Stimulus.key, Stimulus.kind, Stimulus.meta)
                              .where(Stimulus.experiment_id == exp.id).order_by(Stimulus.id)).all()
    by_kind: dict[str, list[str]] = {}
    for key, kind, _ in rows:
        by_kind.setdefault(kind, []).append(key)
    return pool_keys(spec, by_kind, {key: (meta or {}).get("block") for key, _, meta in rows})


def recompute(exp: Experiment, result: dict[str, Any]) -> AdaptiveDesign | None:
    """New weights from the panel's ``result`` when ``[adaptive]`` is on, enough participants are
    analysed and the weights changed; the new row (committed) or None."""
    from humanlike.analysis.exclusions import ExclusionRules
    from humanlike.server.live.panel_ratings import panel_ratings

    raw = exp.spec.get("adaptive")
    if raw is None or result.get("kind") != "ratings":
        return None
    spec = ExperimentSpec.model_validate(exp.spec)
    settings = spec.adaptive
    assert settings is not None
    if int(result.get("n_participants") or 0) < settings.min_participants:
        return None
    pool = experiment_pool(exp, spec)
    labels = [c.label for c in spec.categories]
    y, models = _probabilities(exp, pool, labels)
    undecided = undecided_pairs(result, models)
    rules = ExclusionRules.from_mapping(exp.spec.get("exclusion", {}))
    array = panel_ratings(exp, rules.min_trial_rt_ms).array
    # the analysed ratings on the pool's stimuli and the spec's categories (NaN: none yet)
    x = np.full((len(array.participants), len(pool), len(labels)), np.nan)
    at_s = np.asarray(pd.Index(array.stimuli).get_indexer(pd.Index(pool)))
    at_k = np.asarray(pd.Index(array.categories).get_indexer(pd.Index(labels)))
    x[:, np.flatnonzero(at_s >= 0)[:, None], np.flatnonzero(at_k >= 0)] = (
        array.values[:, at_s[at_s >= 0][:, None], at_k[at_k >= 0]])
    noise = stimulus_noise(x) if len(array.participants) else np.full(len(pool), settings.noise_sd)
    block = spec.adaptive_block()
    n_trials = min(int(block.max_trials or len(pool)), len(pool))
    weights = neyman_weights(y, undecided, human_means(x, y, noise), noise, n_trials,
                             len(array.participants))
    digest = weights_hash(pool, weights)
    current = current_design(exp.id)
    if current is not None and current.weights_hash == digest:
        db.session.rollback()
        return None
    design = AdaptiveDesign(
        experiment_id=exp.id, version=(current.version if current else 0) + 1,
        weights={k: float(w) for k, w in zip(pool, weights)}, weights_hash=digest,
        undecided=[[models[a], models[b]] for (a, b), u in
                   zip(model_pairs(len(models)), undecided) if u],
        n_participants=len(array.participants))
    db.session.add(design)
    db.session.commit()
    return design


def refresh_weights(exp: Experiment, result: dict[str, Any]) -> None:
    """The panel worker's call after a refresh: :func:`recompute`, a failure logged (and rolled
    back), never the panel's."""
    import logging

    try:
        recompute(exp, result)
    except Exception:
        db.session.rollback()
        logging.getLogger(__name__).exception("adaptive weights of %s failed", exp.slug)



"""Adaptive stimulus allocation (the spec's ``[adaptive]``, docs/adaptive.md).

The panel worker calls :func:`recompute` after each panel refresh: from the panel's comparisons
(the report's analysis) it takes the model pairs still undecided and the side each leans to, from
the analysed ratings the human's mean and noise per stimulus, and stores the weights (``analysis.planning.adaptive``) as a new
``adaptive_design`` version when they changed. A participant's arrival (``allocation.py``) only
reads the latest version and draws (:func:`draw`): ``random_share`` of the block's ``max_trials``
stimuli uniformly, the rest in proportion to the weights; the draw (design version, weights' hash,
seed, which stimuli came from which part) is the participant's allocation record and exported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import sqlalchemy as sa

from humanlike.analysis.planning.adaptive import (
    LEAN_P,
    discrimination_weights,
    human_means,
    stimulus_noise,
    weights_hash,
)
from humanlike.analysis.planning.decide import model_pairs
from humanlike.analysis.planning.simulate import draw_split
from humanlike.server.adaptive_models import AdaptiveDesign
from humanlike.server.extensions import db
from humanlike.server.models import Experiment, Stimulus
from humanlike.server.spec import ExperimentSpec


def current_design(experiment_id: int) -> AdaptiveDesign | None:
    """The experiment's latest weights, or None before the first."""
    return db.session.execute(
        sa.select(AdaptiveDesign).where(AdaptiveDesign.experiment_id == experiment_id)
        .order_by(AdaptiveDesign.version.desc()).limit(1)).scalar_one_or_none()


def pool_keys(spec: ExperimentSpec, keys_by_kind: dict[str, list[str]],
              block_of: dict[str, str | None]) -> list[str]:
    """The adaptive block's stimuli (its kinds; those whose manifest ``block`` names it when there
    are any, as ``timeline._pool``), in manifest order."""
    block = spec.adaptive_block()
    keys = [k for kind in block.kinds for k in keys_by_kind.get(kind, [])]
    named = [k for k in keys if block_of.get(k) == block.name]
    return named or [k for k in keys if block_of.get(k) in (None, "")]


def draw(spec: ExperimentSpec, pool: list[str], design: AdaptiveDesign | None,
         seed: int) -> dict[str, Any]:
    """A participant's stimuli of the adaptive block, drawn with ``np.random.default_rng(seed)``:
    the record ``{block, design_version, weights_hash, seed, random_share, random, weighted}``
    (``random`` / ``weighted``: the keys from the uniform and the weighted part)."""
    settings = spec.adaptive
    assert settings is not None
    block = spec.adaptive_block()
    n_trials = min(int(block.max_trials or len(pool)), len(pool))
    if design is None:
        weights = np.full(len(pool), 1.0 / max(len(pool), 1))
        version, digest = 0, weights_hash(pool, weights)
    else:
        weights = np.array([float(design.weights.get(k, 0.0)) for k in pool])
        version, digest = design.version, design.weights_hash
    chosen, uniform = draw_split(weights, n_trials, (), np.random.default_rng(seed),
                                 random_share=settings.random_share)
    return {"block": block.name, "design_version": version, "weights_hash": digest, "seed": seed,
            "random_share": settings.random_share,
            "random": [k for k, u in zip(pool, uniform) if u],
            "weighted": [k for k, c, u in zip(pool, chosen, uniform) if c and not u]}


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
    """(P,) pairs (``model_pairs`` order) the panel's comparisons on all stimuli leave undecided
    (a pair the panel has not compared counts as undecided)."""
    decided = {frozenset((c["a"], c["b"])) for c in result.get("comparisons") or []
               if c.get("subset") == "all" and c.get("significant")}
    return np.array([frozenset((models[a], models[b])) not in decided
                     for a, b in model_pairs(len(models))])


def directions(result: dict[str, Any], models: list[str]) -> np.ndarray:
    """(P,) +1 / -1 where the panel's comparison on all stimuli of a pair (``model_pairs`` order)
    leans to its first / second model (Holm-Sidak p below ``LEAN_P``), else 0."""
    lean = {(c["a"], c["b"]): float(np.sign(c.get("difference") or 0.0))
            for c in result.get("comparisons") or []
            if c.get("subset") == "all" and c.get("p_holm_sidak") is not None
            and float(c["p_holm_sidak"]) < LEAN_P}
    return np.array([lean.get((models[a], models[b]), -lean.get((models[b], models[a]), 0.0)) + 0.0
                     for a, b in model_pairs(len(models))])


def recompute(exp: Experiment, result: dict[str, Any]) -> AdaptiveDesign | None:
    """New weights from the panel's ``result`` when ``[adaptive]`` is on, enough participants are
    analysed and the weights changed; the new row (committed) or None."""
    from humanlike.analysis.exclusions import ExclusionRules
    from humanlike.server.admin.panel_ratings import panel_ratings

    raw = exp.spec.get("adaptive")
    if raw is None or result.get("kind") != "ratings":
        return None
    spec = ExperimentSpec.model_validate(exp.spec)
    settings = spec.adaptive
    assert settings is not None
    if int(result.get("n_participants") or 0) < settings.min_participants:
        return None
    rows = db.session.execute(sa.select(Stimulus.key, Stimulus.kind, Stimulus.meta)
                              .where(Stimulus.experiment_id == exp.id).order_by(Stimulus.id)).all()
    by_kind: dict[str, list[str]] = {}
    for key, kind, _ in rows:
        by_kind.setdefault(kind, []).append(key)
    pool = pool_keys(spec, by_kind, {key: (meta or {}).get("block") for key, _, meta in rows})
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
    weights = discrimination_weights(y, undecided, directions(result, models),
                                     human_means(x, y, noise), noise)
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




def export_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """The participants ``frame`` (column ``id``) with each participant's adaptive draw, when any
    participant of it has one (else unchanged)."""
    from humanlike.server.models import Participant

    if frame.empty:
        return frame
    ids = [int(i) for i in frame["id"]]
    records = {pid: (allocation or {}).get("adaptive") for pid, allocation in db.session.execute(
        sa.select(Participant.id, Participant.allocation).where(Participant.id.in_(ids))).all()}
    if not any(records.values()):
        return frame
    draws = [records.get(i) or {} for i in ids]
    def column(values: list[Any]) -> pd.Series:
        return pd.Series(values, index=frame.index, dtype=object)

    return frame.assign(
        adaptive_design_version=pd.array([d.get("design_version") for d in draws], dtype="Int64"),
        adaptive_weights_hash=column([d.get("weights_hash") for d in draws]),
        adaptive_seed=column([str(d["seed"]) if "seed" in d else None for d in draws]),
        adaptive_random=column([";".join(d["random"]) if "random" in d else None for d in draws]),
        adaptive_weighted=column([";".join(d["weighted"]) if "weighted" in d else None
                                  for d in draws]))

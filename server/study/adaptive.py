"""Adaptive allocation's draw at a participant's arrival (the spec's ``[adaptive]``,
docs/adaptive.md): the latest weights the panel worker stored (``live/adaptive.py``), the block's
pool, and the draw: the block's ``max_trials`` stimuli by randomised systematic PPS with inclusion
probabilities proportional to the weights, floored by the uniform share ``random_share``
(``analysis.planning.design``), and the drawn stimuli thinned to an equal-probability subset (the
random-share cross-check). The draw (design version, weights' hash, seed, each drawn stimulus'
inclusion probability, the equal-probability subset) is the participant's allocation record and
exported (``export_columns``; each rating's ``inclusion_probability``: ``with_inclusion``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import sqlalchemy as sa

from humanlike.analysis.planning.adaptive import weights_hash
from humanlike.analysis.planning.design import (
    inclusion_probabilities,
    systematic_pps,
    uniform_subsample,
)
from humanlike.server.extensions import db
from humanlike.server.study.spec import ExperimentSpec
from humanlike.server.tables.adaptive import AdaptiveDesign
from humanlike.server.tables.core import Participant


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
    the record ``{block, design_version, weights_hash, seed, random_share, pool_size, inclusion,
    random, weighted}`` (``inclusion``: each drawn stimulus' inclusion probability; ``random``: the
    equal-probability subset, ``weighted``: the other drawn stimuli)."""
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
    rng = np.random.default_rng(seed)
    pi = inclusion_probabilities(weights, n_trials, floor_share=settings.random_share)
    chosen = systematic_pps(pi, rng)
    uniform = uniform_subsample(chosen, pi, rng)
    return {"block": block.name, "design_version": version, "weights_hash": digest, "seed": seed,
            "random_share": settings.random_share, "pool_size": len(pool),
            "inclusion": {k: float(p) for k, p, c in zip(pool, pi, chosen) if c},
            "random": [k for k, u in zip(pool, uniform) if u],
            "weighted": [k for k, c, u in zip(pool, chosen, uniform) if c and not u]}


def inclusion_lookup(experiment_id: int) -> dict[str, dict[str, float]]:
    """Each adaptively allocated participant's (public id) inclusion probability per drawn
    stimulus; empty when nobody was (no ``[adaptive]``, or draws recorded before inclusion
    probabilities were)."""
    rows = db.session.execute(sa.select(Participant.public_id, Participant.allocation).where(
        Participant.experiment_id == experiment_id)).all()
    return {str(pid): {str(k): float(v) for k, v in record["inclusion"].items()}
            for pid, allocation in rows
            if isinstance(record := (allocation or {}).get("adaptive"), dict)
            and isinstance(record.get("inclusion"), dict)}


def design_matrix(experiment_id: int, participants: list[str], pool: list[str]) -> np.ndarray:
    """(N, pool) each participant's inclusion probabilities over the whole pool, drawn or not, as
    its draw computed them (``draw``: the recorded design version's weights, its number of
    stimuli and ``random_share``), the bound a sequential test needs fixed before the draw
    (``analysis.ratings.weighted.scaled_differences``). A participant whose design cannot be
    rebuilt (no draw, or a pool of another size) gets the floor ``random_share n / S`` every
    design keeps (1 / S when nothing is recorded), which only loosens the bound."""
    records = {str(pid): (allocation or {}).get("adaptive") for pid, allocation in db.session.execute(
        sa.select(Participant.public_id, Participant.allocation).where(
            Participant.experiment_id == experiment_id)).all()}
    weights_of = {v: w for v, w in db.session.execute(
        sa.select(AdaptiveDesign.version, AdaptiveDesign.weights).where(
            AdaptiveDesign.experiment_id == experiment_id)).all()}
    size = len(pool)
    out = np.full((len(participants), size), 1.0 / max(size, 1))
    cache: dict[tuple[int, int, float], np.ndarray] = {}
    for i, pid in enumerate(participants):
        record = records.get(str(pid))
        if not isinstance(record, dict) or not isinstance(record.get("inclusion"), dict):
            continue
        n = max(len(record["inclusion"]), 1)
        share = float(record.get("random_share") or 1.0)
        version = int(record.get("design_version", 0))
        out[i] = min(1.0, share * n / max(size, 1))
        if record.get("pool_size") != size or (version and version not in weights_of):
            continue
        key = (version, n, share)
        if key not in cache:
            weights = (np.full(size, 1.0 / size) if version == 0 else
                       np.array([float(weights_of[version].get(k, 0.0)) for k in pool]))
            cache[key] = inclusion_probabilities(weights, min(n, size), floor_share=share)
        out[i] = cache[key]
    return out


def with_inclusion(table: pd.DataFrame, lookup: dict[str, dict[str, float]]) -> pd.DataFrame:
    """A rated trial table (columns ``participant``, ``stimulus``) with ``inclusion_probability``:
    the probability that the participant's draw included the stimulus (NaN outside the adaptive
    block); ``table`` unchanged when ``lookup`` is empty."""
    if not lookup or table.empty:
        return table
    pairs = pd.MultiIndex.from_arrays([table["participant"].astype(str),
                                       table["stimulus"].astype(str)])
    known = pd.Series({(p, s): v for p, drawn in lookup.items() for s, v in drawn.items()},
                      dtype=float)
    if known.empty:
        return table
    return table.assign(inclusion_probability=known.reindex(pairs).to_numpy())


def export_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """The participants ``frame`` (column ``id``) with each participant's adaptive draw, when any
    participant of it has one (else unchanged)."""
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
        adaptive_pool_size=pd.array([d.get("pool_size") for d in draws], dtype="Int64"),
        adaptive_random=column([";".join(d["random"]) if "random" in d else None for d in draws]),
        adaptive_weighted=column([";".join(d["weighted"]) if "weighted" in d else None
                                  for d in draws]))

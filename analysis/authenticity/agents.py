"""Agents built from real trials, to validate the screen on the images and the humans of a real
data set (``bench/authenticity.py``, the tests): each returns trials in the screen's form.

* ``model_agent``: a candidate model answers every image (a uniform guess on a ``lapse`` share);
  reaction times are a real human's, resampled (so nothing in the timing gives it away);
* ``replay_agent``: a real human's responses and reaction times replayed onto other images (a
  seeded permutation of the trials);
* ``lazy_agent``: one fixed answer, reaction times 450 ms plus uniform jitter of +-5 ms.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

LAZY_RT_MS = 450.0
LAZY_JITTER_MS = 5.0


def _template(human: pd.DataFrame, name: str) -> pd.DataFrame:
    out = human.copy()
    out["participant"] = name
    return out


def model_agent(human: pd.DataFrame, model: pd.DataFrame, name: str,
                rng: np.random.Generator, lapse: float = 0.0) -> pd.DataFrame:
    """``human``'s trials answered by ``model`` (``stimulus``, ``response``), a uniformly drawn
    class instead with probability ``lapse``; RTs a bootstrap of ``human``'s."""
    out = _template(human, name)
    answers = model.drop_duplicates("stimulus").set_index("stimulus")["response"]
    out["response"] = out["stimulus"].map(answers).fillna("na").astype(str)
    guess = rng.random(len(out)) < lapse
    classes = np.sort(human["category"].dropna().astype(str).unique())
    out.loc[guess, "response"] = rng.choice(classes, size=int(guess.sum()))
    out["correct"] = out["response"] == out["category"].astype(str)
    rts = human["rt_ms"].dropna().to_numpy()
    out["rt_ms"] = rng.choice(rts, size=len(out))
    return out


def replay_agent(human: pd.DataFrame, name: str, rng: np.random.Generator) -> pd.DataFrame:
    """``human``'s responses and RTs, in a permuted order, onto ``human``'s images."""
    out = _template(human, name)
    order = rng.permutation(len(out))
    out["response"] = human["response"].to_numpy()[order]
    out["rt_ms"] = human["rt_ms"].to_numpy()[order]
    out["correct"] = out["response"].astype(str) == out["category"].astype(str)
    return out


def lazy_agent(human: pd.DataFrame, name: str, answer: str, rng: np.random.Generator) -> pd.DataFrame:
    """``answer`` on every trial, RTs ``LAZY_RT_MS`` +- ``LAZY_JITTER_MS``."""
    out = _template(human, name)
    out["response"] = answer
    out["correct"] = out["category"].astype(str) == answer
    out["rt_ms"] = LAZY_RT_MS + rng.uniform(-LAZY_JITTER_MS, LAZY_JITTER_MS, size=len(out))
    return out

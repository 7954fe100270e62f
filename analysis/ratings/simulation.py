"""Simulated rating experiments (tidy frames with known ground truth) for tests, benchmarks and demos.

Each stimulus has a true presence probability per category; a participant's rating is that
probability plus Gaussian noise (participant-specific SD), clipped to [0, 1] and rounded to the
5-point scale; a model's probability is sigmoid(logit(truth) + model-specific noise).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd
from scipy.special import expit, logit

from humanlike.vocabulary import StimulusKind


@dataclass(frozen=True)
class SimulatedRatings:
    """A simulated experiment: tidy ``ratings`` rows, ``models`` responses and the ``truth`` (S, K)."""

    ratings: pd.DataFrame
    models: pd.DataFrame
    stimuli: pd.DataFrame
    truth: np.ndarray
    model_noise: dict[str, float]


def simulate_rating_experiment(
    n_participants: int = 12,
    n_natural: int = 20,
    n_per_pair: int = 4,
    n_categories: int = 10,
    n_models: int = 4,
    missing: float = 0.0,
    repeat_share: float = 0.1,
    participant_noise: tuple[float, float] = (0.15, 0.3),
    scale: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0),
    random_state: int | np.random.Generator | None = None,
) -> SimulatedRatings:
    """Simulate a Golan-style rating experiment in humanlike's tidy export format.

    Natural images have one true class (presence ~0.9); controversial images of every unordered pair
    of models mix two classes. ``missing`` is the share of trials left unanswered; ``repeat_share``
    of each participant's stimuli are shown again. Model m's logit noise SD grows with m.
    """
    rng = np.random.default_rng(random_state)
    categories = [str(k) for k in range(n_categories)]
    model_names = [f"model_{m}" for m in range(n_models)]
    noise = {name: 0.4 + 0.5 * m for m, name in enumerate(model_names)}
    rows: list[dict[str, object]] = []
    for index in range(n_natural):
        true_class = int(rng.integers(n_categories))
        rows.append(
            {
                "stimulus": f"natural/{index:04d}_{true_class}",
                "kind": StimulusKind.NATURAL.value,
                "true_class": str(true_class),
                "classes": (true_class,),
            }
        )
    for a, b in combinations(model_names, 2):
        for index in range(n_per_pair):
            c1, c2 = rng.choice(n_categories, size=2, replace=False)
            rows.append(
                {
                    "stimulus": f"controversial/{a}_{c1}_{b}_{c2}_{index}",
                    "kind": StimulusKind.CONTROVERSIAL.value,
                    "true_class": np.nan,
                    "classes": (c1, c2),
                    "targeted_model_1": a,
                    "targeted_model_2": b,
                    "targeted_class_1": str(c1),
                    "targeted_class_2": str(c2),
                }
            )
    stimuli = pd.DataFrame(rows)
    n_stimuli = len(stimuli)
    truth = rng.beta(0.6, 8.0, size=(n_stimuli, n_categories))
    for s, classes in enumerate(stimuli["classes"]):
        if len(classes) == 1:
            truth[s, classes[0]] = rng.uniform(0.8, 0.98)
        else:
            share = rng.uniform(0.2, 0.8)
            truth[s, classes[0]] = share
            truth[s, classes[1]] = rng.uniform(0.1, 0.9) * (1 - share) + 0.1
    truth = np.clip(truth, 0.005, 0.995)
    stimuli = stimuli.drop(columns="classes")

    levels = np.asarray(scale, dtype=float)
    sds = rng.uniform(*participant_noise, size=n_participants)
    parts = []
    for p in range(n_participants):
        order = rng.permutation(n_stimuli)
        repeats = order[: round(repeat_share * n_stimuli)]
        shown = np.r_[order, repeats]
        latent = truth[shown] + rng.normal(0.0, sds[p], size=(shown.size, n_categories))
        rating = levels[np.abs(np.clip(latent, 0, 1)[..., None] - levels).argmin(-1)]
        rating[rng.random(shown.size) < missing] = np.nan
        parts.append(
            pd.DataFrame(
                {
                    "participant": f"p{p + 1:03d}",
                    "trial_index": np.repeat(np.arange(shown.size), n_categories),
                    "stim": np.repeat(shown, n_categories),
                    "is_repeat": np.repeat(np.arange(shown.size) >= n_stimuli, n_categories),
                    "rt_ms": np.repeat(
                        rng.lognormal(np.log(2500.0), 0.4, shown.size), n_categories
                    ),
                    "category": np.tile(categories, shown.size),
                    "rating": rating.reshape(-1),
                }
            )
        )
    ratings = pd.concat(parts, ignore_index=True)
    stim = ratings.pop("stim").to_numpy()
    ratings.insert(0, "experiment", "simulated")
    ratings.insert(3, "trial_type", "rating")
    ratings.insert(4, "stimulus", stimuli["stimulus"].to_numpy()[stim])
    ratings.insert(5, "stimulus_kind", stimuli["kind"].to_numpy()[stim])
    meta = stimuli.drop(columns="kind")
    ratings = ratings.merge(meta, on="stimulus", how="left")

    model_rows = []
    for name in model_names:
        z = logit(truth) + rng.normal(0.0, noise[name], size=truth.shape)
        model_rows.append(
            pd.DataFrame(
                {
                    "model": name,
                    "stimulus": np.repeat(stimuli["stimulus"].to_numpy(), n_categories),
                    "category": np.tile(categories, n_stimuli),
                    "probability": expit(z).reshape(-1),
                    "logit": z.reshape(-1),
                }
            )
        )
    return SimulatedRatings(
        ratings=ratings,
        models=pd.concat(model_rows, ignore_index=True),
        stimuli=stimuli,
        truth=truth,
        model_noise=noise,
    )

"""Benchmark: rating-analysis noise ceiling and bootstrap at Golan et al. (2020) scale.

30 participants x 820 stimuli (100 natural + 36 targeted model pairs x 20 controversial) x 10
categories with 10% of trials missing, 9 models. Times (1) the upper bound of the noise ceiling by
L-BFGS optimisation and (2) 10,000 bootstrap resamples (participants and stratified stimuli) of the
9 models' scores with the noise ceiling, for all / controversial / natural stimuli. Prints one JSON
line: {"upper_bound_seconds": ..., "bootstrap_seconds": ...}.
"""

from __future__ import annotations

import json
import time

from humanlike.analysis.ratings.bootstrap import bootstrap_ratings
from humanlike.analysis.ratings.ceilings import upper_bound_optimized
from humanlike.analysis.ratings.data import clean_ratings, rating_array
from humanlike.analysis.ratings.scores import model_predictions
from humanlike.analysis.ratings.simulation import simulate_rating_experiment


def main() -> None:
    sim = simulate_rating_experiment(
        n_participants=30,
        n_natural=100,
        n_per_pair=20,
        n_categories=10,
        n_models=9,
        missing=0.10,
        random_state=2020,
    )
    ratings = rating_array(clean_ratings(sim.ratings))
    assert ratings.shape == (30, 820, 10), ratings.shape
    predictions = model_predictions(sim.models, ratings)

    start = time.perf_counter()
    bound = upper_bound_optimized(ratings)
    upper_seconds = time.perf_counter() - start
    assert bound.converged

    start = time.perf_counter()
    result = bootstrap_ratings(ratings, predictions, n_resamples=10_000, random_state=0)
    bootstrap_seconds = time.perf_counter() - start
    assert len(result.scores) == 9 * 2 * 3

    print(
        json.dumps(
            {
                "upper_bound_seconds": round(upper_seconds, 3),
                "bootstrap_seconds": round(bootstrap_seconds, 3),
            }
        )
    )


if __name__ == "__main__":
    main()

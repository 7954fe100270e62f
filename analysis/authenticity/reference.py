"""The authenticity screen's reference values, each with its source (none is fitted to the human
data the screen is validated on: ``bench/authenticity.py`` measures its false-positive rate there).
"""

from __future__ import annotations

HUMAN_MODEL_EC_MAX = 0.4
"""Largest error consistency (Cohen's kappa on trial-by-trial correctness) between a human observer
and a vision model: Geirhos et al. (2020, 2021) find human-model kappa far below human-human
kappa for every model tested, and no human-model value above about 0.4 (Klein et al.'s summary, as
the issue cites it). A participant whose kappa with a candidate model is significantly above it
answers like the model, not like a human."""

ALPHA = 0.001
"""Level of each decisive test (one-sided): the chance that a human observer trips one test is at
most this, so at most about 0.003 over the three statistical tests (Bonferroni)."""

MIN_SCORED_TRIALS = 20
"""Fewest trials with a known true class (or timed trials) on which a signal is computed; fewer
and the signal is reported as not measurable (NaN), never as suspicious."""

MIN_RT_CV = 0.1
"""Smallest plausible coefficient of variation of a human's choice reaction times: the standard
deviation of human RTs grows linearly with their mean (Wagenmakers & Brown 2007) and is a sizable
fraction of it in every task they survey; a CV under a tenth means metronome-like responding."""

ANTICIPATION_MS = 100.0
"""Responses faster than this cannot follow from seeing the stimulus (Whelan 2008; the
``[exclusion] min_trial_rt_ms`` default): anticipations."""

MAX_ANTICIPATION_SHARE = 0.1
"""A share of anticipations above this asks the researcher to look (supporting signal only)."""

MIN_REPEATS = 10
"""Fewest repeated presentations on which perfect repeat consistency counts as implausible."""

EX_GAUSSIAN_HUMAN = {"mu_ms": (300.0, 1200.0), "sigma_ms": (20.0, 300.0), "tau_ms": (20.0, 1000.0)}
"""Broad human ranges of the ex-Gaussian parameters of choice RTs (Heathcote et al. 1991; Luce
1986, ch. 6): reported beside each participant's fit, in words; not part of the verdict."""

"""The counts of one analysed set, in the words the report and the ``humanlike analyze`` commands
both print: MLDS participant scales, error-consistency observers and pairs, and the rating
analysis' participants (issue 36: one analysed set, one count, wherever it is stated)."""

from __future__ import annotations

from typing import Any

import pandas as pd


def mlds_participant_counts(per: Any) -> str:
    """"I of N participant scales (participant x sequence) of P analysed participants are
    informative; C converged" for per-participant :class:`~humanlike.analysis.mlds.batch.ScaleFits`
    judged against their sequence's pooled sigma (``with_reference``)."""
    from humanlike.analysis.mlds.batch import MAX_SIGMA_RATIO

    informative = per.informative()[0]
    people = per.keys["participant"].nunique() if "participant" in per.keys else 0
    return (f"{int(informative.sum())} of {len(per.keys)} participant scales (participant x "
            f"sequence) of {people} analysed participants are informative (better than a flat "
            f"scale by likelihood ratio, p < 0.05, with a sigma under {MAX_SIGMA_RATIO:g} times the "
            f"pooled one); {int((per.converged & per.identified).sum())} converged and saw every "
            "level.")


def kappa_counts(trials: pd.DataFrame, pairs: pd.DataFrame) -> str:
    """"O observers (H participants, M models) in P pairs; U of P pairs uninformative" of an
    error-consistency analysis of ``trials`` (the standard frame, with ``group``)."""
    groups = trials.drop_duplicates("observer")["group"].astype(str) if "group" in trials else None
    models = int((groups == "model").sum()) if groups is not None else 0
    observers = trials["observer"].nunique()
    flat = (int((~pairs["informative"].astype(bool)).sum()) if "informative" in pairs else 0)
    return (f"{observers} observers ({observers - models} participants, {models} models) in "
            f"{len(pairs)} pairs; {flat} of {len(pairs)} pairs uninformative (an observer at 0% "
            "or 100% accuracy: no errors to compare).")


def ratings_counts(result: Any) -> str:
    """"A of the N participants with rating trials analysed" of a rating analysis
    (:class:`~humanlike.analysis.ratings.analysis.RatingsAnalysis`)."""
    record = result.summary_record()
    return (f"{record['analysed_participants']} of the {record['participants']} participants with "
            f"rating trials analysed ({record['excluded']} not: QC or the export's analysed set).")

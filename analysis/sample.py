"""The analysed sample: who of the participants who arrived is analysed, decided once.

``decide_analysed`` writes the export's ``analysed`` and ``analysed_reason`` columns; every analysis,
the report, the live panel and the stopping rule read them (``analysed_set``), and ``Sample`` counts
them into the one sentence they all print. The rule, first match wins:

1. returned, timed out or quit early (``LEFT_STATUSES``): out, the status is the reason, unless the
   spec's ``[exclusion] analyse_partial_data = true`` (consent allowing partial data);
2. allocated, consented or started (not finished yet): out, "in progress";
3. rejected: out, "rejected", unless the researcher included the participant;
4. excluded (QC, or the researcher, ``server.overrides``): out with the exclusion reasons;
5. no stored trials: out, "no trials";
6. simulated (a rehearsal the server recorded at arrival, ``simulated``): out, "simulated", unless
   the spec's ``[exclusion] analyse_simulated = true`` (then "simulated: analysed (a rehearsal)");
   the export reader's ``include_simulated`` lets exactly these in;
7. otherwise analysed (a researcher's inclusion is kept as the reason, for the record).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from humanlike.vocabulary import FINISHED_STATUSES, LEFT_STATUSES, ParticipantStatus

RESEARCHER_EXCLUDE = "researcher: "
"""Prefix of a researcher's exclusion reason (``server.overrides.RESEARCHER``)."""
RESEARCHER_INCLUDE = "researcher include: "
"""Prefix of a researcher's inclusion reason (``server.overrides.RESEARCHER_INCLUDE``)."""
IN_PROGRESS = "in progress"
REJECTED = ParticipantStatus.REJECTED.value  # the reason is the status word
NO_TRIALS = "no trials"
SIMULATED = "simulated"
SIMULATED_ANALYSED = "simulated: analysed (a rehearsal)"
PARTIAL = "partial data kept: "
_IN_PROGRESS_STATUSES = frozenset({ParticipantStatus.ALLOCATED, ParticipantStatus.CONSENTED,
                                   ParticipantStatus.STARTED})


def _flag(values: pd.Series) -> pd.Series:
    """A boolean column read leniently (True / 1 / 'true'); missing is false."""
    if values.dtype == bool:
        return values
    text = values.astype(str).str.strip().str.lower().str.replace(r"\.0$", "", regex=True)
    return text.isin(["true", "1"])


def _text(values: pd.Series) -> pd.Series:
    return values.astype(object).where(values.notna(), "").astype(str)


def researcher_included(reasons: pd.Series) -> pd.Series:
    """Whether each ``exclusion_reasons`` cell records a researcher's inclusion."""
    return _text(reasons).str.startswith(RESEARCHER_INCLUDE)


def decide_analysed(people: pd.DataFrame, analyse_partial_data: bool = False,
                    analyse_simulated: bool = False) -> pd.DataFrame:
    """``people`` (the export's participants table: ``status``, ``excluded``,
    ``exclusion_reasons``, optionally ``n_stored`` and ``simulated``) with ``analysed`` and
    ``analysed_reason``."""
    people = people.copy()
    if people.empty:
        people["analysed"], people["analysed_reason"] = pd.Series(dtype=bool), pd.Series(dtype=str)
        return people
    index = people.index
    status = _text(people.get("status", pd.Series("", index=index)))
    excluded = _flag(people.get("excluded", pd.Series(False, index=index)))
    reasons = _text(people.get("exclusion_reasons", pd.Series("", index=index)))
    included = researcher_included(reasons)
    stored = pd.to_numeric(people.get("n_stored", pd.Series(1, index=index)),
                           errors="coerce").fillna(0)
    left = status.isin(LEFT_STATUSES)
    why = pd.Series("", index=index, dtype=object)
    out = pd.Series(False, index=index)

    def rule(mask: pd.Series, text: pd.Series | str) -> None:
        nonlocal out
        new = mask & ~out
        why[new] = text[new] if isinstance(text, pd.Series) else text
        out = out | new

    status_words = status.str.replace("_", " ")
    if not analyse_partial_data:
        rule(left, status_words)
    rule(status.isin(_IN_PROGRESS_STATUSES), IN_PROGRESS)
    rule((status == ParticipantStatus.REJECTED) & ~included, REJECTED)
    rule(excluded, reasons)
    rule(stored <= 0, NO_TRIALS)
    simulated = _flag(people.get("simulated", pd.Series(False, index=index)))
    if not analyse_simulated:
        rule(simulated, SIMULATED)
    kept = ~out
    why[kept & included] = reasons[kept & included]
    why[kept & simulated] = SIMULATED_ANALYSED
    if analyse_partial_data:
        partial = kept & left
        why[partial] = PARTIAL + status_words[partial] + why[partial].map(
            lambda r: f";{r}" if r else "")
    people["analysed"] = kept.astype(bool)
    people["analysed_reason"] = why.astype(str)
    return people


def with_analysed(people: pd.DataFrame, include_simulated: bool = False) -> pd.DataFrame:
    """The participants table with ``analysed`` / ``analysed_reason``: as exported, or decided by
    the default rule for an export written before those columns existed; ``include_simulated``
    lets in the simulated participants that are out for that alone (reason "simulated")."""
    if "analysed" in people.columns:
        people = people.copy()
        people["analysed"] = _flag(people["analysed"])
        people["analysed_reason"] = _text(people.get(
            "analysed_reason", pd.Series("", index=people.index)))
    else:
        people = decide_analysed(people)
    if include_simulated:
        only_simulated = ~people["analysed"] & (people["analysed_reason"] == SIMULATED)
        people.loc[only_simulated, "analysed"] = True
        people.loc[only_simulated, "analysed_reason"] = SIMULATED_ANALYSED
    return people


def analysed_set(people: pd.DataFrame | None) -> frozenset[str] | None:
    """Public ids of the analysed participants (None without a participants table)."""
    if people is None or "participant" not in people.columns:
        return None
    people = with_analysed(people)
    return frozenset(people.loc[people["analysed"], "participant"].astype(str))


def _qc_rule(reason: str) -> str:
    """``natural_accuracy 0.048 < 0.5`` -> ``natural_accuracy < 0.5`` (the rule, not the value)."""
    words = reason.split()
    return f"{words[0]} {' '.join(words[2:])}" if len(words) >= 3 else reason


@dataclass(frozen=True)
class Sample:
    """Counts of the participants who arrived, by what became of them."""

    arrived: int
    analysed: int
    completed: int
    returned: int
    timed_out: int = 0
    quit_early: int = 0
    in_progress: int = 0
    rejected: int = 0
    qc_excluded: int = 0
    qc_reasons: dict[str, int] = field(default_factory=dict)
    researcher_excluded: int = 0
    researcher_included: int = 0
    no_trials: int = 0
    partial_kept: int = 0
    simulated: int = 0
    """Simulated participants who arrived (a rehearsal; also counted in their statuses)."""
    simulated_analysed: int = 0

    @classmethod
    def of(cls, people: pd.DataFrame | None) -> Sample:
        """The counts of an export's participants table (``with_analysed`` applied)."""
        if people is None or people.empty:
            return cls(0, 0, 0, 0)
        people = with_analysed(people)
        status = _text(people.get("status", pd.Series("", index=people.index)))
        why = people["analysed_reason"]
        out = ~people["analysed"]
        simulated = _flag(people.get("simulated", pd.Series(False, index=people.index)))
        # QC and researcher exclusions among those not already out for their status
        by_status = why.isin([s.replace("_", " ") for s in LEFT_STATUSES]) | why.isin(
            [IN_PROGRESS, REJECTED, SIMULATED])
        researcher = out & ~by_status & why.str.startswith(RESEARCHER_EXCLUDE)
        qc = out & ~by_status & ~researcher & (why != NO_TRIALS)
        rules: Counter[str] = Counter()
        for text in why[qc]:
            rules.update({_qc_rule(r) for r in text.split(";") if r})
        return cls(
            arrived=len(people), analysed=int(people["analysed"].sum()),
            completed=int(status.isin(FINISHED_STATUSES).sum()),
            returned=int((status == ParticipantStatus.RETURNED).sum()),
            timed_out=int((status == ParticipantStatus.TIMED_OUT).sum()),
            quit_early=int((status == ParticipantStatus.QUIT_EARLY).sum()),
            in_progress=int(status.isin(_IN_PROGRESS_STATUSES).sum()),
            rejected=int((status == ParticipantStatus.REJECTED).sum()),
            qc_excluded=int(qc.sum()), qc_reasons=dict(sorted(rules.items())),
            researcher_excluded=int(researcher.sum()),
            researcher_included=int((people["analysed"] & researcher_included(why)).sum()),
            no_trials=int((out & (why == NO_TRIALS)).sum()),
            partial_kept=int((people["analysed"] & why.str.startswith(PARTIAL)).sum()),
            simulated=int(simulated.sum()),
            simulated_analysed=int((people["analysed"] & simulated).sum()))

    def sentence(self) -> str:
        """"N analysed of M who arrived: c completed, r returned, q excluded by QC (reasons)",
        with the other groups named where there are any."""
        parts = [f"{self.completed} completed", f"{self.returned} returned"]
        for n, words in ((self.timed_out, "timed out"), (self.quit_early, "quit early"),
                         (self.in_progress, "still in progress"), (self.rejected, REJECTED)):
            if n:
                parts.append(f"{n} {words}")
        qc = f"{self.qc_excluded} excluded by QC"
        if self.qc_reasons:
            qc += " (" + ", ".join(f"{rule}: {n}" for rule, n in self.qc_reasons.items()) + ")"
        parts.append(qc)
        for n, words in ((self.researcher_excluded, "excluded by the researcher"),
                         (self.researcher_included, "included by the researcher"),
                         (self.no_trials, "without trials")):
            if n:
                parts.append(f"{n} {words}")
        if self.simulated:
            parts.append(f"{self.simulated} simulated (a rehearsal: "
                         + (f"{self.simulated_analysed} of them analysed, as asked for)"
                            if self.simulated_analysed else "not analysed)"))
        text = f"{self.analysed} analysed of {self.arrived} who arrived: " + ", ".join(parts)
        if self.partial_kept:
            text += (f"; partial data of {self.partial_kept} who left early kept "
                     "(the spec's analyse_partial_data)")
        return text + "."


def sample_sentence(people: pd.DataFrame | None) -> str:
    """The one sentence about the analysed sample (``Sample.sentence``)."""
    return Sample.of(people).sentence()

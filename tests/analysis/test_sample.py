"""The analysed sample, decided once (humanlike.analysis.sample): who is analysed, why the others
are not, and the one sentence every analysis prints."""

from __future__ import annotations

import pandas as pd

from humanlike.analysis.exclusions import ExclusionRules
from humanlike.analysis.io.export import read_export
from humanlike.analysis.sample import Sample, decide_analysed, sample_sentence


def _people() -> pd.DataFrame:
    rows = [  # participant, status, excluded, exclusion_reasons, n_stored
        ("done", "completed", False, "", 181),
        ("approved", "approved", False, "", 181),
        ("returned", "returned", False, "", 25),
        ("rejected", "rejected", False, "", 181),
        ("qc", "completed", True, "catch_accuracy 0 < 0.66;natural_accuracy 0.05 < 0.3", 181),
        ("qc2", "submitted", True, "catch_accuracy 0.33 < 0.66", 181),
        ("included", "completed", False, "researcher include: fine;catch_accuracy 0.33 < 0.66", 181),
        ("rej-incl", "rejected", False, "researcher include: paid in error", 181),
        ("out", "completed", True, "researcher: fell asleep", 181),
        ("timed", "timed_out", False, "", 40),
        ("quit", "quit_early", False, "", 3),
        ("now", "started", False, "", 10),
        ("empty", "completed", False, "", 0),
    ]
    return pd.DataFrame(rows, columns=["participant", "status", "excluded", "exclusion_reasons",
                                       "n_stored"])


def test_each_participant_gets_the_documented_decision():
    frame = decide_analysed(_people()).set_index("participant")
    analysed = frame.index[frame["analysed"]].tolist()
    assert analysed == ["done", "approved", "included", "rej-incl"]
    why = frame["analysed_reason"]
    assert why["returned"] == "returned" and why["timed"] == "timed out"
    assert why["quit"] == "quit early" and why["now"] == "in progress"
    assert why["rejected"] == "rejected" and why["empty"] == "no trials"
    assert why["qc"].startswith("catch_accuracy") and why["out"] == "researcher: fell asleep"
    assert why["included"].startswith("researcher include: ") and why["done"] == ""


def test_partial_data_is_analysed_only_with_the_spec_switch():
    frame = decide_analysed(_people(), analyse_partial_data=True).set_index("participant")
    assert frame.loc[["returned", "timed", "quit"], "analysed"].all()
    assert frame.loc["returned", "analysed_reason"] == "partial data kept: returned"
    assert not frame.loc["now", "analysed"]  # still in progress: not partial data yet
    assert ExclusionRules.from_mapping({"analyse_partial_data": True}).analyse_partial_data
    assert "analyse_partial_data" not in ExclusionRules().active()


def test_the_sentence_counts_every_arrival_once():
    sample = Sample.of(decide_analysed(_people()))
    assert (sample.arrived, sample.analysed) == (13, 4)
    assert (sample.completed, sample.returned, sample.rejected) == (7, 1, 2)
    assert sample.qc_excluded == 2 and sample.researcher_excluded == 1
    assert sample.qc_reasons == {"catch_accuracy < 0.66": 2, "natural_accuracy < 0.3": 1}
    text = sample.sentence()
    assert text.startswith("4 analysed of 13 who arrived: 7 completed, 1 returned, 1 timed out, "
                           "1 quit early, 1 still in progress, 2 rejected, 2 excluded by QC "
                           "(catch_accuracy < 0.66: 2, natural_accuracy < 0.3: 1), "
                           "1 excluded by the researcher, 2 included by the researcher, "
                           "1 without trials."), text


def test_an_export_without_the_columns_is_decided_by_the_same_rule(tmp_path):
    people = _people().drop(columns=["n_stored"])
    people.to_csv(tmp_path / "participants.csv", index=False)
    pd.DataFrame({"participant": people["participant"], "stimulus": "s", "correct": True,
                  "condition": "c"}).to_csv(tmp_path / "classifications.csv", index=False)
    export = read_export(tmp_path)
    assert export.excluded_participants() == frozenset(
        people["participant"]) - {"done", "approved", "included", "rej-incl", "empty"}
    assert sorted(export.classifications().frame["participant"]) == [
        "approved", "done", "empty", "included", "rej-incl"]
    assert export.sample_sentence() == sample_sentence(decide_analysed(people))
    assert read_export(tmp_path, include_excluded=True).excluded_participants() == frozenset()

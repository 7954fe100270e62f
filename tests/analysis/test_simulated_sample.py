"""Simulated participants (a rehearsal, marked by the server at arrival) are out of the analysed
sample by default, counted on their own, and in only when asked for (the spec's
``[exclusion] analyse_simulated``, or the reader's ``include_simulated``)."""

from __future__ import annotations

import pandas as pd

from humanlike.analysis.exclusions import ExclusionRules
from humanlike.analysis.io.export import read_export
from humanlike.analysis.report.methods import design_text
from humanlike.analysis.sample import SIMULATED, Sample, decide_analysed


def _people() -> pd.DataFrame:
    rows = [  # participant, platform, status, excluded, exclusion_reasons, n_stored, simulated
        ("real1", "prolific", "completed", False, "", 20, False),
        ("real2", "prolific", "approved", False, "", 20, False),
        ("sim1", "prolific", "completed", False, "", 20, True),
        ("sim2", "prolific", "completed", False, "", 20, True),
        ("sim3", "prolific", "completed", False, "", 20, True),
        ("simqc", "prolific", "completed", True, "catch_accuracy 0 < 0.5", 20, True),
        ("simnow", "prolific", "started", False, "", 3, True),
    ]
    return pd.DataFrame(rows, columns=["participant", "platform", "status", "excluded",
                                       "exclusion_reasons", "n_stored", "simulated"])


def test_simulated_participants_are_not_analysed_and_have_their_own_reason():
    frame = decide_analysed(_people()).set_index("participant")
    assert frame.index[frame["analysed"]].tolist() == ["real1", "real2"]
    why = frame["analysed_reason"]
    assert (why["sim1"], why["sim2"], why["sim3"]) == (SIMULATED,) * 3 == ("simulated",) * 3
    # out for another reason first: that reason is kept (and the participant is still out)
    assert why["simqc"] == "catch_accuracy 0 < 0.5" and why["simnow"] == "in progress"


def test_the_sentence_counts_simulated_participants_apart_from_qc():
    sample = Sample.of(decide_analysed(_people()))
    assert (sample.arrived, sample.analysed, sample.simulated, sample.simulated_analysed) == (
        7, 2, 5, 0)
    assert sample.qc_excluded == 1  # simqc; sim1-3 are not QC exclusions
    assert sample.sentence() == (
        "2 analysed of 7 who arrived: 6 completed, 0 returned, 1 still in progress, "
        "1 excluded by QC (catch_accuracy < 0.5: 1), 5 simulated (a rehearsal: not analysed).")


def test_the_spec_switch_analyses_a_rehearsal_and_says_so():
    assert ExclusionRules.from_mapping({"analyse_simulated": True}).analyse_simulated
    assert "analyse_simulated" not in ExclusionRules(analyse_simulated=True).active()
    frame = decide_analysed(_people(), analyse_simulated=True).set_index("participant")
    assert frame.index[frame["analysed"]].tolist() == ["real1", "real2", "sim1", "sim2", "sim3"]
    assert frame.loc["sim1", "analysed_reason"] == "simulated: analysed (a rehearsal)"
    sample = Sample.of(frame.reset_index())
    assert (sample.simulated, sample.simulated_analysed) == (5, 3)
    assert sample.sentence().endswith(
        "5 simulated (a rehearsal: 3 of them analysed, as asked for).")


def test_the_reader_includes_simulated_participants_only_when_asked(tmp_path):
    people = decide_analysed(_people())
    people.to_csv(tmp_path / "participants.csv", index=False)
    pd.DataFrame({"participant": people["participant"], "stimulus": "s", "correct": True,
                  "block": "b", "trial_type": "classification", "practice": False}).to_csv(
        tmp_path / "classifications.csv", index=False)
    default = read_export(tmp_path)
    assert sorted(default.classifications().frame["participant"]) == ["real1", "real2"]
    assert default.sample_sentence().startswith("2 analysed of 7 who arrived")
    rehearsal = read_export(tmp_path, include_simulated=True)
    assert sorted(rehearsal.classifications().frame["participant"]) == [
        "real1", "real2", "sim1", "sim2", "sim3"]  # simqc and simnow stay out for their reasons
    assert rehearsal.sample_sentence() == (
        "5 analysed of 7 who arrived: 6 completed, 0 returned, 1 still in progress, "
        "1 excluded by QC (catch_accuracy < 0.5: 1), "
        "5 simulated (a rehearsal: 3 of them analysed, as asked for).")


def test_methods_name_simulated_participants_apart_from_the_platform(tmp_path):
    decide_analysed(_people(), analyse_simulated=True).to_csv(tmp_path / "participants.csv",
                                                              index=False)
    text = design_text(None, read_export(tmp_path))
    assert ("The analysed data came from these platforms (participants): "
            "simulated on prolific (3), prolific (2).") in text

"""The report's display certificate counts the analysed participants (issue 36 item 6): its
calibration table and its timing table describe the same analysed set, and say what each counts."""

from __future__ import annotations

import re

import pandas as pd

from humanlike.analysis.io.export import read_export
from humanlike.analysis.report.display import display_section


def _write_export(folder):
    """Four participants with a display record: p1-p3 analysed (p1, p2 calibrated with the
    chinrest), p4 excluded (calibrated); p5 analysed without a display record. All five timed."""
    folder.mkdir()
    pd.DataFrame({
        "participant": ["p1", "p2", "p3", "p4", "p5"], "status": "completed",
        "analysed": [True, True, True, False, True],
        "analysed_reason": ["", "", "", "catch_accuracy 0 < 0.66", ""],
    }).to_csv(folder / "participants.csv", index=False)
    rows = [{"participant": p, "trial_index": i, "trial_type": "classification",
             "block": "classification", "frame_ms": 1000 / 60, "requested_ms": 200,
             "requested_frames": 12, "rounding_ms": 0, "frames": 12, "frame_error": 0,
             "presented_ms": 200.0, "duration_error_ms": 0.0}
            for p in ("p1", "p2", "p3", "p4", "p5") for i in range(4)]
    pd.DataFrame(rows).to_csv(folder / "trial_timing.csv", index=False)
    pd.DataFrame({
        "participant": ["p1", "p2", "p3", "p4"], "refresh_hz": [60.0, 60.0, 60.0, 144.0],
        "frame_ms": [1000 / 60] * 3 + [1000 / 144], "px_per_mm": [3.5, 3.8, None, 9.0],
        "viewing_distance_mm": [500.0, 600.0, None, 200.0],
        "px_per_deg": [30.0, 40.0, None, 90.0], "image_height_px": 224,
        "image_height_deg": [7.5, 5.6, None, 2.5], "device_pixel_ratio": 1.0,
        "suitable": True, "unsuitable_reason": "",
    }).to_csv(folder / "display.csv", index=False)
    return folder


def test_display_measurements_count_the_analysed_participants_with_a_display_record(tmp_path):
    section = display_section(read_export(_write_export(tmp_path / "export")))
    assert section.missing is None
    timing, measures = section.tables
    assert timing.frame["participants"].sum() == 4  # p4 excluded, p5 timed without a record
    n = measures.frame.set_index("measure")["n"]
    assert n["refresh rate (Hz)"] == 3  # p1-p3: the analysed with a display record
    assert n["pixels per degree"] == 2  # p1, p2: those of them who calibrated
    medians = measures.frame.set_index("measure")["median"]
    assert medians["pixels per degree"] == 35.0  # p4's 90 is not in it
    assert medians["refresh rate (Hz)"] == 60.0
    text = " ".join(section.paragraphs) + " " + measures.caption
    assert "16 timed trials of 4 analysed participants" in text
    assert re.search(r"3 of the 4 analysed participants have a display record; 2 of them "
                     r"calibrated", text), text


def _write_triads(folder):
    """Two sequences of 7 levels; p1-p3 analysed, p4 excluded: 2 x 35 triads each (sigma 0.15)."""
    import numpy as np

    from humanlike.analysis.mlds.simulate import simulate_responses
    from humanlike.stimuli.mlds_design import all_triads

    folder.mkdir()
    pd.DataFrame({"participant": ["p1", "p2", "p3", "p4"], "status": "completed",
                  "analysed": [True, True, True, False],
                  "analysed_reason": ["", "", "", "catch_accuracy 0 < 0.66"]}).to_csv(
        folder / "participants.csv", index=False)
    levels = np.tile(all_triads(7), (2 * 2, 1))  # 2 repetitions of 2 sequences
    sequence = np.repeat(["a", "b"], 2 * 35)
    psi = np.linspace(0, 1, 7) ** 1.5
    frames = []
    for i, person in enumerate(["p1", "p2", "p3", "p4"]):
        response = simulate_responses(levels, psi, 0.15, random_state=i)
        frames.append(pd.DataFrame({"participant": person, "sequence": sequence,
                                    "s1": levels[:, 0], "s2": levels[:, 1], "s3": levels[:, 2],
                                    "response": response, "trial_type": "triad"}))
    pd.concat(frames).to_csv(folder / "triads.csv", index=False)
    return folder


def test_the_report_counts_the_mlds_scales_of_the_analysed_participants_as_the_cli(tmp_path):
    """6 scales (3 analysed participants x 2 sequences) in the report's sentence and the
    command's; the excluded participant's 2 scales are drawn (dashed), not counted."""
    from click.testing import CliRunner

    from humanlike.analysis.report.sections import ReportSettings, StudyResults, mlds_sections
    from humanlike.cli import main

    export = _write_triads(tmp_path / "export")
    section, _ = mlds_sections(read_export(export), ReportSettings(n_resamples=20,
                                                                   n_diagnostic_sims=10),
                               StudyResults(), None, None, lambda name: None)
    text = " ".join(section.paragraphs)
    counted = re.search(r"\d+ of 6 participant scales \(participant x sequence\) of 3 analysed "
                        r"participants are informative .*? every level\.", text)
    assert counted is not None, text
    assert "dashed orange: 2 scale(s)" in section.figures[0].caption
    result = CliRunner().invoke(main, ["analyze", "mlds", str(export / "triads.csv"), "--out",
                                       str(tmp_path / "mlds"), "--n-resamples", "0"])
    assert result.exit_code == 0, result.output
    assert counted[0] in result.output

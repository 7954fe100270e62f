"""``humanlike analyze mlds``: pooled and per-participant scales written as CSV and a figure."""

from __future__ import annotations

import numpy as np
import pandas as pd
from click.testing import CliRunner

from humanlike.analysis.data_paths import shared_data_dir
from humanlike.analysis.mlds.estimator import MLDS
from humanlike.analysis.mlds.simulate import simulate_responses
from humanlike.cli import main
from humanlike.stimuli.mlds_design import triad_design


def export_like_triads(path):
    rng = np.random.default_rng(0)
    frames = []
    for seq, gamma in (("cat-dog", 0.7), ("car-bus", 1.8)):
        psi = (np.arange(7) / 6) ** gamma
        for p in range(8):
            d = triad_design(7, repeats=4, rng=rng)
            d["response"] = simulate_responses(d[["s1", "s2", "s3"]].to_numpy(), psi, 0.12,
                                               random_state=rng)
            frames.append(d.assign(sequence=seq, participant=f"p{p:02d}", trial_type="triad"))
    df = pd.concat(frames, ignore_index=True)
    df.to_csv(path, index=False)
    return df


def test_cli_writes_pooled_and_participant_scales_and_a_figure(tmp_path):
    df = export_like_triads(tmp_path / "triads.csv")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["analyze", "mlds", str(tmp_path / "triads.csv"), "--out",
                                       str(out), "--n-boot", "200", "--seed", "1"])
    assert result.exit_code == 0, result.output
    scales = pd.read_csv(out / "scales_by_sequence.csv")
    fits = pd.read_csv(out / "fits_by_sequence.csv")
    assert set(scales.columns) >= {"sequence", "level", "scale", "scale_std", "ci_low", "ci_high"}
    assert len(scales) == 2 * 7 and len(fits) == 2
    for seq in ("car-bus", "cat-dog"):
        pooled = MLDS().fit(df[df.sequence == seq])
        got = scales[scales.sequence == seq].sort_values("level")
        np.testing.assert_allclose(got["scale_std"], pooled.scale_std_, atol=1e-8)
    skew = fits.set_index("sequence")["skewness"]
    assert skew["car-bus"] > 0 > skew["cat-dog"]  # expanding vs compressive scale
    participants = pd.read_csv(out / "fits_by_participant.csv")
    assert len(participants) == 16 and {"converged", "identified"} <= set(participants.columns)
    assert (out / "mlds_scales.png").stat().st_size > 10_000
    assert "2 pooled scale(s)" in result.output


def test_cli_fits_r_layout_quadruples_as_one_pooled_scale(tmp_path):
    src = shared_data_dir() / "mlds" / "data_kk_all_swapped.csv"
    result = CliRunner().invoke(main, ["analyze", "mlds", str(src), "--out", str(tmp_path),
                                       "--design", "quadruples", "--n-boot", "0"])
    assert result.exit_code == 0, result.output
    fits = pd.read_csv(tmp_path / "fits_by_sequence.csv")
    assert len(fits) == 1 and abs(fits["sigma"][0] - 0.179) < 0.0005
    assert not (tmp_path / "fits_by_participant.csv").exists()


def test_cli_reports_bad_input_without_a_traceback(tmp_path):
    pd.DataFrame({"a": [1]}).to_csv(tmp_path / "bad.csv", index=False)
    result = CliRunner().invoke(main, ["analyze", "mlds", str(tmp_path / "bad.csv"), "--out",
                                       str(tmp_path / "o")])
    assert result.exit_code != 0
    assert "response, s1, s2, s3" in result.output

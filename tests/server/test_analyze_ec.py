"""``humanlike analyze ec``: reads model-vs-human data and our export, writes CSVs and figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from humanlike.analysis.data_paths import shared_data_dir
from humanlike.cli import main

EDGE = shared_data_dir() / "model-vs-human" / "raw-data" / "edge"


def test_model_vs_human_folder_gives_the_brain_score_ceiling_and_all_outputs(tmp_path: Path):
    out = tmp_path / "ec"
    res = CliRunner().invoke(
        main, ["analyze", "ec", str(EDGE), "--out", str(out), "--n-boot", "300", "--n-sim", "300"]
    )
    assert res.exit_code == 0, res.output
    summary = pd.read_csv(out / "summary.csv", keep_default_na=False)
    ceiling = summary.query("level == 'experiment' and statistic == 'human-human'")
    assert round(float(ceiling["kappa"].iloc[0]), 5) == 0.31844
    assert ceiling["ci_low"].iloc[0] < 0.31844 < ceiling["ci_high"].iloc[0]
    pairs = pd.read_csv(out / "pairs.csv")
    assert len(pairs) == 78
    assert {"p_independence", "p_holm_sidak", "significant", "ci_low"} <= set(pairs.columns)
    assert (pairs["p_holm_sidak"] >= pairs["p_independence"]).all()
    assert len(pd.read_csv(out / "model_comparisons.csv")) == 3
    matrix = pd.read_csv(out / "matrix_edge.csv", index_col=0)
    assert matrix.shape == (13, 13)
    for name in ("matrix_edge.png", "scatter_edge.png", "ec_per_model_edge.png"):
        assert (out / name).stat().st_size > 1000
    assert "human-human kappa = 0.31844" in res.output


def _export(folder: Path) -> None:
    """A small classification export: 4 participants, one excluded, plus practice/repeat/catch."""
    rng = np.random.default_rng(0)
    rows = []
    for p in ["p01", "p02", "p03", "p04"]:
        for i in range(40):
            rows.append(
                {
                    "experiment": "digits",
                    "participant": p,
                    "condition": "A",
                    "trial_index": i,
                    "practice": False,
                    "stimulus": f"natural/d{i:02d}.png",
                    "stimulus_kind": "natural",
                    "is_repeat": False,
                    "correct": bool(rng.random() < 0.7),
                }
            )
        rows.append({**rows[-1], "trial_index": 40, "is_repeat": True})  # repeat of d39
        rows.append(
            {
                **rows[-1],
                "trial_index": 41,
                "is_repeat": False,
                "practice": True,
                "stimulus": "practice/x.png",
            }
        )
        rows.append(
            {
                **rows[-1],
                "trial_index": 42,
                "practice": False,
                "stimulus": "catch/c.png",
                "stimulus_kind": "catch",
            }
        )
    pd.DataFrame(rows).to_csv(folder / "classifications.csv", index=False)
    pd.DataFrame(
        {"participant": ["p01", "p02", "p03", "p04"], "excluded": [False, False, False, True]}
    ).to_csv(folder / "participants.csv", index=False)


def test_export_folder_drops_repeats_practice_catch_and_excluded_participants(tmp_path: Path):
    _export(tmp_path)
    out = tmp_path / "out"
    res = CliRunner().invoke(
        main,
        ["analyze", "ec", str(tmp_path), "--out", str(out), "--n-boot", "200", "--n-sim", "200"],
    )
    assert res.exit_code == 0, res.output
    pairs = pd.read_csv(out / "pairs.csv")
    assert set(pairs["observer_a"]) | set(pairs["observer_b"]) == {"p01", "p02", "p03"}
    assert (pairs["n"] == 40).all()
    assert "dropped 1 excluded participants" in res.output
    assert not (out / "model_comparisons.csv").exists()
    assert (out / "matrix_digits.png").exists()


def test_include_excluded_keeps_flagged_participants(tmp_path: Path):
    _export(tmp_path)
    res = CliRunner().invoke(
        main,
        [
            "analyze",
            "ec",
            str(tmp_path / "classifications.csv"),
            "--out",
            str(tmp_path / "o"),
            "--n-boot",
            "50",
            "--n-sim",
            "50",
            "--include-excluded",
            "--no-figures",
        ],
    )
    assert res.exit_code == 0, res.output
    assert len(pd.read_csv(tmp_path / "o" / "pairs.csv")) == 6
    assert not list((tmp_path / "o").glob("*.png"))


def test_a_csv_that_is_neither_layout_fails_with_a_clear_message(tmp_path: Path):
    bad = tmp_path / "trials.csv"
    pd.DataFrame({"who": ["a"], "what": [1]}).to_csv(bad, index=False)
    res = CliRunner().invoke(main, ["analyze", "ec", str(bad), "--out", str(tmp_path / "o")])
    assert res.exit_code != 0
    assert "participant" in res.output


@pytest.mark.parametrize("flag", ["--degenerate=strict", "--unbiased"])
def test_kappa_options_reach_the_analysis(tmp_path: Path, flag):
    out = tmp_path / "o"
    res = CliRunner().invoke(
        main,
        [
            "analyze",
            "ec",
            str(EDGE),
            "--out",
            str(out),
            "--n-boot",
            "20",
            "--n-sim",
            "20",
            "--no-figures",
            flag,
        ],
    )
    assert res.exit_code == 0, res.output
    ceiling = (
        pd.read_csv(out / "summary.csv")
        .query("level == 'experiment' and statistic == 'human-human'")["kappa"]
        .iloc[0]
    )
    if flag == "--unbiased":
        assert ceiling > 0.31844  # n k / ((n - 1) + k) > k for 0 < k < 1
    else:
        assert round(ceiling, 5) == 0.31844  # no degenerate pairs in edge


RAW = shared_data_dir() / "model-vs-human" / "raw-data"


def _ec(*args: str):
    return CliRunner().invoke(main, ["analyze", "ec", *args])


def test_all_four_published_experiments_reproduce_brain_score_with_its_exclusions(tmp_path: Path):
    # Brain-Score's geirhos2021 leaves out contrast c100, c03, c01 (shared model-vs-human README)
    exclusions = tmp_path / "exclude.toml"
    exclusions.write_text('contrast = ["c100", "c03", "c01"]\n')
    out = tmp_path / "o"
    res = _ec(str(RAW), "--out", str(out), "--n-boot", "20", "--n-sim", "20", "--no-figures",
              "--exclude-conditions", str(exclusions))
    assert res.exit_code == 0, res.output
    assert "left out conditions c100, c03, c01 of contrast (3360 trials)" in res.output
    summary = pd.read_csv(out / "summary.csv", keep_default_na=False)
    per_exp = summary[summary["level"] == "experiment"]
    assert not per_exp.duplicated(["experiment", "statistic", "model"]).any()
    human = per_exp[per_exp["statistic"] == "human-human"].set_index("experiment")["kappa"]
    assert {k: round(float(v), 5) for k, v in human.items() if k != "cue-conflict"} == {
        "contrast": 0.43703, "edge": 0.31844, "silhouette": 0.47571}
    resnet = per_exp[(per_exp["experiment"] == "contrast") & (per_exp["model"] == "resnet50")]
    assert round(float(resnet["kappa"].iloc[0]), 5) == 0.22546
    assert set(summary.loc[summary["experiment"] == "contrast", "condition"]) == {
        "all", "c05", "c10", "c15", "c30", "c50"}


def test_non_trial_csvs_in_the_folder_are_skipped_with_a_notice(tmp_path: Path):
    folder = tmp_path / "edge"
    folder.mkdir()
    for f in EDGE.glob("*.csv"):
        (folder / f.name).write_bytes(f.read_bytes())
    (folder / "README.csv").write_text("what,why\nnotes,none\n")
    res = _ec(str(folder), "--out", str(tmp_path / "o"), "--n-boot", "20", "--n-sim", "20",
              "--no-figures")
    assert res.exit_code == 0, res.output
    assert f"skipped {folder / 'README.csv'}: not a model-vs-human trial file" in res.output
    assert "human-human kappa = 0.31844" in res.output


def test_a_bad_trial_file_gets_one_line_naming_file_and_column(tmp_path: Path):
    bad = tmp_path / "edge_subject-99_session_1.csv"
    bad.write_text("subj,Session,trial,rt,object_response,category,condition,imagename\n"
                   ",1,1,1.0,oven,oven,0,0001_edg_s01_0_oven_00_oven10.png\n")
    res = _ec(str(tmp_path), "--out", str(tmp_path / "o"))
    assert res.exit_code != 0
    assert res.output.strip() == f"Error: {bad}: column 'subj' has empty values"
    assert res.exception is None or isinstance(res.exception, SystemExit)


def test_a_malformed_exclusions_file_names_file_and_experiment(tmp_path: Path):
    bad = tmp_path / "exclude.toml"
    bad.write_text('contrast = "c100"\n')
    res = _ec(str(EDGE), "--out", str(tmp_path / "o"), "--exclude-conditions", str(bad))
    assert res.exit_code == 2
    assert f"{bad}: contrast: expected a list of condition names" in res.output


def test_rating_decisions_in_an_export_get_their_own_matrix_and_ties_can_count_as_wrong(
    tmp_path: Path,
):
    rows = []
    for p in ["p01", "p02", "p03"]:
        for i in range(30):
            rows.append({"experiment": "digits", "participant": p, "condition": "A",
                         "trial_index": i, "practice": False, "stimulus": f"natural/d{i:02d}.png",
                         "stimulus_kind": "natural", "is_repeat": False,
                         "correct": i % 3 != 0, "n_tied": 2 if i % 2 else 1})
    pd.DataFrame(rows).to_csv(tmp_path / "decisions.csv", index=False)
    out = tmp_path / "o"
    res = _ec(str(tmp_path), "--out", str(out), "--n-boot", "20", "--n-sim", "20", "--no-figures")
    assert res.exit_code == 0, res.output
    assert (out / "matrix_digits-ratings.csv").exists()
    summary = pd.read_csv(out / "summary.csv")
    assert summary.query("level == 'experiment'")["kappa"].iloc[0] == 1.0  # identical decisions
    res = _ec(str(tmp_path), "--out", str(tmp_path / "o2"), "--n-boot", "20", "--n-sim", "20",
              "--no-figures", "--ties", "incorrect")
    assert res.exit_code == 0, res.output
    pairs = pd.read_csv(tmp_path / "o2" / "pairs.csv")
    assert (pairs["acc_a"].round(4) == round(10 / 30, 4)).all()  # correct and untied: i % 6 in {2, 4}


def test_a_rating_only_studys_report_and_panel_show_the_kappa_matrix_of_analyze_ec(app, tmp_path):
    """Error consistency of a study with rating trials only: `analyze ec`, the report and the live
    panel score the same trials (error_consistency.inputs.ec_trials) and give one matrix."""
    import sqlalchemy as sa

    from humanlike.analysis.io.export import read_export
    from humanlike.analysis.report import ReportSettings, build_report
    from humanlike.server.export.writer import write_export
    from humanlike.server.extensions import db
    from humanlike.server.live.panel import refresh
    from humanlike.server.tables.core import Experiment, PanelResult
    from tests.server.conftest import enter
    from tests.server.test_export import run_participant

    rng = np.random.default_rng(5)
    for i in range(4):
        client = app.test_client()
        pid, token = enter(client, f"PROLIFIC_PID=R{i}&STUDY_ID=s&SESSION_ID=x{i}")
        run_participant(client, pid, token, rng)
    with app.app_context():
        write_export("small", tmp_path / "export")
        assert refresh(db.session.execute(sa.select(Experiment)).scalar_one(), force=True)
        panel = db.session.execute(sa.select(PanelResult.result)).scalar_one()
    assert pd.read_csv(tmp_path / "export" / "classifications.csv").empty  # ratings only
    res = _ec(str(tmp_path / "export"), "--out", str(tmp_path / "ec"), "--n-resamples", "20",
              "--n-sim", "20", "--no-figures")
    assert res.exit_code == 0, res.output
    cli = pd.read_csv(tmp_path / "ec" / "matrix_small-ratings.csv", index_col=0,
                      dtype={"observer": str})
    cli.columns = cli.columns.astype(str)
    assert cli.shape == (4, 4)
    report = build_report(read_export(tmp_path / "export"),
                          settings=ReportSettings(n_resamples=20, n_sim=20))
    section = next(s for s in report.sections if s.key == "kappa")
    assert section.missing is None and section.figures
    from_report = report.results.error_consistency.kappa.matrix("small-ratings")
    pd.testing.assert_frame_equal(from_report.loc[cli.index, cli.columns], cli,
                                  check_names=False, atol=1e-12)
    shown = panel["ec"]["matrices"]["small-ratings"]
    from_panel = pd.DataFrame(shown["kappa"], index=shown["observers"],
                              columns=shown["observers"]).astype(float)
    pd.testing.assert_frame_equal(from_panel.loc[cli.index, cli.columns], cli,
                                  check_names=False, atol=1e-12)

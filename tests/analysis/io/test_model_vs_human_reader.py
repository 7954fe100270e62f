"""Reading the model-vs-human raw-data CSVs (join key, ``na`` = wrong, groups, conditions)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from humanlike.analysis.data_paths import shared_data_dir
from humanlike.analysis.io import read_model_vs_human
from humanlike.analysis.io.model_vs_human import short_image_name

RAW = shared_data_dir() / "model-vs-human" / "raw-data"


@pytest.fixture(scope="module")
def edge() -> pd.DataFrame:
    return read_model_vs_human(RAW / "edge")


def test_folder_yields_every_observer_on_every_image_once(edge):
    assert edge["observer"].nunique() == 13
    assert edge.groupby("observer")["stimulus"].nunique().eq(160).all()
    assert len(edge) == 13 * 160
    assert set(edge["experiment"]) == {"edge"}


def test_humans_and_models_join_on_the_name_after_the_last_underscore(edge):
    human = edge[edge["observer"] == "subject-01"]
    row = human[human["imagename"] == "0001_edg_s01_0_oven_00_oven10.png"]
    assert row["stimulus"].iloc[0] == "oven10.png"
    model = set(edge.loc[edge["observer"] == "resnet50", "stimulus"])
    assert model == set(human["stimulus"])


def test_na_responses_count_as_wrong(edge):
    s09 = edge[edge["observer"] == "subject-09"]
    timeouts = s09[s09["response"] == "na"]
    assert len(timeouts) == 30  # the file has 30 timeouts
    assert not timeouts["correct"].any()


def test_groups_and_conditions_are_filled_for_models(edge):
    groups = edge.groupby("observer")["group"].first()
    assert (groups[[f"subject-{i:02d}" for i in range(1, 11)]] == "human").all()
    assert set(groups[["bagnet33", "resnet50", "simclr_resnet50x1"]]) == {"model"}
    assert edge["condition"].notna().all()
    assert set(edge["condition"]) == {"0"}


def test_accuracy_of_one_human_matches_a_direct_count_of_the_file():
    path = RAW / "silhouette" / "silhouette_subject-02_session_1.csv"
    raw = pd.read_csv(path, keep_default_na=False)
    frame = read_model_vs_human(path)
    assert frame["correct"].sum() == (raw["object_response"] == raw["category"]).sum()
    assert frame["rt_ms"].iloc[0] == pytest.approx(float(raw["rt"].iloc[0]) * 1000)


def test_whole_tree_reads_every_experiment():
    # the shared tree holds edge, silhouette, cue-conflict (13 observers each) and, since
    # 2026-11, the verbatim contrast files (7 observers x 1,280 trials; shared README manifest)
    frame = read_model_vs_human(RAW.parent)
    assert sorted(frame["experiment"].unique()) == ["contrast", "cue-conflict", "edge", "silhouette"]
    three = frame[frame["experiment"] != "contrast"]
    assert len(three) == 13 * (160 + 160 + 1280)
    assert (frame["experiment"] == "contrast").sum() == 7 * 1280


def test_a_file_without_the_model_vs_human_header_is_rejected(tmp_path: Path):
    bad = tmp_path / "edge_subject-01_session_1.csv"
    bad.write_text("subj,trial,response\nsubject-01,1,cat\n")
    with pytest.raises(ValueError, match="object_response"):
        read_model_vs_human(bad)


def test_missing_paths_and_empty_folders_are_reported(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        read_model_vs_human(tmp_path / "nope")
    with pytest.raises(ValueError, match="no .csv"):
        read_model_vs_human(tmp_path)


def test_published_contrast_files_reproduce_brain_scores_ceiling_and_resnet50_score():
    # the contrast files are published verbatim ('Session' header, ImageNet-based image names);
    # Brain-Score's geirhos2021 benchmark drops c100, c03 and c01 and reports a ceiling of 0.43703
    # and a resnet-50 score of 0.22546 (shared/data/model-vs-human/README.md)
    from humanlike.analysis.error_consistency import kappa_matrix

    frame = read_model_vs_human(shared_data_dir() / "model-vs-human" / "raw-data" / "contrast")
    assert frame["stimulus"].nunique() == 1280  # the synset prefix keeps the join key unique
    kept = frame[~frame["condition"].isin(["c100", "c03", "c01"])]
    result = kappa_matrix(kept, group="group", condition="condition", experiment="experiment")
    assert round(result.ceiling("contrast"), 5) == 0.43703
    summary = result.summary
    resnet = summary[(summary["level"] == "experiment") & (summary["model"] == "resnet50")]
    assert round(float(resnet["kappa"].iloc[0]), 5) == 0.22546


def test_short_image_name_keeps_the_synset_prefix_of_imagenet_names():
    names = pd.Series(["0001_edg_s01_0_oven_00_oven10.png",
                       "0001_cop_s01_c30_knife_10_n03041632_7380.png", "oven10.png"])
    assert short_image_name(names).tolist() == ["oven10.png", "n03041632_7380.png", "oven10.png"]


def test_a_folder_skips_non_trial_csvs_with_a_notice(tmp_path: Path):
    for f in (RAW / "edge").glob("*.csv"):
        (tmp_path / f.name).write_bytes(f.read_bytes())
    (tmp_path / "accuracies.csv").write_text("model,accuracy\nresnet50,0.9\n")
    notes: list[str] = []
    frame = read_model_vs_human(tmp_path, on_skip=notes.append)
    assert frame["observer"].nunique() == 13
    assert notes == [f"skipped {tmp_path / 'accuracies.csv'}: not a model-vs-human trial file "
                     "(header lacks subj,session,trial,rt,object_response,category,condition,imagename)"]


def test_an_unreadable_file_is_reported_by_name(tmp_path: Path):
    bad = tmp_path / "edge_subject-01_session_1.csv"
    bad.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(ValueError, match="edge_subject-01_session_1.csv"):
        read_model_vs_human(bad)

"""Reading the model-vs-human raw-data CSVs (join key, ``na`` = wrong, groups, conditions)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from humanlike.analysis.data_paths import shared_data_dir
from humanlike.analysis.io import read_model_vs_human

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


def test_whole_tree_reads_three_experiments():
    frame = read_model_vs_human(RAW.parent)
    assert sorted(frame["experiment"].unique()) == ["cue-conflict", "edge", "silhouette"]
    assert len(frame) == 13 * (160 + 160 + 1280)


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

"""The Psych-DS check against the official validator's own verdicts on its test datasets, each CSV
rule on the validator's own test files, and the dataset writer's parts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from humanlike.analysis.psychds import (
    datafile_name,
    dataset_description,
    keyword_value,
    validate_dataset,
    write_datafile,
)
from humanlike.analysis.psychds.dataset import variable_measured
from humanlike.analysis.psychds.disclosure import coarse_durations, coarsen_times, public_spec

EXAMPLES = Path(__file__).parent / "psychds_examples"
VALID = sorted(p.name for p in (EXAMPLES / "valid").iterdir())
INVALID = sorted(p.name for p in (EXAMPLES / "invalid").iterdir())


@pytest.mark.parametrize("name", VALID)
def test_the_official_validators_valid_examples_pass(name):
    result = validate_dataset(EXAMPLES / "valid" / name)
    assert result.valid, result.summary()


@pytest.mark.parametrize("name", INVALID)
def test_the_official_validators_invalid_examples_fail(name):
    assert not validate_dataset(EXAMPLES / "invalid" / name).valid


def test_an_empty_folder_and_a_bare_data_folder_fail(tmp_path):
    # the official examples empty_dataset and just_data are empty folders (git keeps none)
    assert {i.code for i in validate_dataset(tmp_path).errors} == {
        "MISSING_DATASET_DESCRIPTION", "MISSING_DATA_DIRECTORY"}
    (tmp_path / "data").mkdir()
    assert {i.code for i in validate_dataset(tmp_path).errors} == {
        "MISSING_DATASET_DESCRIPTION", "MISSING_DATAFILE"}


def _dataset(root: Path, columns: list[str]) -> Path:
    record = dataset_description(name="t", description="a test", license="CC0-1.0",
                                 variables=variable_measured(columns, {"a": "first"}))
    (root / "data").mkdir(parents=True)
    (root / "dataset_description.json").write_text(json.dumps(record))
    return root


def test_a_written_dataset_passes_with_every_column_described(tmp_path):
    root = _dataset(tmp_path, ["a", "b"])
    name = datafile_name("my-study", "trial_timing")
    assert name == "study-mystudy_description-trialtiming_data.csv"
    write_datafile(pd.DataFrame({"a": [1, 2], "b": ["x, y", "z"]}), root / "data" / name)
    result = validate_dataset(root)
    assert result.valid, result.summary()
    assert result.datafiles == [f"data/{name}"]
    meta = json.loads((root / "dataset_description.json").read_text())
    assert meta["@type"] == "Dataset" and meta["variableMeasured"][0] == {
        "@type": "PropertyValue", "name": "a", "description": "first"}


def test_a_column_variable_measured_does_not_name_is_an_error(tmp_path):
    root = _dataset(tmp_path, ["a"])
    write_datafile(pd.DataFrame({"a": [1], "b": [2]}), root / "data" / "study-x_data.csv")
    errors = validate_dataset(root).errors
    assert [(e.code, e.detail) for e in errors] == [
        ("CSV_COLUMN_MISSING_FROM_METADATA", "columns ['b']")]


def test_a_sidecar_replaces_variable_measured_wholesale(tmp_path):
    root = _dataset(tmp_path, ["a", "b"])
    write_datafile(pd.DataFrame({"a": [1], "b": [2]}), root / "data" / "study-x_data.csv")
    (root / "data" / "study-x_data.json").write_text(json.dumps({"variableMeasured": ["a"]}))
    assert [e.code for e in validate_dataset(root).errors] == ["CSV_COLUMN_MISSING_FROM_METADATA"]
    (root / "data" / "study-x_data.json").write_text(json.dumps({"variableMeasured": ["a", "b"]}))
    assert validate_dataset(root).valid


@pytest.mark.parametrize(("file", "code"), [
    ("duplicateHeaders.csv", "CSV_HEADER_REPEATED"),
    ("headerRowMismatch.csv", "CSV_HEADER_LENGTH_MISMATCH"),
    ("rowidValuesNotUnique.csv", "ROWID_VALUES_NOT_UNIQUE"),
    ("noHeader.csv", "FILE_EMPTY"),
])
def test_the_official_validators_bad_csv_files_raise_their_issue(tmp_path, file, code):
    root = _dataset(tmp_path, ["A", "B", "C", "One", "Two", "Four", "row_id"])
    shutil.copyfile(EXAMPLES / "testfiles" / file, root / "data" / "study-x_data.csv")
    assert code in {i.code for i in validate_dataset(root).issues}


def test_a_well_formed_csv_of_the_official_tests_passes(tmp_path):
    root = _dataset(tmp_path, ["A", "B", "C"])
    shutil.copyfile(EXAMPLES / "testfiles" / "csv.csv", root / "data" / "study-x_data.csv")
    assert validate_dataset(root).valid


@pytest.mark.parametrize("name", ["study-a_data.csv.csv", "_data.csv", "study_a_data.csv",
                                  "Study-a_data.csv", "study-a-b_data.csv", "wrong.csv"])
def test_a_data_file_not_named_by_keywords_is_an_error(tmp_path, name):
    root = _dataset(tmp_path, ["a"])
    write_datafile(pd.DataFrame({"a": [1]}), root / "data" / name)
    codes = [e.code for e in validate_dataset(root).errors]
    assert "FILENAME_KEYWORD_FORMATTING_ERROR" in codes or "MISSING_DATAFILE" in codes


def test_unofficial_keywords_only_warn(tmp_path):
    root = _dataset(tmp_path, ["a"])
    write_datafile(pd.DataFrame({"a": [1]}), root / "data" / "gender-female_data.csv")
    result = validate_dataset(root)
    assert result.valid
    assert "FILENAME_UNOFFICIAL_KEYWORD_WARNING" in {w.code for w in result.warnings}


def test_keyword_values_keep_letters_and_digits_only():
    assert keyword_value("demo_2026-b") == "demo2026b"
    with pytest.raises(ValueError, match="no letter or digit"):
        keyword_value("__")


def test_the_published_spec_holds_no_completion_code_or_secret():
    spec = {"slug": "s", "key_mapping": "fixed", "completion": {"prolific_code": "C1HL",
            "mturk_sandbox": True}, "recruitment": {"completion_codes": [{"code": "X"}],
                                                     "api_token": "t", "filter_id": "age"}}
    assert public_spec(spec) == {"slug": "s", "key_mapping": "fixed",
                                 "completion": {"mturk_sandbox": True}}


def test_the_published_spec_is_an_allow_list_and_its_urls_lose_their_query():
    token = "9185d436e5f94b1581b0918162e8"
    url = f"https://u.sona-systems.com/webstudy_credit.aspx?experiment_id=1&credit_token={token}"
    spec = {"slug": "s", "platform": {"preset": "sona", "completion": "redirect",
                                      "completion_url": url, "server_completion_url": url,
                                      "participant_param": "survey_code", "id_pattern": None},
            "blocks": [{"name": "b", "prompt": f"Help: {url}#top or https://ada:pw@lab.example:8443/"
                                              "faq?k=1."}],
            "categories": [{"label": "cat", "key": "c", "hint": "new field"}],
            "newly_added": {"plain": "no secret-like name, still not published"}}
    assert public_spec(spec) == {
        "slug": "s", "platform": {"preset": "sona", "completion": "redirect"},
        "blocks": [{"name": "b", "prompt": "Help: https://u.sona-systems.com/webstudy_credit.aspx "
                                           "or https://lab.example:8443/faq."}],
        "categories": [{"label": "cat", "key": "c"}]}
    assert public_spec({"platform": "prolific"}) == {"platform": "prolific"}


def test_times_are_published_as_days_by_default():
    people = pd.DataFrame({"participant": ["p1", "p2"],
                           "created_at": ["2026-03-01T23:59:58Z", "2026-03-02T00:00:01Z"],
                           "completed_at": ["2026-03-02T00:14:40Z", None],
                           "duration_s": [882.0, None], "seed": [12, 13]})
    trials = pd.DataFrame({"participant": ["p1", "p1", "p2"], "trial_index": [0, 1, 0],
                           "client_time": [1.7e12, 1.7e12 + 2500, None],
                           "server_time": ["2026-03-02T00:00:03.5Z", "2026-03-02T00:00:06Z",
                                           "2026-03-02T00:00:09Z"]})
    frames, notes = coarsen_times({"participants": people, "trials": trials}, "day")
    assert frames["participants"]["created_at"].tolist() == ["2026-03-01", "2026-03-02"]
    assert frames["participants"]["completed_at"].tolist()[0] == "2026-03-02"
    assert pd.isna(frames["participants"]["completed_at"].tolist()[1])
    assert frames["participants"]["duration_s"].tolist()[0] == 900.0  # 14.7 min -> 15 min
    assert frames["participants"]["seed"].tolist() == [12, 13]
    assert frames["trials"]["server_time"].tolist() == ["2026-03-02"] * 3
    assert frames["trials"]["client_time"].tolist()[:2] == ["2023-11-14"] * 2
    assert set(notes) == {"created_at", "completed_at", "duration_s", "client_time", "server_time"}
    assert people["created_at"][0] == "2026-03-01T23:59:58Z"  # the input is left as it was
    frames, notes = coarsen_times({"participants": people, "trials": trials}, "offsets")
    assert frames["participants"]["created_at"].tolist() == [0.0, 0.0]
    assert frames["participants"]["completed_at"].tolist()[0] == 882.0
    assert frames["trials"]["server_time"].tolist() == [5.5, 8.0, 8.0]
    assert frames["trials"]["client_time"].tolist()[:2] == [0.0, 2.5]
    assert frames["participants"]["duration_s"].tolist()[0] == 882.0
    frames, _ = coarsen_times({"log": trials.drop(columns="participant")}, "offsets")
    assert frames["log"]["server_time"].tolist() == ["2026-03-02"] * 3  # no origin: the day
    frames, notes = coarsen_times({"trials": trials}, "exact")
    assert frames["trials"] is trials and notes == {}
    with pytest.raises(ValueError, match="day, offsets, exact"):
        coarsen_times({"trials": trials}, "hour")


def test_coarse_durations_keep_each_completion_rule_verdict():
    seconds = pd.Series([305.0, 290.0, 1185.0, 1230.0, 600.0, 325.0, float("nan")])
    assert coarse_durations(seconds, None).tolist()[:6] == [300, 300, 1200, 1200, 600, 300]
    # min 300: 290 fails it, so it stays below (240); max 1200: 1230 fails it, so above (1260)
    rules = {"min_completion_s": 300, "max_completion_s": 1200}
    assert coarse_durations(seconds, rules).tolist()[:6] == [300, 240, 1200, 1260, 600, 300]
    # min 320: 325 passes it, so it stays on it (320); max 1190: 1185 passes it (1190)
    rules = {"min_completion_s": 320, "max_completion_s": 1190}
    coarse = coarse_durations(seconds, rules)
    assert coarse.tolist()[:6] == [300, 300, 1190, 1200, 600, 320]
    assert pd.isna(coarse.tolist()[6])

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
from humanlike.analysis.psychds.publish import public_spec

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
                                 "completion": {"mturk_sandbox": True},
                                 "recruitment": {"filter_id": "age"}}

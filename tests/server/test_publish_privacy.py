"""`humanlike publish` on a SONA study, on SQLite and PostgreSQL (issue 45, items 3 and 17): no file
of the dataset holds SONA's credit token (the spec is published by an allow-list, URLs without their
query), and no published time is finer than the day by default, so a row cannot be linked back to
the platform's submission list by its arrival second."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from click.testing import CliRunner

from humanlike.cli import main
from tests.server.conftest import enter
from tests.server.sources import answer, app_factory, spec_with

CREDIT_TOKEN = "9185d436e5f94b1581b0918162e8"
SONA = ("https://yourschool.sona-systems.com/{page}?experiment_id=123&credit_token="
        + CREDIT_TOKEN + "&survey_code={{participant_id}}")
SONA_TABLE = ('[platform]\npreset = "sona"\n'
              f'completion_url = "{SONA.format(page="webstudy_credit.aspx")}"\n'
              f'server_completion_url = "{SONA.format(page="services/SonaAPI.svc/WebstudyCredit")}"\n')
ISO_TIME = re.compile(rb"\d{4}-\d\d-\d\d[T ]\d\d:\d\d")


@pytest.fixture
def published(database_url, small_experiment, tmp_path, monkeypatch):
    """Two SONA participants who stored every trial, exported and published with the defaults."""
    spec = spec_with(small_experiment, tmp_path / "sona", SONA_TABLE)
    with app_factory(database_url, tmp_path, monkeypatch) as make:
        client = make(spec).test_client()
        for code in ("40001", "40002"):
            pid, token = enter(client, f"survey_code={code}")
            answer(client, pid, token)
        runner = CliRunner()
        db = ["--database-url", database_url]
        result = runner.invoke(main, ["export", "small", "--out", str(tmp_path / "export"), *db])
        assert result.exit_code == 0, result.output
        result = runner.invoke(main, ["publish", "small", "--out", str(tmp_path / "dataset"),
                                      "--license", "CC0-1.0", *db])
        assert result.exit_code == 0, result.output
    return tmp_path / "export", tmp_path / "dataset"


def _files(folder):
    return [p for p in folder.rglob("*") if p.is_file()]


def test_the_published_spec_holds_no_credit_token_nor_the_completion_urls(published):
    _, out = published
    for path in _files(out):
        content = path.read_bytes()
        assert CREDIT_TOKEN.encode() not in content, path
        assert b"credit_token" not in content and b"sona-systems.com" not in content, path
    (spec_file,) = out.glob("documentation/spec-*/spec.json")
    spec = json.loads(spec_file.read_text())
    assert spec["platform"]["preset"] == "sona"
    assert not {"completion_url", "server_completion_url", "completion_code"} & set(spec["platform"])
    assert spec["slug"] == "small" and [c["label"] for c in spec["categories"]] == [
        str(d) for d in range(10)]
    assert spec["exclusion"]["min_catch_accuracy"] == 0.5


def test_published_times_are_days_and_no_arrival_second_is_in_any_file(published):
    export, out = published
    people = pd.read_csv(export / "participants.csv", dtype=str)
    trials = pd.read_csv(export / "trials.csv", dtype=str)
    assert len(people) == 2 and people["created_at"].str.match(r"\d{4}-\d\d-\d\dT").all()
    seconds = {t[:19] for t in [*people["created_at"], *people["started_at"],
                                *trials["server_time"]]}
    for path in _files(out):
        content = path.read_bytes()
        assert not ISO_TIME.search(content), (path, ISO_TIME.search(content))
        assert not [s for s in seconds if s.encode() in content], path
    published = pd.read_csv(out / "data" / "study-small_description-participants_data.csv",
                            dtype=str)
    assert sorted(published["created_at"]) == sorted(people["created_at"].str[:10])
    assert published["completed_at"].isna().all()  # stored every trial, never completed
    rows = pd.read_csv(out / "data" / "study-small_description-trials_data.csv", dtype=str)
    assert set(rows["server_time"]) == set(trials["server_time"].str[:10])
    assert set(rows["client_time"]) == {"2023-11-14"}  # the helper's 1.7e12 ms, as a day
    described = {v["name"]: v.get("description", "") for v in json.loads(
        (out / "dataset_description.json").read_text())["variableMeasured"]}
    assert "UTC date" in described["server_time"] and "UTC date" in described["created_at"]


def test_every_spec_field_is_either_published_or_withheld_by_name():
    """A field added to the spec is published only once someone lists it (and what it may hold)."""
    from humanlike.analysis.psychds.disclosure import PUBLISHED_SPEC, WITHHELD_SPEC
    from humanlike.server.study.spec import Completion, ExperimentSpec, PlatformSettings

    for prefix, model in (("", ExperimentSpec), ("platform.", PlatformSettings),
                          ("completion.", Completion)):
        allowed = PUBLISHED_SPEC if not prefix else PUBLISHED_SPEC[prefix[:-1]]
        fields = {prefix + name for name in model.model_fields}
        published = {prefix + name for name in allowed}
        assert fields == (published | WITHHELD_SPEC) & fields, fields - published - WITHHELD_SPEC
        assert not published & WITHHELD_SPEC and published <= fields


def test_times_as_offsets_start_at_each_participants_arrival(published, database_url, tmp_path):
    export, _ = published
    out = tmp_path / "offsets"
    result = CliRunner().invoke(main, ["publish", "small", "--out", str(out), "--license",
                                       "CC0-1.0", "--times", "offsets",
                                       "--database-url", database_url])
    assert result.exit_code == 0, result.output
    people = pd.read_csv(out / "data" / "study-small_description-participants_data.csv")
    assert people["created_at"].tolist() == [0.0, 0.0]
    trials = pd.read_csv(out / "data" / "study-small_description-trials_data.csv")
    assert trials["client_time"].eq(0.0).all()  # the helper sends one browser time, 1.7e12 ms
    exported = pd.read_csv(export / "trials.csv", dtype={"participant": str})
    arrival = pd.read_csv(export / "participants.csv", dtype={"participant": str}).set_index(
        "participant")["created_at"]
    expected = (pd.to_datetime(exported["server_time"], format="ISO8601")
                - pd.to_datetime(exported["participant"].map(arrival), format="ISO8601"))
    assert trials["server_time"].tolist() == expected.dt.total_seconds().round(3).tolist()
    assert (trials["server_time"] >= 0).all()
    assert not ISO_TIME.search((out / "data" / "study-small_description-trials_data.csv")
                               .read_bytes())

"""The benchmark definition: written and read back; a broken one is refused naming the file and the
field."""

from __future__ import annotations

import json

import pytest

from humanlike.analysis.benchmark import DEFINITION, read_package, write_definition
from humanlike.analysis.report import ReportSettings


@pytest.fixture
def package(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "study-s_description-ratings_data.csv").write_text("participant\n1\n")
    write_definition(tmp_path, study="s",
                     tables={"ratings": "data/study-s_description-ratings_data.csv"},
                     settings=ReportSettings(n_resamples=123, seed=7),
                     rules={"min_trial_rt_ms": 100}, manifest="materials/stimuli/manifest.csv",
                     categories=["a", "b"])
    return tmp_path


def _edit(root, **changes):
    path = root / DEFINITION
    record = json.loads(path.read_text())
    record.update(changes)
    path.write_text(json.dumps(record))


def test_the_definition_reads_back_with_the_reports_settings_and_rules(package):
    read = read_package(package)
    assert read.settings == ReportSettings(n_resamples=123, seed=7)
    assert read.rules == {"min_trial_rt_ms": 100}
    assert read.export.has("ratings") and not read.export.has("triads")
    assert read.manifest == package / "materials" / "stimuli" / "manifest.csv"
    assert read.definition["metric"]["name"] == "pearson_r"


def test_a_folder_without_a_definition_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no analysis/benchmark.json"):
        read_package(tmp_path)


@pytest.mark.parametrize(("changes", "message"), [
    ({"format": "brainscore/2"}, "field 'format'"),
    ({"tables": {"ratings": "data/missing_data.csv"}}, "field 'tables.ratings'"),
    ({"settings": {"n_resamples": 10, "n_boot": 3}}, "field 'settings' has unknown keys"),
    ({"stimuli": "manifest.csv"}, "field 'stimuli'"),
])
def test_a_broken_definition_is_refused_naming_the_field(package, changes, message):
    _edit(package, **changes)
    with pytest.raises(ValueError, match=message) as error:
        read_package(package)
    assert DEFINITION in str(error.value)


def test_a_definition_that_is_not_json_is_refused(package):
    (package / DEFINITION).write_text("{")
    with pytest.raises(ValueError, match="not JSON"):
        read_package(package)


def test_the_definition_holds_every_alignment_metric_the_scorer_reports(package):
    from humanlike.analysis.alignment import METRICS
    from humanlike.analysis.report.alignment import CONDITIONAL

    alignment = read_package(package).definition["alignment"]
    assert set(alignment["metrics"]) == set(METRICS) - set(CONDITIONAL)
    assert "Holm" in alignment["comparisons"] and "Spearman" in alignment["agreement"]

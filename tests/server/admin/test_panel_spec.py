"""The spec's [panel] and [stopping] tables: validated with the field named, and absent tables leave
a spec's hash as it was before they existed."""

from __future__ import annotations

import hashlib
import json

import pytest

from humanlike.server.study.spec import ExperimentSpec, SpecError, load_spec


def write(folder, extra: str):
    from tests.server.conftest import write_small_experiment

    path = write_small_experiment(folder)
    path.write_text(path.read_text() + extra)
    return path


def test_a_stopping_target_is_read_and_stored(tmp_path):
    spec = load_spec(write(tmp_path / "a", '\n[stopping]\nmeasure = "noise_ceiling_halfwidth"\n'
                                          'threshold = 0.02\n\n[panel]\nn_resamples = 500\n'))
    assert spec.stopping is not None and spec.stopping.threshold == 0.02
    assert spec.model_dump(mode="json")["stopping"]["measure"] == "noise_ceiling_halfwidth"
    assert spec.panel is not None and spec.panel.n_resamples == 500


@pytest.mark.parametrize(("extra", "field"), [
    ('[stopping]\nmeasure = "noise_ceiling_halfwidth"\n', "stopping"),  # no threshold
    ('[stopping]\nmeasure = "vibes"\nthreshold = 0.1\n', "stopping.measure"),
    ('[stopping]\nmeasure = "comparisons_decided"\nalpha = 0.9\n', "stopping.alpha"),
    ('[stopping]\nmeasure = "comparisons_decided"\nmonitoring = "daily"\n', "stopping.monitoring"),
    ('[stopping]\nmeasure = "comparisons_decided"\nmonitoring = "fixed_n"\n', "stopping"),
    ('[stopping]\nmeasure = "comparisons_decided"\nmonitoring = "group_sequential"\n'
     'looks = [80, 40]\n', "stopping"),
    ('[stopping]\nmeasure = "comparisons_decided"\ntest = "z"\n', "stopping.test"),
    ('[stopping]\nmeasure = "comparisons_decided"\nmonitoring = "fixed_n"\nlooks = [40]\n'
     'test = "safe_t"\n', "stopping"),
    ('[panel]\nn_resamples = 5\n', "panel.n_resamples"),
    ('[panel]\nmodels = ["a.csv"]\n', "panel.models"),
])
def test_bad_dashboard_tables_name_the_field(tmp_path, extra, field):
    with pytest.raises(SpecError) as error:
        load_spec(write(tmp_path / "b", "\n" + extra))
    assert f": {field}" in str(error.value) and "experiment.toml" in str(error.value)


def test_a_declared_monitoring_scheme_is_read_and_the_default_keeps_older_hashes(tmp_path):
    old = load_spec(write(tmp_path / "d", '\n[stopping]\nmeasure = "comparisons_decided"\n'))
    said = load_spec(write(tmp_path / "e", '\n[stopping]\nmeasure = "comparisons_decided"\n'
                                            'monitoring = "continuous"\n'))
    looks = load_spec(write(tmp_path / "f", '\n[stopping]\nmeasure = "comparisons_decided"\n'
                                             'monitoring = "group_sequential"\nlooks = [40, 80]\n'))
    assert old.stopping is not None and old.stopping.monitoring == "continuous"
    assert said.spec_hash() == old.spec_hash() != looks.spec_hash()
    assert "monitoring" not in old.model_dump(mode="json")["stopping"]
    assert looks.stopping is not None and looks.stopping.looks == [40, 80]
    betting = load_spec(write(tmp_path / "g", '\n[stopping]\nmeasure = "comparisons_decided"\n'
                                               'test = "betting_mixture"\n'))
    agrapa = load_spec(write(tmp_path / "i", '\n[stopping]\nmeasure = "comparisons_decided"\n'
                                              'test = "betting"\n'))
    safe = load_spec(write(tmp_path / "h", '\n[stopping]\nmeasure = "comparisons_decided"\n'
                                            'test = "safe_t"\n'))
    assert betting.spec_hash() == old.spec_hash() != safe.spec_hash()
    assert agrapa.spec_hash() not in (old.spec_hash(), safe.spec_hash())
    assert old.stopping.test == "betting_mixture"
    assert safe.stopping is not None and safe.stopping.test == "safe_t"


def test_specs_without_the_tables_keep_their_hash(tmp_path):
    spec = load_spec(write(tmp_path / "c", ""))
    dumped = ExperimentSpec.model_dump(spec, mode="json")
    assert "stopping" not in dumped and "panel" not in dumped
    plain = json.dumps(dumped, sort_keys=True, separators=(",", ":"))
    assert spec.spec_hash() == hashlib.sha256(plain.encode()).hexdigest()

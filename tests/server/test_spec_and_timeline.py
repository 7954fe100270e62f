"""Specs fail with the file and field named; timelines are reproducible from their seed."""

from __future__ import annotations

from collections import Counter

import pytest

from humanlike.server.config import ConfigError
from humanlike.server.experiments import load_experiment
from humanlike.server.spec import SpecError, load_spec
from humanlike.server.timeline import generate_timeline


def _rewrite(src, dest, old, new):
    text = src.read_text()
    assert old in text
    dest.write_text(text.replace(old, new))
    return dest


@pytest.mark.parametrize("old,new,field", [
    ('trial_type = "rating"', 'trial_type = "ratings"', "blocks.0.trial_type"),
    ('repeats = 2', 'repeats = -2', "blocks.0.repeats"),
    ('mode = "until_response"', 'mode = "duration"', "presentation"),
    ('prolific_code = "CODE1234"', 'prolific_code = "no spaces allowed"', "completion.prolific_code"),
    ('kinds = ["natural"]', 'kinds = ["natural"]\nshufle = true', "blocks.0.shufle"),
    ('key = "3"', 'key = "4"', "categories"),
])
def test_a_wrong_spec_names_the_file_and_the_field(small_experiment, tmp_path, old, new, field):
    bad = _rewrite(small_experiment, small_experiment.parent / f"bad_{tmp_path.name}.toml", old, new)
    try:
        with pytest.raises(SpecError) as info:
            load_spec(bad)
        assert str(bad) in str(info.value) and field in str(info.value), str(info.value)
    finally:
        bad.unlink()


def test_missing_files_and_bad_manifests_are_named(small_experiment, tmp_path):
    bad = _rewrite(small_experiment, small_experiment.parent / "bad_manifest.toml",
                   'manifest = "stimuli/manifest.csv"', 'manifest = "stimuli/nope.csv"')
    try:
        with pytest.raises(SpecError, match="manifest: file not found: stimuli/nope.csv"):
            load_spec(bad)
    finally:
        bad.unlink()
    manifest = small_experiment.parent / "stimuli" / "manifest.csv"
    original = manifest.read_text()
    try:
        manifest.write_text(original.replace("natural,", "naturel,", 1))
        with pytest.raises(SpecError, match=r"manifest.csv: row 2: column 'kind' is 'naturel'"):
            load_experiment(small_experiment)
    finally:
        manifest.write_text(original)


def test_the_timeline_is_a_function_of_the_seed(small_experiment):
    loaded = load_experiment(small_experiment)
    a = generate_timeline(loaded.spec, list(loaded.stimuli), "A", seed=42)
    b = generate_timeline(loaded.spec, list(loaded.stimuli), "A", seed=42)
    c = generate_timeline(loaded.spec, list(loaded.stimuli), "A", seed=43)
    assert a == b
    assert [t.get("stimulus") for t in a["trials"]] != [t.get("stimulus") for t in c["trials"]]


def test_the_timeline_has_practice_catch_repeats_and_debrief_in_order(small_experiment):
    loaded = load_experiment(small_experiment)
    tl = generate_timeline(loaded.spec, list(loaded.stimuli), "A", seed=7)
    trials = tl["trials"]
    assert [t["index"] for t in trials] == list(range(len(trials)))
    kinds = Counter(t["kind"] for t in trials if not t["practice"] and not t.get("is_repeat")
                    and t["type"] == "rating")
    assert kinds == {"natural": 10, "catch": 2}
    assert trials[0]["practice"] and not trials[1]["practice"]
    repeats = [t for t in trials if t["is_repeat"]]
    assert len(repeats) == 2
    for r in repeats:
        original = trials[r["repeat_of"]]
        assert original["stimulus"] == r["stimulus"] and not original["is_repeat"]
        assert original["kind"] == "natural" and r["index"] > original["index"]
    assert trials[-1]["type"] == "debrief"
    assert all(t["index"] > max(o["index"] for o in trials if not o["is_repeat"] and o["type"] != "debrief")
               for t in repeats)


def test_shuffled_key_mapping_is_drawn_per_participant(small_experiment, tmp_path):
    spec_path = _rewrite(small_experiment, small_experiment.parent / "shuffled.toml",
                         'manifest = "stimuli/manifest.csv"',
                         'manifest = "stimuli/manifest.csv"\nkey_mapping = "shuffled"')
    try:
        loaded = load_experiment(spec_path)
        maps = {tuple(c["key"] for c in generate_timeline(loaded.spec, list(loaded.stimuli), "A", s)["categories"])
                for s in range(5)}
        assert len(maps) > 1 and all(sorted(m) == [str(d) for d in range(10)] for m in maps)
    finally:
        spec_path.unlink()


def test_production_refuses_to_start_without_a_secret_key(monkeypatch, tmp_path):
    from humanlike.server import create_app

    monkeypatch.setenv("HUMANLIKE_ENV", "production")
    monkeypatch.delenv("SECRET_KEY", raising=False)
    monkeypatch.setenv("HUMANLIKE_INSTANCE", str(tmp_path))
    with pytest.raises(ConfigError, match="SECRET_KEY"):
        create_app()
    monkeypatch.setenv("SECRET_KEY", "s" * 40)
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.sqlite"})
    assert app.config["SESSION_COOKIE_SECURE"] is True

"""Specs fail with the file and field named; timelines are reproducible from their seed."""

from __future__ import annotations

from collections import Counter

import pytest

from humanlike.server.config import ConfigError
from humanlike.server.study.experiments import load_experiment
from humanlike.server.study.spec import SpecError, load_spec
from humanlike.server.study.timeline import generate_timeline


def _rewrite(src, dest, old, new):
    text = src.read_text()
    assert old in text
    dest.write_text(text.replace(old, new))
    return dest


@pytest.mark.parametrize("old,new,field", [
    ('trial_type = "rating"', 'trial_type = "ratings"', "blocks.0 (ratings).trial_type"),
    ('repeats = 2', 'repeats = -2', "blocks.0 (ratings).repeats"),
    ('mode = "until_response"', 'mode = "duration"', "presentation"),
    ('prolific_code = "CODE1234"', 'prolific_code = "no spaces allowed"', "completion.prolific_code"),
    ('kinds = ["natural"]', 'kinds = ["natural"]\nshufle = true', "blocks.0 (ratings).shufle"),
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


DEMO_PART_TYPES = {"Rating digits.": "rating", "Comparing three images.": "triad",
                   "Naming a flashed digit.": "classification", "Last part.": "repeats"}
"""The demo instructions' part headings and what each describes."""


@pytest.mark.parametrize("mlds,classification", [(True, True), (False, True), (True, False)])
def test_the_demo_texts_agree_with_its_timeline(tmp_path, mlds, classification):
    """Each claim of the demo's consent and instructions checked against the built demo's
    timeline and the browser code that shows it: no duration but the server's own estimate, the
    parts in the timeline's order, practice where there is practice, the buttons' labels, the
    rating levels, the keys, the debrief questions."""
    import re
    from pathlib import Path

    from humanlike.server.demo.build import build_demo

    root = Path(__file__).resolve().parents[2]
    js = {name: (root / "static" / "js" / name).read_text()
          for name in ("consent.js", "screens.js", "plugins/rating.js")}
    spec_path = build_demo(tmp_path / "demo", controversial=False, mlds=mlds,
                           classification=classification)
    consent = " ".join((spec_path.parent / "consent.md").read_text().split())  # lines unwrapped
    instructions = (spec_path.parent / "instructions.md").read_text()
    flat = " ".join(instructions.split())
    loaded = load_experiment(spec_path)
    spec = loaded.spec

    # duration: the texts name none; the consent page shows the server's estimate below the text
    assert not re.search(r"minute|hour", consent + instructions, flags=re.I)
    assert "How long it takes is shown below this text." in consent
    shown = js["consent.js"]
    assert shown.index("tl.consent_html") < shown.index(
        '_("This study takes about %(minutes)s minutes.", { minutes: tl.estimated_minutes })')

    # the parts, in order: the timeline's blocks by first trial, then the repeats, then the debrief
    headings = re.findall(r"^\d+\. \*\*(.+?)\*\*", instructions, flags=re.M)
    claimed = [DEMO_PART_TYPES[h] for h in headings]
    body = dict(re.findall(r"^\d+\. \*\*(.+?)\*\*(.*?)(?=^\d+\. |\Z)", instructions, flags=re.M | re.S))
    practice_blocks = {b.trial_type for b in spec.blocks if b.practice}
    for seed in range(3):
        trials = generate_timeline(spec, loaded.stimuli, "A", seed)["trials"]
        task = [t for t in trials if t["type"] != "debrief"]
        order = list(dict.fromkeys(t["type"] for t in task if not t["is_repeat"]))
        first_repeat = min(t["index"] for t in task if t["is_repeat"])
        assert all(t["is_repeat"] for t in task if t["index"] >= first_repeat)
        assert claimed == [*order, "repeats"]
        assert trials[-1]["type"] == "debrief" and trials[first_repeat - 1]["type"] == order[-1]
        assert {t["type"] for t in task if t["is_repeat"]} <= {"rating", "triad"}  # already seen
        assert {t["type"] for t in task if t["practice"]} == practice_blocks
    # as the participant reads it: one numbered item per part, the rating keys nested in the first
    import xml.etree.ElementTree as ET

    rendered = loaded.markdown_html("instructions")
    items = ET.fromstring(rendered[rendered.index("<ol>"):rendered.index("</ol>") + 5]).findall("li")
    assert [li.find("strong").text for li in items] == headings
    assert len(items[0].findall("ul/li")) == 2
    for heading, text in body.items():
        kind = DEMO_PART_TYPES[heading]
        assert ("practice" in text) == (kind in practice_blocks), heading

    # buttons: "I agree" on the consent page, "Start" on the instructions and each part's screen,
    # "Submit" on a rating trial (the plugin's default label: the spec sets none)
    assert "By pressing *I agree*" in consent and '{ id: "consent-agree", type: "button" }, _("I agree")' in shown
    assert "press *Start* there" in flat
    assert js["screens.js"].count('_("Start"), "intro")') == 2  # "Next part" and "Last part"
    assert re.search(r'tl\.instructions_html \+ "</div>",\s*_\("Start"\), "instructions"', shown)
    label = re.search(r'button_label: \{[^}]*default: _\("([^"]+)"\)', js["plugins/rating.js"]).group(1)
    assert f"then *{label}*" in flat and f"**Enter** to {label.lower()}" in flat
    assert f"<kbd>Enter</kbd> to {label.lower()}; or click" in js["screens.js"]  # the part screen
    assert not any(b.model_dump().get("button_label") for b in spec.blocks)

    # what a rating trial shows: the plugin's default levels, one row per category
    levels = re.search(r"levels: \{[^}]*default: \[([\d, ]+)\]", js["plugins/rating.js"]).group(1)
    said = re.search(r"rate how present it is: ([\d, or]+)%", flat).group(1)
    assert re.split(r", | or ", said) == levels.split(", ")
    assert "ten rows, one per digit" in flat and len(spec.categories) == 10
    if mlds:  # the triad keys the part screen lists
        assert "Press **F** (left) or **J** (right)" in flat
        assert "<kbd>F</kbd> or <kbd>&larr;</kbd> for the left image, <kbd>J</kbd>" in js["screens.js"]
    if classification:
        block = next(b for b in spec.blocks if b.trial_type == "classification")
        assert "covered by noise" in flat and block.classification.mask == "noise"
        assert "After a cross" in flat and block.classification.fixation_ms > 0
    assert "two short questions" in flat and len(spec.debrief) == 2

"""The participant pages' message catalogues (issue 41 item 4): Babel's extractors find every
fixed string of the participant templates, browser scripts and server messages; every shipped
catalogue holds them all (German and Spanish translate every one, keeping placeholders and
markup); the spec's ``language`` names a shipped catalogue; ``humanlike check`` names what a
catalogue misses."""

from __future__ import annotations

import re
import shutil

import pytest
from click.testing import CliRunner

from humanlike.cli import main
from humanlike.server.study import languages
from humanlike.server.study.spec import SpecError, load_spec


def _ids(catalogue) -> set[str]:
    """The msgids of a catalogue (a plural entry by its singular)."""
    return {m.id if isinstance(m.id, str) else m.id[0] for m in catalogue if m.id}


def _translated(message) -> bool:
    return all(message.string) if isinstance(message.string, tuple) else bool(message.string)


def test_the_extractors_find_the_strings_of_templates_scripts_and_server_messages():
    where = {m.id: {loc[0] for loc in m.locations} for m in languages.template() if m.id}
    assert "static/js/consent.js" in where["I agree"]
    assert "templates/task.html" in where["Withdraw and delete my data"]
    assert "static/js/plugins/debrief.js" in where["Withdraw and delete my data"]
    assert "server/web/participant.py" in where["Study not found"]
    assert "server/participants/resume_policy.py" in where["This study cannot be continued"]
    # a string the scripts build from pieces is one msgid, placeholders in gettext's Python format
    assert "You have done %(done)s of %(total)s trials. Rest your eyes for a moment, and continue " \
           "when you are ready." in where
    files = {f for locations in where.values() for f in locations}
    assert not any(f.startswith("templates/admin/") or f == "static/js/admin_table.js" for f in files)
    assert set(languages.js_msgids()) <= set(where) and "I agree" in languages.js_msgids()
    assert "Study not found" not in languages.js_msgids()  # server-side only: not sent to the page


@pytest.mark.parametrize("language", languages.shipped()[1:])
def test_every_catalogue_holds_exactly_the_msgids_the_pages_use(language):
    """A string added to a page without `python -m humanlike.server.study.languages` fails here."""
    pot = _ids(languages.template())
    held = _ids(languages.catalogue(language))
    assert sorted(pot - held) == [], f"translations/{language}: msgids missing from the catalogue"
    assert sorted(held - pot) == [], f"translations/{language}: msgids no page uses"


@pytest.mark.parametrize("language", ["de", "es"])
def test_german_and_spanish_translate_every_string(language):
    assert languages.missing(language) == []


@pytest.mark.parametrize("language", languages.shipped()[1:])
def test_translations_keep_every_placeholder_and_tag(language):
    catalogue = languages.catalogue(language)
    assert [(m.id, [str(e) for e in errors]) for m, errors in catalogue.check()] == []
    for message in catalogue:
        if not message.id:
            continue
        msgid = message.id if isinstance(message.id, str) else message.id[-1]
        forms = message.string if isinstance(message.string, tuple) else (message.string,)
        for text in (f for f in forms if f):
            for pattern in (r"%\(\w+\)[sd]", r"</?\w+>"):
                assert sorted(re.findall(pattern, msgid)) == sorted(re.findall(pattern, text)), (
                    language, msgid)


def test_the_sample_catalogue_misses_strings_and_english_misses_none():
    assert languages.missing("en") == []
    missing = languages.missing("ar")
    assert "I agree" not in missing and "Take a break" not in missing  # the sample's few
    assert "Study not found" in missing
    assert len(missing) == len(_ids(languages.template())) - len(
        [m for m in languages.catalogue("ar") if m.id and _translated(m)])


def test_compiled_catalogues_translate_with_their_placeholders():
    de = languages.translations("de")
    assert de.gettext("I agree") == "Ich stimme zu"
    assert de.gettext("Part %(part)s of %(parts)s") % {"part": 2, "parts": 3} == "Teil 2 von 3"
    assert languages.translations("es").gettext("Continue") == "Continuar"
    plural = next(m.id for m in languages.template() if isinstance(m.id, tuple))  # the rate limit's
    assert "%(num)d Sekunde erneut" in de.ngettext(*plural, 1)
    assert "%(num)d Sekunden erneut" in de.ngettext(*plural, 30)


@pytest.mark.parametrize(("language", "direction"), [("ar", "rtl"), ("he", "rtl"), ("fa", "rtl"),
                                                     ("de", "ltr"), ("en", "ltr")])
def test_the_direction_of_a_script_comes_from_cldr(language, direction):
    assert languages.direction(language) == direction


def test_the_spec_names_a_shipped_language_and_english_keeps_the_hash(small_experiment, tmp_path):
    folder = tmp_path / "exp"
    shutil.copytree(small_experiment.parent, folder)
    spec_path = folder / "experiment.toml"
    english = load_spec(spec_path)
    assert english.language == "en" and "language" not in english.model_dump()
    text = spec_path.read_text()
    spec_path.write_text('language = "en"\n' + text)
    assert load_spec(spec_path).spec_hash() == english.spec_hash()
    spec_path.write_text('language = "de"\n' + text)
    german = load_spec(spec_path)
    assert german.language == "de" and german.spec_hash() != english.spec_hash()
    spec_path.write_text('language = "tlh"\n' + text)
    with pytest.raises(SpecError, match=r"language.*no catalogue for language 'tlh'; shipped: "
                                        r"en, ar, de, es"):
        load_spec(spec_path)


def test_check_reports_a_missing_translation(small_experiment, tmp_path):
    folder = tmp_path / "exp"
    shutil.copytree(small_experiment.parent, folder)
    spec_path = folder / "experiment.toml"
    text = spec_path.read_text()
    spec_path.write_text('language = "de"\n' + text)
    result = CliRunner().invoke(main, ["check", str(folder)])
    assert result.exit_code == 0, result.output
    spec_path.write_text('language = "ar"\n' + text)
    result = CliRunner().invoke(main, ["check", str(folder)])
    assert result.exit_code == 1
    n = len(languages.missing("ar"))
    po = languages.CATALOGUES / "ar" / "LC_MESSAGES" / "messages.po"
    assert result.output.startswith(
        f"{spec_path}: language: the 'ar' catalogue ({po}) misses {n} translation(s) the "
        f"participant pages use: 'Thank you'; ")
    assert result.output.rstrip().endswith(f"and {n - 5} more")

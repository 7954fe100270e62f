"""The lab page tells the experimenter the id format in words with an example, not as a regular
expression (issue 36, item 7)."""

from __future__ import annotations

import html
import re

import pytest

from humanlike.server.platforms import ID_PATTERN
from humanlike.server.web.lab import IdFormat, describe_id_pattern
from tests.server.sources import app_factory, spec_with


@pytest.mark.parametrize(("pattern", "words", "example"), [
    ("P[0-9]{2}", '"P", then 2 digits', "P01"),
    ("[A-Za-z0-9_-]{1,64}", "letters, digits, _ and -, up to 64 characters", "Ab0"),
    ("[A-Za-z0-9]{6,24}", "letters and digits, 6 to 24 characters", "Ab01Ab"),
    (r"[a-z]+-\d{3}", 'one or more small letters, then "-", then 3 digits', "aba-010"),
    ("[A-Z]{2}[0-9]{3,5}", "2 capital letters, then 3 to 5 digits", "AB010"),
    ("P0[1-9]", '"P0", then one of 1 to 9', "P01"),
])
def test_an_id_pattern_reads_as_words_with_an_example_that_matches_it(pattern, words, example):
    assert describe_id_pattern(pattern) == IdFormat(words, example)
    assert re.fullmatch(pattern, example)


def test_the_lab_leaves_the_session_separator_out_of_the_default_format():
    described = describe_id_pattern(ID_PATTERN.pattern, forbidden=":")
    assert described == IdFormat("letters, digits, _, . and -, up to 128 characters", "Ab0")


def test_a_pattern_beyond_classes_and_repeats_is_quoted_without_an_example():
    assert describe_id_pattern("(?!x)[a-z]+") == IdFormat("the study's id pattern (?!x)[a-z]+",
                                                          None)
    assert describe_id_pattern("ab|cd").example is None


def test_the_lab_page_and_its_error_say_the_format_in_words(database_url, small_experiment,
                                                            tmp_path, monkeypatch):
    table = '[platform]\npreset = "lab"\nid_pattern = "P[0-9]{2}"\n'
    with app_factory(database_url, tmp_path, monkeypatch) as make:
        app = make(spec_with(small_experiment, tmp_path / "lab", table))
        client = app.test_client()
        page = html.unescape(client.get("/lab/small").get_data(as_text=True))
        assert 'Expected: "P", then 2 digits\n        (e.g. P01).' in re.sub(r"</?code>", "", page)
        assert "[0-9]" not in page
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
        refused = client.post("/lab/small", data={"participant_id": "P7", "csrf_token": csrf})
        text = html.unescape(refused.get_data(as_text=True))
        assert refused.status_code == 400 and "[0-9]" not in text
        assert """The id 'P7' does not have this study's format: "P", then 2 digits (e.g. "P01").""" \
            in text

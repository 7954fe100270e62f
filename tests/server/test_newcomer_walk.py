"""What a newcomer tripped over (issue 36, item 7): small faults of pages and commands, each pinned."""

from __future__ import annotations

import re


def test_every_page_names_an_icon_that_is_served(client):
    page = client.get("/admin/login").get_data(as_text=True)
    href = re.search(r'<link rel="icon" type="image/svg\+xml" href="([^"]+)"', page).group(1)
    icon = client.get(href)
    assert icon.status_code == 200 and icon.mimetype == "image/svg+xml"
    assert icon.get_data(as_text=True).startswith("<svg")


def test_export_of_an_uninitialised_database_says_so_in_one_line(tmp_path):
    from click.testing import CliRunner

    from humanlike.cli import main

    url = f"sqlite:///{tmp_path / 'empty.sqlite'}"
    result = CliRunner().invoke(main, ["export", "demo", "--out", str(tmp_path / "out"),
                                       "--database-url", url])
    assert result.exit_code == 1
    assert result.output.strip() == (
        "Error: database not initialised (it has no humanlike tables): run `humanlike db upgrade` "
        "with the same --database-url / DATABASE_URL first")


def test_serve_prints_the_entry_link_each_source_uses():
    from humanlike.cli.serve import entry_links
    from humanlike.server.spec import PlatformSettings

    base = "http://h:1"
    assert entry_links(base, "s", {"preset": "sona"}) == [
        ("SONA study URL", "http://h:1/start/s?survey_code=%SURVEY_CODE%")]
    assert entry_links(base, "s", PlatformSettings(preset="lab")) == [
        ("lab entry page", "http://h:1/lab/s")]
    assert entry_links(base, "s", "connect") == [(
        "Connect study URL", "http://h:1/start/s?participantId={{%participantId%}}"
        "&assignmentId={{%assignmentId%}}&projectId={{%projectId%}}")]
    panel = entry_links(base, "s", {"preset": "panel", "participant_param": "pid",
                                    "session_param": "sid"})
    assert panel[0][1] == "http://h:1/start/s?pid=<pid>&sid=<sid>"
    local, prolific = entry_links(base, "s", None)
    assert local == ("local link", "http://h:1/start/s")
    assert prolific[1] == ("http://h:1/start/s?PROLIFIC_PID={{%PROLIFIC_PID%}}"
                           "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}")

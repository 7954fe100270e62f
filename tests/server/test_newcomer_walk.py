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

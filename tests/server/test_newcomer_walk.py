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
    from humanlike.server.study.spec import PlatformSettings

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
    # a Prolific study admits a plain link only as the logged-in researcher's preview
    preview, template = entry_links(base, "s", "prolific")
    assert preview == ("researcher preview: log in to the admin pages first", "http://h:1/start/s")
    assert template == prolific


def test_the_participant_page_counts_trials_as_the_participant_saw_them(app, client, built_study):
    """180/180 on the participant's screen was 181/181 on the dashboard (the debrief counted)."""
    from tests.server.admin.dashboard_helpers import login
    from tests.server.admin.test_dashboard_pages import three_participants

    good, _, partial = built_study("three_participants", three_participants)
    login(app, client)
    with app.app_context():
        from humanlike.server.extensions import db
        from humanlike.server.tables.core import Participant

        p = db.session.query(Participant).filter_by(public_id=good).one()
        n_task = sum(t["type"] != "debrief" for t in p.timeline["trials"])
        assert n_task == p.n_trials - 1
    page = client.get(f"/admin/participants/{good}").get_data(as_text=True)
    assert f"</span></span> {n_task}/{n_task} trials</dd>" in page
    assert f"</span></span> 5/{n_task} trials</dd>" in client.get(
        f"/admin/participants/{partial}").get_data(as_text=True)


def test_a_triad_or_classification_answer_is_said_in_words():
    from humanlike.server.admin.participants import response_summary

    assert response_summary({"choice": "left"}, "triad") == "left image chosen as more similar"
    assert response_summary({"choice": "middle"}, "odd_one_out") == (
        "middle image chosen as the odd one out")
    assert response_summary({"choice": "left"}, "classification") == "left"  # a class named left
    assert response_summary({"choice": "dog"}) == "dog"
    assert response_summary({"other": 1}) == '{"other": 1}'


def test_reject_categories_are_offered_in_prolifics_words(app, client):
    from tests.server.admin.dashboard_helpers import csrf_from, login
    from tests.server.admin.test_experiment_page import completed

    pid = completed(app, client, "REJWORDS1")
    login(app, client)
    token = csrf_from(client.get("/admin/experiments/small").get_data(as_text=True))
    html = client.post("/admin/experiments/small/actions/confirm", data={
        "csrf_token": token, "action": "reject", "participant": pid}).get_data(as_text=True)
    assert '<option value="FAILED_CHECK" >Failed attention check</option>' in html
    assert '<option value="UNSUPP_DEVICE" >Unsupported device</option>' in html
    assert ">unsupp device<" not in html


def test_durations_are_said_in_units_a_reader_takes_in():
    from humanlike.server.admin.participants import duration

    assert [duration(s) for s in (None, 0.4, 42, 59.4, 59.6, 750, 3600, 7530)] == [
        "–", "0 s", "42 s", "59 s", "1.0 min", "12.5 min", "1 h 00 min", "2 h 06 min"]


def test_the_participant_rows_count_task_trials_too(app, client, built_study):
    from tests.server.admin.dashboard_helpers import login
    from tests.server.admin.test_dashboard_pages import three_participants

    good, _, _ = built_study("three_participants", three_participants)
    login(app, client)
    with app.app_context():
        from humanlike.server.extensions import db
        from humanlike.server.tables.core import Participant

        n_task = db.session.query(Participant).filter_by(public_id=good).one().n_trials - 1
    html = client.get("/admin/experiments/small").get_data(as_text=True)
    row = html[html.index(f'<tr data-participant="{good}"'):]
    assert f'data-stored="{n_task}" data-total="{n_task}"' in row[:row.index("</tr>")]
    assert re.search(r'<td class="num">\d+ s</td>', row[:row.index("</tr>")])  # not "0.0 min"
    assert "0.0 min" not in html

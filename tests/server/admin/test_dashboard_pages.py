"""Dashboard pages and downloads: the experiments numbers, server-side filtering and sorting by a QC
column, silent participants marked timed_out, the export zip, and the researcher's include /
exclude decisions in the export."""

from __future__ import annotations

import datetime as dt
import io
import zipfile

import pandas as pd
import pytest
import sqlalchemy as sa

from humanlike.server.export.writer import export_frames
from humanlike.server.extensions import db
from humanlike.server.live.panel import refresh_all
from humanlike.server.participants import actions
from humanlike.server.tables.core import AuditEntry, Participant
from tests.server.admin.dashboard_helpers import csrf_from, login, run_participant


def three_participants(app) -> tuple[str, str, str]:
    c = app.test_client()
    good = run_participant(c, "PROLIFIC_PID=good1&STUDY_ID=s&SESSION_ID=x", careful=True)
    bad = run_participant(c, "PROLIFIC_PID=bad1&STUDY_ID=s&SESSION_ID=x")
    partial = run_participant(c, "PROLIFIC_PID=part1&STUDY_ID=s&SESSION_ID=x", n=5, careful=True)
    with app.app_context():
        refresh_all()
    return good, bad, partial


@pytest.fixture
def three(app, built_study) -> tuple[str, str, str]:
    """The three participants of ``three_participants``, built once per session and backend."""
    return built_study("three_participants", three_participants)


def rows_of(html: str) -> list[str]:
    import re

    return re.findall(r'<tr data-participant="([0-9a-f]+)"', html)


def test_experiments_numbers_and_json(app, client, three):
    login(app, client)
    data = {row["slug"]: row for row in client.get("/admin/experiments.json").get_json()}
    small = data["small"]
    assert small["total"] == 3 and small["counts"] == {"completed": 2, "started": 1}
    assert small["completion_rate"] == 2 / 3 and small["excluded"] == 1
    assert small["last_activity"] is not None and small["median_completion_s"] >= 0
    html = client.get("/admin/experiments.rows").get_data(as_text=True)
    assert 'data-col="excluded">1<' in html


def test_the_participant_page_shows_the_stored_qc_with_reasons(app, client, three):
    good, bad, _ = three
    login(app, client)
    failing = client.get(f"/admin/participants/{bad}").get_data(as_text=True)
    assert "Fails QC" in failing and "catch_accuracy 0 &lt; 0.5" in failing
    passing = client.get(f"/admin/participants/{good}").get_data(as_text=True)
    assert "Passes every QC rule" in passing and 'data-qc="stale"' not in passing
    assert 'class="dot"' in passing  # the repeat scatter has points (the spec repeats 2 stimuli)


def test_the_participant_page_reads_each_response_at_a_glance(app, client):
    """A rating trial's cell names the categories rated above 0 (highest first); the stored JSON
    is one click away."""
    c = app.test_client()
    pid = run_participant(c, "PROLIFIC_PID=glance1&STUDY_ID=s&SESSION_ID=x", n=2, careful=True)
    login(app, client)
    html = client.get(f"/admin/participants/{pid}").get_data(as_text=True)
    import re

    cells = re.findall(r'<td class="response">(.*?)</td>', html, flags=re.S)
    assert len(cells) == 2
    summaries = [re.search(r"<summary>(.*?)</summary>", cell).group(1) for cell in cells]
    assert all(re.fullmatch(r"\d: 1", s) for s in summaries), summaries
    assert all('<code>{"input_modality"' not in cell and '"ratings"' in cell for cell in cells)


def test_filters_and_qc_sort_are_done_by_the_server(app, client, three):
    good, bad, partial = three
    login(app, client)
    base = "/admin/experiments/small/rows"
    assert rows_of(client.get(f"{base}?qc=failed").get_data(as_text=True)) == [bad]
    assert sorted(rows_of(client.get(f"{base}?excluded=no").get_data(as_text=True))) == sorted(
        [good, partial])
    assert rows_of(client.get(f"{base}?status=started").get_data(as_text=True)) == [partial]
    ordered = rows_of(client.get(f"{base}?sort=catch_accuracy&order=desc").get_data(as_text=True))
    assert ordered[0] == good and ordered.index(bad) > ordered.index(good)
    page = client.get(f"{base}?sort=progress&order=asc").get_data(as_text=True)
    assert rows_of(page)[0] == partial and 'data-stored="5"' in page
    # nonsense in the query string falls back to the defaults instead of failing
    assert client.get(f"{base}?sort=drop%20table&page=-3&status=x").status_code == 200


def test_silent_participants_are_marked_timed_out_by_the_experiment_page(app, client):
    c = app.test_client()
    pid = run_participant(c, "PROLIFIC_PID=idle1&STUDY_ID=s&SESSION_ID=x", n=2)
    with app.app_context():
        old = dt.datetime.now(dt.UTC) - dt.timedelta(hours=5)
        p = db.session.execute(sa.select(Participant).where(Participant.public_id == pid)).scalar_one()
        p.created_at = p.consented_at = p.started_at = old
        for t in p.trials:
            t.server_time = old
        db.session.commit()
    login(app, client)
    html = client.get("/admin/experiments/small").get_data(as_text=True)
    assert "status-timed_out" in html


def test_the_export_zip_is_the_export(app, client, three):
    login(app, client)
    token = csrf_from(client.get("/admin/").get_data(as_text=True))
    resp = client.post("/admin/experiments/small/export.zip",
                       data={"csrf_token": token, "pseudonymise": "1"})
    assert resp.status_code == 200 and resp.mimetype == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(resp.get_data()))
    names = {n.split("/", 1)[1] for n in archive.namelist()}
    assert {"trials.csv", "trials.parquet", "ratings.csv", "participants.csv",
            "codebook.json"} <= names
    prefix = archive.namelist()[0].split("/")[0]
    people = pd.read_csv(archive.open(f"{prefix}/participants.csv"))
    assert len(people) == 3 and people["platform_id"].str.startswith("pn-").all()
    with app.app_context():
        frames = export_frames("small")
        assert len(pd.read_csv(archive.open(f"{prefix}/ratings.csv"))) == len(frames["ratings"])
        assert db.session.execute(sa.select(AuditEntry).where(
            AuditEntry.action == "download_export")).scalar_one().detail == {"pseudonymised": True}


def test_researcher_decisions_override_qc_in_the_export(app, client, three):
    good, bad, _ = three
    with app.app_context():
        people = export_frames("small")["participants"].set_index("participant")
        assert not people.loc[good, "excluded"] and people.loc[bad, "excluded"]
        qc_reason = people.loc[bad, "exclusion_reasons"]
        assert "catch_accuracy" in qc_reason
        load = lambda pid: db.session.execute(  # noqa: E731
            sa.select(Participant).where(Participant.public_id == pid)).scalar_one()
        actions.set_analysis_override(load(good), "admin:alice", "exclude", "eyes closed")
        actions.set_analysis_override(load(bad), "admin:alice", "include", "checked by hand")
        people = export_frames("small")["participants"].set_index("participant")
    assert people.loc[good, "excluded"]
    assert people.loc[good, "exclusion_reasons"] == "researcher: eyes closed"
    assert not people.loc[bad, "excluded"]
    assert people.loc[bad, "exclusion_reasons"] == f"researcher include: checked by hand;{qc_reason}"


def test_a_rejection_needs_a_long_message_and_changes_nothing_otherwise(app, client, three):
    good, _, _ = three
    login(app, client)
    token = csrf_from(client.get(f"/admin/participants/{good}").get_data(as_text=True))
    short = client.post("/admin/experiments/small/actions/apply", data={
        "csrf_token": token, "action": "reject", "confirmed": "yes", "participant": good,
        "message": "too short", "category": "LOW_EFFORT"})
    assert short.status_code == 400 and "at least 100 characters" in short.get_data(as_text=True)
    with app.app_context():
        assert db.session.execute(sa.select(Participant.status).where(
            Participant.public_id == good)).scalar_one() == "completed"
    unconfirmed = client.post("/admin/experiments/small/actions/apply", data={
        "csrf_token": token, "action": "approve", "participant": good})
    assert unconfirmed.status_code == 400
    message = "Your answers to the attention checks were mostly wrong, so we cannot approve " \
              "this submission; thank you for your time."
    done = client.post("/admin/experiments/small/actions/apply", data={
        "csrf_token": token, "action": "reject", "confirmed": "yes", "participant": good,
        "message": message, "category": "FAILED_CHECK"})
    assert done.status_code == 200 and 'data-result="ok"' in done.get_data(as_text=True)
    with app.app_context():
        row = db.session.execute(sa.select(AuditEntry).where(AuditEntry.action == "reject")
                                 ).scalar_one()
        assert row.actor == "admin:alice" and row.detail["category"] == "FAILED_CHECK"

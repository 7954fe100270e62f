"""The live panel on the ordinary states of a live study: participants who arrived and sent no
trial yet, only practice trials, blocks without RT, experiments without native trials. A failing
section shows its error and the others compute; a failure is logged once, not per cycle; the lease
is short and renewed while computing, so a killed server does not block the panel for long."""

from __future__ import annotations

import logging

import pytest
import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.live import panel
from humanlike.server.tables.core import Experiment, PanelResult, Participant
from tests.server.admin.dashboard_helpers import csrf_from, login
from tests.server.admin.test_dashboard_panel import (  # noqa: F401  (demo_folder is a fixture)
    demo_app,
    demo_folder,
    demo_study,
    simulate,
)

SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def demo(app) -> Experiment:
    return db.session.execute(sa.select(Experiment).where(Experiment.slug == "demo")).scalar_one()


def arrive(app, platform_id: str) -> None:
    """A participant enters the study (Prolific link) and sends nothing else."""
    client = app.test_client()
    answer = client.get(f"/start/demo?PROLIFIC_PID={platform_id}&STUDY_ID=s&SESSION_ID=x")
    assert answer.status_code == 302 and "#token=" in answer.headers["Location"]


def stored(app) -> PanelResult | None:
    with app.app_context():
        row = db.session.get(PanelResult, demo(app).id)
        if row is not None:
            db.session.expunge(row)
        return row


@SQLITE
def test_arrivals_without_trials_then_a_recompute_finish_and_store_a_result(
        database_url, demo_folder, tmp_path, caplog):  # noqa: F811
    app, spec = demo_app(database_url, demo_folder, tmp_path,
                         'measure = "noise_ceiling_halfwidth"\nthreshold = 0.05')
    simulate(app, demo_study(spec), 3, "a")
    with app.app_context():
        assert panel.refresh_all() == {"demo": True}
    first = stored(app)
    arrive(app, "late1")
    arrive(app, "late2")
    # the dashboard's "recompute" button marks the result stale; the next pass computes it
    client = app.test_client()
    login(app, client)
    csrf = csrf_from(client.get("/admin/experiments/demo").get_data(as_text=True))
    answer = client.post("/admin/experiments/demo/panel/stale", data={"csrf_token": csrf})
    assert answer.status_code == 302
    caplog.set_level(logging.ERROR)
    with app.app_context():
        assert panel.refresh_all() == {"demo": True}
    second = stored(app)
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    assert second.data_version == first.data_version and second.computed_at > first.computed_at
    assert second.result["n_participants"] == 3 and not second.result.get("errors")
    assert second.lease_until is None
    # a researcher's exclusion of one of them is a data change the panel computes too
    with app.app_context():
        person = db.session.execute(sa.select(Participant).where(
            Participant.platform_id == "late1")).scalar_one()
        person.analysis_override, person.analysis_override_reason = "exclude", "no trials"
        db.session.commit()
        assert panel.refresh_all() == {"demo": True}
    third = stored(app)
    assert third.data_version != second.data_version and not caplog.records
    assert third.computed_at > second.computed_at


def partial(app, platform_id: str, n: int, timed: bool = True) -> None:
    """A participant who consented and sent the first ``n`` trials of the timeline (without RT
    unless ``timed``) through the API."""
    from humanlike.server.demo.simulate import SimulatedStudy  # noqa: F401  (the answers' shapes)

    client = app.test_client()
    answer = client.get(f"/start/demo?PROLIFIC_PID={platform_id}&STUDY_ID=s&SESSION_ID=x")
    location = answer.headers["Location"]
    pid = location.split("#")[0].rstrip("/").split("/")[-1]
    headers = {"Authorization": f"Bearer {location.split('#token=')[1]}"}
    api = f"/api/v1/participants/{pid}"
    assert client.post(f"{api}/consent", json={"agree": True}, headers=headers).status_code == 200
    timeline = client.get(f"{api}/timeline", headers=headers).get_json()
    for entry in timeline["trials"][:n]:
        body = {"trial_index": entry["index"], "trial_type": entry["type"],
                "response": _answer(entry)}
        if timed:
            body["rt_ms"] = 800.0
        status = client.post(f"{api}/trials", json=body, headers=headers).status_code
        assert status in (200, 201), (entry, status)


def _answer(entry: dict) -> dict:
    kind = entry["type"]
    if kind == "rating":
        return {"ratings": {str(d): 0.5 for d in range(10)}}
    if kind == "triad":
        return {"choice": "left"}
    if kind == "classification":
        return {"choice": "3"}
    return {"answers": {}}


@SQLITE
def test_practice_only_mid_way_and_untimed_participants_leave_every_section_computed(
        database_url, demo_folder, tmp_path, caplog):  # noqa: F811
    app, spec = demo_app(database_url, demo_folder, tmp_path,
                         'measure = "noise_ceiling_halfwidth"\nthreshold = 0.05')
    simulate(app, demo_study(spec), 3, "a")
    with app.app_context():
        assert panel.refresh_all() == {"demo": True}
    caplog.set_level(logging.WARNING)
    partial(app, "practice-only", 2)      # the ratings block's two practice trials
    partial(app, "mid-way", 25)
    partial(app, "no-rt", 12, timed=False)
    with app.app_context():
        assert panel.refresh_all() == {"demo": True}
        exp = demo(app)
        qc = {p.platform_id: p for p in db.session.execute(sa.select(Participant).where(
            Participant.experiment_id == exp.id)).scalars()}
        from humanlike.server.tables.core import ParticipantQC

        rows = {r.participant_id: r for r in db.session.execute(sa.select(ParticipantQC)
                                                                ).scalars()}
        assert rows[qc["practice-only"].id].n_stored == 2
        assert rows[qc["practice-only"].id].median_rt_ms is None  # practice is not timed QC
        assert rows[qc["no-rt"].id].n_stored == 12 and rows[qc["no-rt"].id].too_fast_share is None
        assert rows[qc["mid-way"].id].n_stored == 25
        assert rows[qc["mid-way"].id].median_rt_ms == 800.0
    result = stored(app).result
    assert not result.get("errors"), result.get("errors")
    assert result["kind"] == "ratings" and result["ceilings"]
    assert result["mlds_scales"] and result["ec"] and result["stopping"]
    assert not [r for r in caplog.records if r.name.startswith("humanlike")]


def test_the_timing_qc_reads_rows_of_an_untyped_empty_batch_and_skips_practice():
    """A batch frame whose ``practice`` column is object-typed and empty (what a reader gives for
    participants without trials) selects rows, not columns; practice trials are not timed QC."""
    import pandas as pd

    from humanlike.server.live.qc import TRIAL_FIELDS, timing

    empty = pd.DataFrame({name: pd.Series([], dtype=object) for name in TRIAL_FIELDS})
    assert timing(empty, 100.0) == ({}, {})
    trials = pd.DataFrame({"participant": ["a", "a", "a", "b", "b"],
                           "practice": pd.Series([True, False, False, True, None], dtype=object),
                           "rt_ms": [50.0, 90.0, 300.0, 10.0, None]})
    median, too_fast = timing(trials, 100.0)
    assert median == {"a": 195.0} and too_fast == {"a": 0.5}


@SQLITE
def test_a_failing_section_shows_its_error_the_others_compute_and_it_is_logged_once(
        database_url, demo_folder, tmp_path, caplog, monkeypatch):  # noqa: F811
    from humanlike.server.live import panel_sections

    app, spec = demo_app(database_url, demo_folder, tmp_path,
                         'measure = "noise_ceiling_halfwidth"\nthreshold = 0.05')
    study = demo_study(spec)
    simulate(app, study, 3, "a")

    def broken(data, settings):
        raise RuntimeError("the scale fit <b>broke</b>")

    monkeypatch.setattr(panel_sections, "mlds_section", broken)
    caplog.set_level(logging.INFO, logger="humanlike")
    with app.app_context():
        assert panel.refresh_all() == {"demo": True}
        assert panel.refresh_all() == {"demo": False}  # stored with its data: not retried
    result = stored(app).result
    assert set(result["errors"]) == {"mlds_scales"}
    assert result["errors"]["mlds_scales"].startswith("RuntimeError: the scale fit <b>broke</b>")
    assert "test_panel_robust.py:" in result["errors"]["mlds_scales"]  # where it was raised
    assert "error" in result["mlds_scales"]
    assert result["ceilings"] and result["ec"]["conditions"] and result["stopping"]["measure"]
    lines = [r for r in caplog.records if r.name.startswith("humanlike")]
    assert len(lines) == 1 and "mlds_scales failed" in lines[0].getMessage()
    assert lines[0].exc_info is None and "\n" not in lines[0].getMessage()  # no traceback
    # new data, the same failure: computed again, not logged again
    simulate(app, study, 1, "b")
    with app.app_context():
        assert panel.refresh_all() == {"demo": True}
    assert stored(app).result["n_participants"] == 4
    assert len([r for r in caplog.records if r.name.startswith("humanlike")]) == 1
    # the dashboard shows the section's error (escaped) and the sections that computed
    client = app.test_client()
    login(app, client)
    html = client.get("/admin/experiments/demo/panel").get_data(as_text=True)
    assert 'data-section="mlds"' in html and "the scale fit &lt;b&gt;broke&lt;/b&gt;" in html
    assert 'data-section="ec"' in html and html.count("<svg") == 1
    assert 'data-ceiling="all-lower"' in html
    # fixed: the next data change computes the section again, and nothing is logged
    monkeypatch.undo()
    simulate(app, study, 1, "c")
    with app.app_context():
        assert panel.refresh_all() == {"demo": True}
    assert stored(app).result["errors"] == {}
    assert stored(app).result["mlds_scales"]["sequences"]


@SQLITE
def test_the_lease_is_renewed_while_computing(
        database_url, demo_folder, tmp_path, monkeypatch):  # noqa: F811
    """With a 1 s lease renewed every 0.2 s, a section that takes 2 s keeps it: another worker
    cannot claim the experiment meanwhile, and the lease seen from outside reaches past the
    first one."""
    import time

    from humanlike.server.live import panel_sections
    from humanlike.server.tables.core import utcnow

    app, spec = demo_app(database_url, demo_folder, tmp_path,
                         'measure = "noise_ceiling_halfwidth"\nthreshold = 0.05')
    simulate(app, demo_study(spec), 3, "a")
    monkeypatch.setattr(panel, "LEASE", dt_seconds(1.0))
    monkeypatch.setattr(panel, "RENEW_EVERY", 0.2)
    original, seen = panel_sections.ec_section, {}

    def slow(data, settings, alpha):
        began = utcnow()
        time.sleep(2.0)
        with app.app_context():  # another worker, its own session
            exp = demo(app)
            seen["claimed"] = panel.claim(exp, "other", "intruder", force=True)
            seen["until"] = db.session.get(PanelResult, exp.id).lease_until
        seen["began"] = began
        return original(data, settings, alpha)

    monkeypatch.setattr(panel_sections, "ec_section", slow)
    with app.app_context():
        assert panel.refresh(demo(app), "worker")
    assert seen["claimed"] is False
    from humanlike.server.database import as_utc

    assert as_utc(seen["until"]) > seen["began"] + dt_seconds(0.5)
    assert stored(app).lease_until is None and stored(app).result["ec"]["conditions"]


def dt_seconds(seconds: float):
    import datetime as dt

    return dt.timedelta(seconds=seconds)


@SQLITE
def test_a_worker_killed_mid_computation_blocks_the_panel_for_under_a_minute(
        database_url, demo_folder, tmp_path, monkeypatch):  # noqa: F811
    """``humanlike panel-worker`` killed (SIGKILL) while it computes leaves a lease that ends
    within a minute of its last renewal; then another worker computes the panel."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from humanlike.server.database import as_utc
    from humanlike.server.tables.core import utcnow

    app, spec = demo_app(database_url, demo_folder, tmp_path,
                         'measure = "noise_ceiling_halfwidth"\nthreshold = 0.05')
    simulate(app, demo_study(spec), 3, "a")
    env = dict(os.environ, DATABASE_URL=database_url, HUMANLIKE_EXPERIMENTS=str(spec),
               SECRET_KEY="t")
    worker = subprocess.Popen([sys.executable, "-c", "import sys; from humanlike.cli import main; "
                               "sys.exit(main())", "panel-worker", "--once"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            row = stored(app)
            if row is not None and row.lease_owner is not None:
                break
            assert worker.poll() is None, "the worker finished before it could be killed"
            time.sleep(0.05)
        else:
            raise AssertionError("the worker never took the lease")
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    killed = utcnow()
    row = stored(app)
    assert row.lease_owner is not None and row.result is None  # killed mid-computation
    assert as_utc(row.lease_until) <= killed + dt_seconds(60)
    with app.app_context():
        assert not panel.refresh(demo(app), "next")  # the dead worker's lease still holds
    real = panel.utcnow
    monkeypatch.setattr(panel, "utcnow", lambda: real() + dt_seconds(60))
    with app.app_context():
        assert panel.refresh(demo(app), "next")
    assert stored(app).result["ceilings"] and stored(app).lease_owner is None


@SQLITE
def test_a_failing_qc_pass_is_shown_and_the_panel_still_computes(
        database_url, demo_folder, tmp_path, monkeypatch):  # noqa: F811
    app, spec = demo_app(database_url, demo_folder, tmp_path,
                         'measure = "noise_ceiling_halfwidth"\nthreshold = 0.05')
    simulate(app, demo_study(spec), 3, "a")

    def broken(exp, everyone=False):
        raise KeyError("rt_ms")

    monkeypatch.setattr(panel, "refresh_qc", broken)
    with app.app_context():
        assert panel.refresh_all() == {"demo": True}
    result = stored(app).result
    assert list(result["errors"]) == ["qc"] and result["errors"]["qc"].startswith("KeyError")
    assert result["ceilings"] and result["mlds_scales"]["sequences"] and result["ec"]["conditions"]
    client = app.test_client()
    login(app, client)
    html = client.get("/admin/experiments/demo/panel").get_data(as_text=True)
    assert 'data-section-error="qc"' in html and "KeyError: &#39;rt_ms&#39;" in html

"""The display record, sizes in degrees, durations in whole frames and the timing certificate
(server/participants/display.py): geometry against independent trigonometry, the API's checks, the export's
tables and the frame-miss QC rule."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sqlalchemy as sa

from humanlike.server import create_app, database
from humanlike.server.demo.simulate import (
    SimulatedStudy,
    SimulationSettings,
    api_client,
    simulate_participants,
)
from humanlike.server.extensions import db
from humanlike.server.participants import display
from humanlike.server.study import experiments
from humanlike.server.study.settings import DisplaySettings
from humanlike.server.study.spec import ExperimentSpec, SpecError, load_spec
from humanlike.server.tables.core import Participant
from tests.server.conftest import auth, enter, write_small_experiment

# ---------------------------------------------------------------- geometry and frames (no database


def test_px_per_degree_spans_exactly_one_degree_at_the_viewing_distance():
    for ppmm, d in [(3.78, 500.0), (5.2, 620.0), (2.1, 1000.0)]:
        ppd = display.px_per_degree(ppmm, d)
        half_mm = ppd / ppmm / 2
        assert math.degrees(2 * math.atan(half_mm / d)) == pytest.approx(1.0, rel=1e-12)
    # the textbook case: 57.3 cm away, 1 cm is about 1 degree
    assert display.px_per_degree(10.0, 572.958) == pytest.approx(100.0, rel=1e-4)


def test_viewing_distance_puts_the_blind_spot_at_13_5_degrees():
    ppmm, s = 3.78, 480.0
    d = display.viewing_distance_mm(s, ppmm)
    assert math.degrees(math.atan((s / ppmm) / d)) == pytest.approx(13.5, rel=1e-12)


def test_frames_for_rounds_half_up_and_gives_at_least_one_frame():
    cases = {(200, 1000 / 60): 12, (200, 1000 / 120): 24, (200, 1000 / 144): 29,
             (25, 1000 / 60): 2, (5, 1000 / 60): 1, (8.333, 1000 / 120): 1, (100, 10): 10}
    got = display.frames_for([d for d, _ in cases], [f for _, f in cases])
    assert got.tolist() == list(cases.values())
    assert display.off_whole_frames(200, 1000 / 144) == pytest.approx(0.2)
    assert display.off_whole_frames(200, 1000 / 60) == pytest.approx(0.0, abs=1e-12)


def test_the_display_settings_accept_rates_within_the_tolerance():
    s = DisplaySettings(refresh_hz=[60, 120], refresh_tolerance_hz=2)
    assert s.refresh_accepted(59.94) and s.refresh_accepted(121.5)
    assert not s.refresh_accepted(144.0) and not s.refresh_accepted(75.0)
    assert DisplaySettings().refresh_accepted(144.0)


# ---------------------------------------------------------------- the spec

def _spec(tmp_path, extra: str = "", presentation: str = 'mode = "duration"\nduration_ms = 200'):
    path = write_small_experiment(tmp_path)
    text = path.read_text().replace('[presentation]\nmode = "until_response"',
                                    "[presentation]\n" + presentation)
    path.write_text(text + extra)
    return path


def test_a_size_in_degrees_needs_the_calibration(tmp_path):
    path = _spec(tmp_path, presentation='mode = "duration"\nduration_ms = 200\nimage_height_deg = 4')
    with pytest.raises(SpecError, match="image_height_deg needs \\[display\\] calibration"):
        load_spec(path)
    path.write_text(path.read_text() + "\n[display]\ncalibration = true\n")
    assert load_spec(path).presentation.image_height_deg == 4


def test_specs_without_the_display_table_keep_their_hash(tmp_path):
    spec = load_spec(_spec(tmp_path))
    dumped = spec.model_dump(mode="json")
    assert "display" not in dumped and "image_height_deg" not in dumped["presentation"]
    again = ExperimentSpec.model_validate({**dumped, "display": None})
    assert again.spec_hash() == spec.spec_hash()


# ---------------------------------------------------------------- the API and the certificate

DISPLAY_TOML = """
[display]
calibration = true
refresh_hz = [60, 120]
whole_frames = true
max_frame_miss = 1
"""


@pytest.fixture
def timed_app(database_url, tmp_path):
    path = _spec(tmp_path, DISPLAY_TOML,
                 presentation='mode = "duration"\nduration_ms = 200\nimage_height_deg = 4')
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "SQLALCHEMY_DATABASE_URI": database_url,
                      "EXPERIMENT_PATHS": [str(path)]})
    database.upgrade(app)
    experiments.sync_all(app)
    yield app
    database.dispose(app)


def calibration_body(card_px=323.0, blind=(400.0, 404.0, 398.0), hz=120.0):
    ppmm = card_px / display.CARD_WIDTH_MM
    d = display.viewing_distance_mm(sum(blind) / len(blind), ppmm)
    ppd = display.px_per_degree(ppmm, d)
    return {
        "refresh_hz": hz, "frame_ms": 1000 / hz, "n_intervals": 60,
        "calibration": {"card_width_px": card_px, "px_per_mm": ppmm, "blind_spot_px": list(blind),
                        "viewing_distance_mm": d, "px_per_deg": ppd},
        "image_height_px": round(4 * ppd), "image_height_deg": round(4 * ppd) / ppd,
        "window_width": 1280, "window_height": 900, "device_pixel_ratio": 1, "suitable": True,
        "reason": None,
    }


def _consented(client):
    pid, token = enter(client)
    assert client.post(f"/api/v1/participants/{pid}/consent", json={"agree": True},
                       headers=auth(token)).status_code == 200
    return pid, token


def _rows(app):
    with app.app_context():
        return db.session.execute(sa.select(display.DisplayCalibration)).scalars().all()


def test_the_display_record_is_stored_and_the_timeline_carries_the_display_table(timed_app):
    client = timed_app.test_client()
    pid, token = _consented(client)
    tl = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    assert tl["display"]["calibration"] is True and tl["display"]["refresh_hz"] == [60, 120]
    assert tl["presentation"]["image_height_deg"] == 4
    body = calibration_body()
    resp = client.post(f"/api/v1/participants/{pid}/display", json=body, headers=auth(token))
    assert resp.status_code == 201, resp.get_json()
    row = _rows(timed_app)[0]
    assert row.px_per_deg == pytest.approx(body["calibration"]["px_per_deg"])
    # a reload or a resume gets the stored calibration back instead of asking again
    again = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    assert tl["calibration"] is None
    assert again["calibration"] == {**body["calibration"], "card_attempts": 1, "blind_spot_attempts": 1}
    replay = dict(body, calibration=again["calibration"])
    assert client.post(f"/api/v1/participants/{pid}/display", json=replay,
                       headers=auth(token)).status_code == 201
    assert row.detail["blind_spot_px"] == [400.0, 404.0, 398.0]
    with timed_app.app_context():
        assert db.session.execute(sa.select(Participant.refresh_hz)).scalar_one() == 120.0


@pytest.mark.parametrize("change, field", [
    (lambda b: b["calibration"].update(px_per_deg=b["calibration"]["px_per_deg"] * 1.05), "px_per_deg"),
    (lambda b: b["calibration"].update(px_per_mm=b["calibration"]["px_per_mm"] * 1.01), "px_per_mm"),
    (lambda b: b.update(frame_ms=1000 / 60), "refresh_hz and frame_ms"),
    (lambda b: b.update(suitable=False), "reason"),
    (lambda b: b["calibration"].update(card_width_px=50.0, px_per_mm=50 / 85.6), "px_per_mm must lie"),
])
def test_a_record_that_does_not_follow_from_its_answers_is_422_and_stores_nothing(
        timed_app, change, field):
    client = timed_app.test_client()
    pid, token = _consented(client)
    body = calibration_body()
    change(body)
    resp = client.post(f"/api/v1/participants/{pid}/display", json=body, headers=auth(token))
    assert resp.status_code == 422 and resp.get_json()["error"] == "invalid_display"
    assert field in str(resp.get_json()["detail"])
    assert _rows(timed_app) == []


def test_the_display_record_needs_the_participants_token(timed_app):
    client = timed_app.test_client()
    pid, _ = _consented(client)
    _, other_token = enter(client, "PROLIFIC_PID=zzz999&STUDY_ID=s1&SESSION_ID=x2")
    assert client.post(f"/api/v1/participants/{pid}/display", json=calibration_body()).status_code == 401
    assert client.post(f"/api/v1/participants/{pid}/display", json=calibration_body(),
                       headers=auth(other_token)).status_code == 403
    assert _rows(timed_app) == []


def _answer_trials(client, pid, token, frames_of, hz):
    """Post every trial with the frames ``frames_of(k)`` shown at ``hz``; returns what was sent."""
    tl = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    labels = [c["label"] for c in tl["categories"]]
    sent = []
    for k, t in enumerate(tl["trials"]):
        if t["type"] == "debrief":
            body = {"trial_index": t["index"], "trial_type": "debrief",
                    "response": {"answers": {"strategy": "x"}}}
        else:
            frames = frames_of(k)
            presented = round(frames * 1000 / hz + (0.3 if k % 3 else -0.2), 1)
            body = {"trial_index": t["index"], "trial_type": "rating",
                    "response": {"ratings": dict.fromkeys(labels, 0.0)}, "rt_ms": 900.0,
                    "presented_ms": presented, "frames": frames}
            sent.append({"practice": bool(t.get("practice")), "frames": frames, "presented_ms": presented})
        resp = client.post(f"/api/v1/participants/{pid}/trials", json=body, headers=auth(token))
        assert resp.status_code == 201, resp.get_json()
    return sent


@pytest.mark.parametrize("hz, requested", [(60.0, 12), (120.0, 24)])
def test_the_certificate_and_the_export_report_whole_frames_at_the_measured_rate(
        timed_app, hz, requested):
    from humanlike.server.export.writer import export_frames

    client = timed_app.test_client()
    pid, token = _consented(client)
    assert client.post(f"/api/v1/participants/{pid}/display", json=calibration_body(hz=hz),
                       headers=auth(token)).status_code == 201
    # every fifth trial one frame long, the others exact
    sent = _answer_trials(client, pid, token, lambda k: requested + (k % 5 == 4), hz)
    main = [s for s in sent if not s["practice"]]
    errors = np.array([s["presented_ms"] for s in main]) - 200.0
    with timed_app.app_context():
        participant = db.session.execute(sa.select(Participant)).scalar_one()
        spec = participant.experiment.spec
        cert = display.participant_certificate(participant, spec)
        frames = export_frames("small")
    [row] = cert["by_type"]
    assert row["trial_type"] == "rating" and row["n_timed"] == len(main)
    assert row["requested_frames"] == requested and row["requested_ms"] == 200
    assert row["n_off"] == sum(s["frames"] != requested for s in main)
    assert row["max_frame_miss"] == 1 and not cert["excluded"]
    assert row["frames_shown"] == pytest.approx(np.mean([s["frames"] for s in main]))
    assert row["duration_error_mean_ms"] == pytest.approx(errors.mean(), abs=1e-3)
    assert row["duration_error_sd_ms"] == pytest.approx(errors.std(ddof=1), abs=1e-3)
    timing = frames["trial_timing"]
    assert len(timing) == len(main) and set(timing["requested_frames"]) == {requested}
    assert timing["frame_error"].tolist() == [s["frames"] - requested for s in main]
    assert frames["display"]["px_per_deg"].iloc[0] == pytest.approx(
        calibration_body(hz=hz)["calibration"]["px_per_deg"])
    assert "frames missed" not in frames["participants"]["exclusion_reasons"].iloc[0]


def test_a_participant_whose_frames_missed_by_more_than_the_limit_is_excluded(timed_app):
    from humanlike.server.export.writer import export_frames

    client = timed_app.test_client()
    pid, token = _consented(client)
    client.post(f"/api/v1/participants/{pid}/display", json=calibration_body(hz=60.0), headers=auth(token))
    _answer_trials(client, pid, token, lambda k: 12 + 2 * (k == 3), 60.0)
    with timed_app.app_context():
        participant = db.session.execute(sa.select(Participant)).scalar_one()
        cert = display.participant_certificate(participant, participant.experiment.spec)
        people = export_frames("small")["participants"]
    assert cert["excluded"] and cert["by_type"][0]["max_frame_miss"] == 2
    assert people["excluded"].iloc[0]
    assert "frames missed by more than 1" in people["exclusion_reasons"].iloc[0]


# ---------------------------------------------------------------- the report's timing table

@pytest.fixture
def classification_app(database_url, tmp_path):
    path = write_small_experiment(tmp_path)
    path.write_text(path.read_text().replace('trial_type = "rating"', 'trial_type = "classification"')
                    .replace("repeats = 2\n", "repeats = 2\n\n[blocks.classification]\nduration_ms = 200\n")
                    .replace("\n[exclusion]\nmin_catch_accuracy = 0.5\n", "\n"))
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "SQLALCHEMY_DATABASE_URI": database_url,
                      "EXPERIMENT_PATHS": [str(path)]})
    database.upgrade(app)
    experiments.sync_all(app)
    yield app, path
    database.dispose(app)


def simulated_export(app, path, out, **settings):
    """``settings`` simulated participants through the app's API, exported to ``out``."""
    from humanlike.server.export.writer import write_export

    study = SimulatedStudy(path, SimulationSettings(fail_catch=0, **settings))
    with api_client(app=app) as client:
        simulate_participants(client, study)
    with app.app_context():
        write_export("small", out)
    return out


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # the numbers, not the backend
def test_the_reports_timing_table_matches_the_simulated_trials_it_summarises(classification_app, tmp_path):
    """Eight simulated participants at 60, 75, 120 and 144 Hz (a late frame on 30 % of trials):
    the report's table equals a summary computed here from the export's trials and participants."""
    import pandas as pd

    from humanlike.analysis.io.export import read_export
    from humanlike.analysis.report.display import display_section

    app, path = classification_app
    out = simulated_export(app, path, tmp_path / "export", n_participants=8,
                           late_frame_share=0.3, seed=3)
    section = display_section(read_export(out))
    assert section.missing is None
    from humanlike.analysis.report.display import SHORT_NAMES

    got = section.tables[0].frame.rename(columns={v: k for k, v in SHORT_NAMES.items()})

    trials = pd.read_csv(out / "trials.csv")
    people = pd.read_csv(out / "participants.csv")
    trials = trials[~trials["practice"]].merge(people[["participant", "refresh_hz"]], on="participant")
    requested_frames = np.maximum(1, np.floor(200 * trials["refresh_hz"] / 1000 + 0.5))
    trials = trials.assign(error=trials["presented_ms"] - 200.0,
                           on=(trials["frames"] == requested_frames).astype(float),
                           hz=trials["refresh_hz"].round().astype(int))
    want = trials.groupby("hz").agg(trials=("error", "size"), mean=("error", "mean"),
                                    sd=("error", "std"), on=("on", "mean"),
                                    participants=("participant", "nunique"))
    assert sorted(got["refresh_hz"]) == sorted(want.index)
    got = got.set_index("refresh_hz").loc[want.index]
    assert set(got["trial_type"]) == {"classification"} and set(got["requested_ms"]) == {200}
    assert got["trials"].tolist() == want["trials"].tolist()
    assert got["participants"].tolist() == want["participants"].tolist()
    assert np.allclose(got["duration_error_mean_ms"], want["mean"], atol=1e-3)
    assert np.allclose(got["duration_error_sd_ms"], want["sd"], atol=1e-3, equal_nan=True)
    assert np.allclose(got["on_frames"], want["on"])
    assert 0 < want["on"].min() < 1  # the late frames are there to be seen


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # the numbers, not the backend
def test_a_rehearsal_of_a_timed_rating_study_shows_the_stimulus_for_its_duration(timed_app, tmp_path):
    """``humanlike simulate`` on ratings shown for 200 ms (``presentation.mode = "duration"``, no
    classification block): each trial reports the 200 ms in whole frames of the participant's rate
    (rounded half up, as the browser does), so nobody is excluded by ``max_frame_miss = 1``; before,
    the simulator reported the reaction time as the presentation and excluded everyone."""
    import pandas as pd

    out = simulated_export(timed_app, timed_app.config["EXPERIMENT_PATHS"][0],
                           tmp_path / "export", n_participants=6, late_frame_share=0.0, seed=5)
    people = pd.read_csv(out / "participants.csv")
    trials = pd.read_csv(out / "trials.csv").merge(people[["participant", "refresh_hz"]])
    rated = trials[trials["trial_type"] == "rating"]
    want = np.maximum(1, np.floor(200 * rated["refresh_hz"] / 1000 + 0.5))  # independent of the code
    assert (rated["frames"] == want).all()
    assert np.allclose(rated["presented_ms"], want * 1000 / rated["refresh_hz"], atol=0.01)
    assert len(people) == 6 and not people["exclusion_reasons"].fillna("").str.contains(
        "frames missed").any()


def test_the_participant_page_shows_the_certificate(timed_app):
    from tests.server.admin.dashboard_helpers import login

    client = timed_app.test_client()
    pid, token = _consented(client)
    body = calibration_body(hz=60.0)
    client.post(f"/api/v1/participants/{pid}/display", json=body, headers=auth(token))
    sent = _answer_trials(client, pid, token, lambda k: 12 + 2 * (k == 3), 60.0)
    n_timed = sum(not s["practice"] for s in sent)
    login(timed_app, client)
    html = client.get(f"/admin/participants/{pid}").get_data(as_text=True)
    assert 'data-refresh-hz="60.00"' in html
    assert f'data-px-per-deg="{body["calibration"]["px_per_deg"]:.2f}"' in html
    row = html.split('<tr data-trial-type="rating">', 1)[1].split("</tr>", 1)[0]
    cells = [c.split(">", 1)[1] for c in row.split("</td>")[:-1]]
    assert cells[:4] == ["rating", str(n_timed), "200", "12"] and cells[6] == "2"  # missed by 2
    assert 'data-timing-excluded="true"' in html

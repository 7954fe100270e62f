"""A Prolific participant completes the demo with the keyboard only; nothing is lost or duplicated."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

from humanlike.server.export.writer import write_export
from humanlike.server.extensions import db
from humanlike.server.tables.core import Participant, Trial
from tests.e2e.participant_driver import Played, play

pytestmark = pytest.mark.browser

PROLIFIC_DONE = "https://app.prolific.com/submissions/complete"
QUERY = "PROLIFIC_PID={pid}&STUDY_ID=demo-study&SESSION_ID=demo-session"


def new_page(chromium):
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    context.route("https://app.prolific.com/**",
                  lambda route: route.fulfill(status=200, body="<h1>Prolific (test double)</h1>",
                                              content_type="text/html"))
    page = context.new_page()
    page.set_default_timeout(20000)
    return context, page


def stored(app, platform_id):
    with app.app_context():
        p = db.session.execute(
            sa.select(Participant).where(Participant.platform_id == platform_id)
        ).scalar_one()
        trials = db.session.execute(
            sa.select(Trial).where(Trial.participant_id == p.id).order_by(Trial.trial_index)
        ).scalars().all()
        db.session.expunge_all()
        return p, trials


def check_complete(app, platform_id, played: Played):
    p, trials = stored(app, platform_id)
    assert p.status == "completed" and p.completion_code == "C1HLDEMO"
    assert [t.trial_index for t in trials] == list(range(p.n_trials)), "one row per trial"
    ratings = [t for t in trials if t.trial_type == "rating"]
    assert [t.response["ratings"] for t in ratings] == played.ratings
    assert all(t.rt_ms > 0 and t.frames and t.frames > 0 and t.presented_ms > 0 for t in ratings)
    triads = [t for t in trials if t.trial_type == "triad"]
    assert [t.response["choice"] for t in triads] == played.triads
    assert all(t.rt_ms > 0 and t.frames > 0 for t in triads)
    assert p.refresh_hz and 10 < p.refresh_hz < 500
    return p, trials


def fit_exported_triads(triads: pd.DataFrame) -> None:
    """The exported MLDS triads fit a scale per sequence that follows the simulated observer's
    psi = ((level - 1) / 6) ** 2 (its standard scale runs 0 -> 1)."""
    from humanlike.analysis.mlds.estimator import MLDS

    truth = (np.arange(7) / 6.0) ** 2
    for sequence, rows in triads.groupby("sequence"):
        fit = MLDS(design="triads").fit(rows)
        assert fit.scale_std_[0] == 0 and fit.scale_std_[-1] == pytest.approx(1)
        assert np.corrcoef(fit.scale_std_, truth)[0, 1] > 0.9, (sequence, fit.scale_std_)


def test_prolific_participant_completes_the_demo_with_the_keyboard_only(
        demo_server, chromium, tmp_path):
    context, page = new_page(chromium)
    link = f"{demo_server.url}/start/demo?" + QUERY.format(pid="kbd-only-1")
    page.goto(link)
    played = play(page, Played(), until=PROLIFIC_DONE)
    assert page.url == f"{PROLIFIC_DONE}?cc=C1HLDEMO"
    _p, trials = check_complete(demo_server.app, "kbd-only-1", played)
    n_rows = len(trials)

    # the same link again: "already taken part", and no new rows
    page.goto(link)
    assert "already taken part" in page.content()
    again = context.browser.new_context().new_page()
    again.goto(link)
    assert "already taken part" in again.content()
    with demo_server.app.app_context():
        assert db.session.execute(sa.select(sa.func.count()).select_from(Participant)).scalar_one() == 1
        assert db.session.execute(sa.select(sa.func.count()).select_from(Trial)).scalar_one() == n_rows
        out = tmp_path / "export"
        write_export("demo", out)
    exported = pd.read_csv(out / "trials.csv")
    assert len(exported) == n_rows - 1  # all but the debrief
    triads = pd.read_csv(out / "triads.csv")
    assert len(triads) == len(played.triads) >= 70
    assert (triads["s1"] < triads["s2"]).all() and (triads["s2"] < triads["s3"]).all()
    fit_exported_triads(triads)
    context.close()


PENDING_JS = """() => Object.keys(localStorage).filter(k => k.endsWith(':pending'))
    .map(k => Object.keys(JSON.parse(localStorage.getItem(k))).length).reduce((a, b) => a + b, 0)"""


def wait_stored(app, platform_id, n, page, seconds=10.0):
    for _ in range(int(seconds * 10)):
        if len(stored(app, platform_id)[1]) >= n:
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"fewer than {n} trials stored")


def test_offline_then_reload_resumes_without_loss_or_duplicates(demo_server, chromium):
    context, page = new_page(chromium)
    page.goto(f"{demo_server.url}/start/demo?" + QUERY.format(pid="flaky-net-1"))
    played = play(page, Played(), max_trials=5)
    wait_stored(demo_server.app, "flaky-net-1", 5, page)
    context.set_offline(True)
    played = play(page, played, max_trials=4)  # answered offline: kept in localStorage
    page.wait_for_timeout(4000)
    assert len(stored(demo_server.app, "flaky-net-1")[1]) == 5
    assert page.evaluate(PENDING_JS) == 4
    assert "offline" in page.get_attribute("#sync-status", "class")
    context.set_offline(False)
    page.reload()  # at once: the four offline trials are still only in localStorage
    played = play(page, played, max_trials=3)
    wait_stored(demo_server.app, "flaky-net-1", 12, page)
    page.reload()
    played = play(page, played, until=PROLIFIC_DONE)
    assert page.url == f"{PROLIFIC_DONE}?cc=C1HLDEMO"
    check_complete(demo_server.app, "flaky-net-1", played)
    context.close()

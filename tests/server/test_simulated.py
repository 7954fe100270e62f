"""A rehearsal (``humanlike simulate``) is recorded by the server at arrival, only with the
researcher's rehearsal key; simulated participants are exported with their flag, out of the
analysed set by default, and counted on their own on the dashboard (issue 45, item 10)."""

from __future__ import annotations

import numpy as np
import sqlalchemy as sa
from click.testing import CliRunner

from humanlike.server.extensions import db
from humanlike.server.tables.core import Participant
from tests.server.conftest import auth, enter
from tests.server.test_export import run_participant

ENTRY = "PROLIFIC_PID={pid}&STUDY_ID=s1&SESSION_ID={pid}-x"


def _rehearse(app, spec, n: int, key: str | None):
    from humanlike.server.demo.simulate import (
        SimulatedStudy,
        SimulationSettings,
        api_client,
        simulate_participants,
    )

    study = SimulatedStudy(spec, SimulationSettings(n_participants=n, fail_catch=0, seed=1))
    with api_client(app=app, rehearsal_key=key) as client:
        return simulate_participants(client, study)


def _flags(app) -> dict[str, bool]:
    with app.app_context():
        return dict(db.session.execute(
            sa.select(Participant.platform_id, Participant.simulated)).all())


def test_a_rehearsal_with_the_researchers_key_is_exported_simulated_and_not_analysed(
        app, client, small_experiment):
    from humanlike.analysis.sample import Sample
    from humanlike.server.export.codebook import codebook
    from humanlike.server.export.writer import export_frames
    from humanlike.server.participants.rehearsal import rehearsal_key

    _rehearse(app, small_experiment, 2, rehearsal_key(app.config["SECRET_KEY"], "small"))
    pid, token = enter(client, ENTRY.format(pid="REAL1"))
    run_participant(client, pid, token, np.random.default_rng(0))
    assert _flags(app) == {"sim1-0000": True, "sim1-0001": True, "REAL1": False}
    with app.app_context():
        people = export_frames("small")["participants"].set_index("platform_id")
    assert people["simulated"].to_dict() == {"sim1-0000": True, "sim1-0001": True, "REAL1": False}
    assert people["analysed"].to_dict() == {"sim1-0000": False, "sim1-0001": False, "REAL1": True}
    assert people.loc["sim1-0000", "analysed_reason"] == "simulated"
    from humanlike.server.live.panel_ratings import exclusions
    from humanlike.server.tables.core import Experiment

    with app.app_context():  # the live panel decides the same
        panel = exclusions(db.session.execute(sa.select(Experiment)).scalar_one())
        assert panel.set_index("participant")["analysed"].to_dict() == people.set_index(
            "participant")["analysed"].to_dict()
    assert "simulated" in codebook()["participants"]
    assert "simulated" in codebook()["participants"]["analysed_reason"]
    assert Sample.of(people.reset_index()).sentence() == (
        "1 analysed of 3 who arrived: 3 completed, 0 returned, 0 excluded by QC, "
        "2 simulated (a rehearsal: not analysed).")


def test_a_forged_rehearsal_flag_is_ignored(app, client):
    from humanlike.server.participants.rehearsal import (
        REHEARSAL_HEADER,
        SIMULATED_HEADER,
        rehearsal_key,
    )

    forged = {
        "F1": {REHEARSAL_HEADER: "0" * 64},  # a made-up key
        "F2": {REHEARSAL_HEADER: rehearsal_key("test-secret", "other")},  # another study's key
        "F3": {REHEARSAL_HEADER: rehearsal_key("guessed-secret", "small")},  # another server's
        "F4": {},  # and a query parameter / an environment event that claim it
    }
    for name, headers in forged.items():
        resp = client.get(f"/start/small?{ENTRY.format(pid=name)}&simulated=1", headers=headers)
        assert resp.status_code == 302 and SIMULATED_HEADER not in resp.headers, name
    pid, token = enter(client, ENTRY.format(pid="F5"))
    assert client.post(f"/api/v1/participants/{pid}/events", headers=auth(token), json={
        "type": "environment", "value": {"refresh_hz": 60, "simulated": True}}).status_code < 300
    genuine = client.get(f"/start/small?{ENTRY.format(pid='G1')}",
                         headers={REHEARSAL_HEADER: rehearsal_key("test-secret", "small")})
    assert genuine.status_code == 302 and genuine.headers[SIMULATED_HEADER] == "1"
    assert _flags(app) == {"F1": False, "F2": False, "F3": False, "F4": False, "F5": False,
                           "G1": True}
    from humanlike.server.admin.participants import simulated_ids

    with app.app_context():
        ids = dict(db.session.execute(sa.select(Participant.platform_id, Participant.id)).all())
        assert simulated_ids(list(ids.values())) == {ids["G1"]}


def test_the_simulator_stops_when_the_server_does_not_recognise_its_key(app, small_experiment):
    import pytest

    with pytest.raises(RuntimeError, match="did not recognise the rehearsal key"):
        _rehearse(app, small_experiment, 2, "not-the-key")
    assert _flags(app) == {"sim1-0000": False}  # one arrival, never consented: in progress


def test_the_dashboard_counts_simulated_participants_apart(app, client, small_experiment):
    from humanlike.server.participants.rehearsal import rehearsal_key
    from tests.server.admin.dashboard_helpers import login

    _rehearse(app, small_experiment, 2, rehearsal_key(app.config["SECRET_KEY"], "small"))
    enter(client, ENTRY.format(pid="REAL1"))
    login(app, client)
    [row] = client.get("/admin/experiments.json").get_json()
    assert (row["total"], row["simulated"]) == (3, 2)
    page = client.get("/admin/").get_data(as_text=True)
    assert '<span class="hint nowrap" data-col="simulated">2 simulated</span>' in page


def test_the_cli_rehearsal_is_marked_and_prints_its_key(database_url, small_experiment, tmp_path):
    from humanlike.cli import main
    from humanlike.cli.app_context import make_app
    from humanlike.server.participants.rehearsal import rehearsal_key

    runner = CliRunner()
    out = runner.invoke(main, ["simulate", str(small_experiment), "--print-key",
                               "--database-url", database_url])
    assert out.exit_code == 0, out.output
    secret = make_app(database_url=database_url).config["SECRET_KEY"]
    assert out.output.strip() == rehearsal_key(secret, "small")
    out = runner.invoke(main, ["simulate", str(small_experiment), "--participants", "1",
                               "--fail-catch", "0", "--truth", str(tmp_path / "truth"),
                               "--database-url", database_url])
    assert out.exit_code == 0, out.output
    app = make_app([str(small_experiment)], database_url)
    assert _flags(app) == {"sim0-0000": True}
    out = runner.invoke(main, ["simulate", str(small_experiment), "--participants", "1",
                               "--fail-catch", "0", "--rehearsal-key", "wrong", "--seed", "5", "--truth",
                               str(tmp_path / "truth"), "--database-url", database_url])
    assert out.exit_code != 0 and "did not recognise the rehearsal key" in out.output


def test_the_default_fail_catch_fits_the_number_of_participants():
    from humanlike.server.demo.simulate import SimulationSettings

    counts = {n: SimulationSettings(n_participants=n).fail_catch for n in (1, 2, 3, 5, 6, 12)}
    assert counts == {1: 0, 2: 0, 3: 1, 5: 1, 6: 2, 12: 2}
    assert SimulationSettings(n_participants=4, fail_catch=4).fail_catch == 4


def _copy_small(small_experiment, dest):
    import shutil

    shutil.copytree(small_experiment.parent, dest)
    return dest / "experiment.toml"


def _write_models(path, stimuli, models=("alpha", "beta")):
    import pandas as pd

    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"model": m, "stimulus": s, "category": str(c), "probability": 0.9 if c == 3 else 0.01}
            for m in models for s in stimuli for c in range(10)]
    pd.DataFrame(rows).to_csv(path, index=False)


def _natural_stimuli(spec, n):
    import pandas as pd

    manifest = pd.read_csv(spec.parent / "stimuli" / "manifest.csv")
    return manifest.loc[manifest["kind"] == "natural", "file"].astype(str).head(n).tolist()


def test_the_cli_says_which_observer_answers_and_where_its_responses_came_from(
        database_url, small_experiment, tmp_path):
    from humanlike.cli import main

    spec = _copy_small(small_experiment, tmp_path / "exp")
    runner = CliRunner()
    args = ["simulate", str(spec), "--participants", "1", "--truth", str(tmp_path / "truth"),
            "--database-url", database_url]
    out = runner.invoke(main, args)  # no model responses anywhere: the true class, said so
    assert out.exit_code == 0, out.output
    assert "observer: the true class (no model responses" in out.output
    out = runner.invoke(main, [*args, "--observer", "alpha"])
    assert out.exit_code != 0 and "observer 'alpha' asked for, but no model responses" in out.output
    _write_models(spec.parent / "models" / "two.csv", _natural_stimuli(spec, 4))
    out = runner.invoke(main, [*args, "--seed", "1"])  # models/ beside the spec, its first model
    assert out.exit_code == 0, out.output
    assert "observer: model 'alpha' (4 of 10 rated or classified stimuli; the other 6" in out.output
    assert f"model responses ({spec.parent / 'models'}/): {spec.parent / 'models' / 'two.csv'}" \
        in out.output
    out = runner.invoke(main, [*args, "--observer", "gamma", "--seed", "2"])
    assert out.exit_code != 0
    assert "no responses of model 'gamma'; the models are alpha, beta" in out.output
    elsewhere = tmp_path / "other.csv"
    _write_models(elsewhere, _natural_stimuli(spec, 10), models=("delta",))
    out = runner.invoke(main, [*args, "--models", str(elsewhere), "--seed", "3"])
    assert out.exit_code == 0, out.output
    assert "observer: model 'delta' (10 of 10 rated or classified stimuli)" in out.output
    assert f"model responses (--models): {elsewhere}" in out.output


def test_the_panels_model_responses_are_the_simulators_too(small_experiment, tmp_path):
    from humanlike.server.demo.simulate import (
        SimulatedStudy,
        SimulationSettings,
        find_model_responses,
        load_responses,
    )

    spec = _copy_small(small_experiment, tmp_path / "exp")
    _write_models(spec.parent / "models" / "ignored.csv", _natural_stimuli(spec, 2), ("zeta",))
    _write_models(spec.parent / "scores" / "panel.csv", _natural_stimuli(spec, 3), ("eta",))
    spec.write_text(spec.read_text() + '\n[panel]\nmodel_responses = ["scores/panel.csv"]\n')
    paths, source = find_model_responses(spec)
    assert (paths, source) == ([spec.parent / "scores" / "panel.csv"],
                               "the spec's [panel] model_responses")
    study = SimulatedStudy(spec, SimulationSettings(n_participants=1), load_responses(paths))
    assert study.observer == "eta" and study.n_covered == 3
    stimulus = _natural_stimuli(spec, 1)[0]
    assert study.model_p(stimulus)[3] == 0.9
    assert study.truth().settings.observer == "eta"


def test_a_rehearsal_is_simulated_in_the_insert_that_allocates_it(app, client, monkeypatch):
    """A crash right after the allocation's commit (before the arrival's reply) leaves the row
    marked: the flag is written with the participant, not in a second transaction."""
    from humanlike.server.participants import rehearsal

    def crash(*args, **kwargs):
        raise RuntimeError("process died after the allocation")

    monkeypatch.setattr(rehearsal, "mark_arrival", crash)
    key = rehearsal.rehearsal_key(app.config["SECRET_KEY"], "small")
    crashed = client.get(f"/start/small?{ENTRY.format(pid='CRASH1')}",
                         headers={rehearsal.REHEARSAL_HEADER: key})
    assert crashed.status_code == 500
    assert client.get(f"/start/small?{ENTRY.format(pid='CRASH2')}").status_code == 500
    with app.app_context():
        db.session.remove()
    assert _flags(app) == {"CRASH1": True, "CRASH2": False}


def test_a_models_folder_is_its_csv_files_and_an_empty_one_is_an_error(small_experiment, tmp_path):
    import pytest

    from humanlike.server.demo.simulate import load_responses

    spec = _copy_small(small_experiment, tmp_path / "exp")
    _write_models(tmp_path / "models" / "a.csv", _natural_stimuli(spec, 2), ("alpha",))
    _write_models(tmp_path / "models" / "b.csv", _natural_stimuli(spec, 3), ("beta",))
    frame = load_responses([tmp_path / "models"])
    assert frame.groupby("model").size().to_dict() == {"alpha": 20, "beta": 30}
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="empty: no .csv or .parquet model responses"):
        load_responses([tmp_path / "empty"])
    assert load_responses([]) is None


def test_a_cli_rehearsal_run_twice_with_one_seed_allocates_identically(small_experiment, tmp_path):
    """Two databases, the same --seed: every participant gets the same condition and timeline
    (the app's ALLOCATION_SEED is the seed), so a rehearsal and the report made from it repeat."""
    from humanlike.cli import main
    from humanlike.cli.app_context import make_app

    runner = CliRunner()
    timelines = []
    for run in ("a", "b"):
        url = f"sqlite:///{tmp_path / run}.sqlite"
        out = runner.invoke(main, ["simulate", str(small_experiment), "--participants", "2",
                                   "--fail-catch", "0", "--seed", "4",
                                   "--truth", str(tmp_path / f"truth-{run}"), "--database-url", url])
        assert out.exit_code == 0, out.output
        with make_app([str(small_experiment)], url).app_context():
            timelines.append(db.session.execute(
                sa.select(Participant.condition, Participant.timeline)
                .order_by(Participant.id)).all())
            db.session.remove()
    assert len(timelines[0]) == 2 and timelines[0] == timelines[1]

"""The authenticity screen on a running study (issue 39): agents sent through the real API (a model,
a fixed key, a replayed human recording; ``server/demo/agents.py``) are flagged, each for its own
reason, in the stored verdicts, the dashboard, the export (columns and codebook) and the circuit
breaker's reading; nothing is rejected, paid or excluded unless the researcher says so."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

from humanlike.analysis.authenticity.verdict import COLUMNS
from humanlike.analysis.data_paths import shared_data_dir
from humanlike.analysis.exclusions import ExclusionRules
from humanlike.server import create_app, database
from humanlike.server.demo.simulate import (
    SimulatedStudy,
    SimulationSettings,
    api_client,
    find_model_responses,
    load_responses,
    run_participant,
)
from humanlike.server.export import codebook
from humanlike.server.export.writer import _Export, export_frames, trial_chunks
from humanlike.server.extensions import db
from humanlike.server.live import breaker
from humanlike.server.live.authenticity import refresh_authenticity, stored_verdicts
from humanlike.server.study import experiments
from humanlike.server.study.spec import BreakerRules
from humanlike.server.tables.authenticity import ParticipantAuthenticity
from humanlike.server.tables.core import AuditEntry, Experiment, Participant, Payment
from tests.server.admin.dashboard_helpers import login
from tests.server.conftest import write_small_experiment
from tests.server.test_agents import LABELS, SPEEDED  # the small study plus a classification block
from tests.server.test_breaker import from_address

AGENTS = {"model": 2, "lazy": 2, "replay": 2}
SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> Path:
    """The small rating experiment with five images a class, a classification block, and model
    'alpha' as the panel's candidate model: random probabilities, the true class raised by 0.15
    (a classifier that errs, as the models people test do)."""
    path = write_small_experiment(tmp_path_factory.mktemp("authenticity"), per_class=5)
    text = path.read_text().replace("\n[[conditions]]\n", SPEEDED, 1)
    path.write_text(text + '\n[panel]\nmodel_responses = ["models/alpha.csv"]\n')
    manifest = pd.read_csv(path.parent / "stimuli" / "manifest.csv")
    p = np.random.default_rng(39).dirichlet(np.ones(10), len(manifest))
    truth = manifest["true_class"].astype(str).map({c: i for i, c in enumerate(LABELS)})
    p[np.arange(len(p)), truth.fillna(0).astype(int)] += 0.15
    p /= p.sum(axis=1, keepdims=True)
    rows = [{"model": "alpha", "stimulus": s, "category": c, "probability": p[i, int(c)]}
            for i, s in enumerate(manifest["file"].astype(str)) for c in LABELS]
    (path.parent / "models").mkdir()
    pd.DataFrame(rows).to_csv(path.parent / "models" / "alpha.csv", index=False)
    return path


@pytest.fixture
def app(database_url, spec):
    application = create_app({"TESTING": True, "SECRET_KEY": "test-secret",
                              "SQLALCHEMY_DATABASE_URI": database_url,
                              "EXPERIMENT_PATHS": [str(spec)], "PROXY_COUNT": 1})
    database.upgrade(application)
    experiments.sync_all(application)
    yield application
    database.dispose(application)


def send_agents(app, spec: Path) -> dict[str, str]:
    """Two participants of each agent, each from its own address; platform id -> agent."""
    models = load_responses(find_model_responses(spec)[0])
    recording = shared_data_dir() / "model-vs-human/raw-data/edge/edge_subject-01_session_1.csv"
    who: dict[str, str] = {}
    number = 0
    with api_client(app=app) as client:
        for seed, (agent, n) in enumerate(AGENTS.items()):
            settings = SimulationSettings(
                n_participants=n, agent=agent, seed=seed, id_prefix=agent,
                replay_source=str(recording) if agent == "replay" else None)
            study = SimulatedStudy(spec, settings, models)
            for k in range(n):
                from_address(client, number)
                number += 1
                truth = run_participant(client, study, k, fails_catch=False)
                who[truth["platform_id"]] = agent
    return who


def test_agents_are_flagged_for_their_own_reasons_and_nothing_is_done_to_them(app, spec):
    who = send_agents(app, spec)
    with app.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        assert refresh_authenticity(exp) == len(who)
        people = dict(db.session.execute(sa.select(Participant.id, Participant.platform_id)).all())
        verdicts = {people[pid]: v for pid, v in stored_verdicts(exp).items()}
        statuses = set(db.session.execute(sa.select(Participant.status)).scalars())
        n_payments = db.session.execute(sa.select(sa.func.count()).select_from(Payment)).scalar_one()
        audit = set(db.session.execute(sa.select(AuditEntry.action)).scalars())
    assert {v.verdict for v in verdicts.values()} == {"flagged"}
    for platform_id, agent in who.items():
        reasons = verdicts[platform_id].reasons
        signals = verdicts[platform_id].signals
        if agent == "model":  # answers with alpha's most probable class: kappa 1 with alpha
            assert reasons.startswith("EC with model alpha 1.00, above the human reference 0.40")
            assert signals["ec_model_kappa"] == 1.0 and signals["rt_cv"] > 0.2
        elif agent == "lazy":  # '0' on every trial at 450 +- 5 ms
            assert "answers do not depend on the image: kappa with the true class 0.00" in reasons
            assert "reaction times too regular for a person" in reasons
            assert signals["stimulus_kappa"] == pytest.approx(0.0) and signals["rt_cv"] < 0.01
        else:  # a real observer's edge answers, replayed onto these digits
            assert "answers do not depend on the image" in reasons
            assert "EC with model" not in reasons and signals["rt_cv"] > 0.1
    # the screen informs: nobody was rejected, paid, or acted on
    assert statuses == {"completed"} and n_payments == 0
    assert not {a for a in audit if "reject" in a or "approve" in a or "bonus" in a}


def test_export_columns_codebook_and_the_researchers_exclusion_switch(app, spec):
    who = send_agents(app, spec)
    with app.app_context():
        frame = export_frames("small")["participants"].set_index("platform_id")
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        run = _Export(exp)
        for chunk in trial_chunks(exp):
            run.tables(chunk)
        run.rules = ExclusionRules(exclude_authenticity_flagged=True)  # as the spec would say
        switched = run.participant_frame().set_index("platform_id")
    assert set(COLUMNS) <= set(frame.columns)
    assert set(COLUMNS) <= set(codebook.codebook()["participants"])
    assert (frame.loc[list(who), "authenticity"] == "flagged").all()
    lazy = [p for p, a in who.items() if a == "lazy"]
    assert (frame.loc[lazy, "auth_rt_cv"] < 0.01).all()
    assert frame.loc[[p for p, a in who.items() if a == "model"], "auth_ec_model"].eq("alpha").all()
    # off by default: the verdict excludes nobody; switched on: every flagged one, with the reason
    assert not frame["exclusion_reasons"].str.contains("authenticity").any()
    assert switched.loc[list(who), "excluded"].all()
    assert switched.loc[list(who), "exclusion_reasons"].str.contains("authenticity flagged").all()


def test_the_breaker_rule_reads_the_flagged_share(app, spec):
    """The rule reads the verdicts the background pass stored (the screen is too much work for a
    participant's completion request, where the breaker is checked): none stored, none counted."""
    send_agents(app, spec)
    with app.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        now = dt.datetime.now(dt.UTC)
        rules = BreakerRules(min_participants=5, max_flagged_share=0.5, max_qc_fail_share=None,
                             max_return_share=None, max_error_rate=None, min_time_share=None)
        before = breaker.read(exp, rules, now)
        refresh_authenticity(exp)  # the panel's background pass
        reading = breaker.read(exp, rules, now)
        off = breaker.read(exp, rules.model_copy(update={"max_flagged_share": None}), now)
    assert before.n_flagged == 0 and before.fired == []
    assert reading.n_sources == 6 and reading.n_flagged == 6
    assert reading.flagged_share == 1.0 and reading.fired == ["flagged_share 1.00 > 0.50"]
    assert off.flagged_share is None and off.fired == []


@SQLITE  # the reader is under test; both backends read in the tests above
def test_the_screen_reads_the_decisions_the_export_tables_hold(app, spec):
    """The screen's own reader (stored trials, no rating long form) gives the rows of the export's
    classifications and decisions tables: practice out, tied ratings out, same class and condition."""
    from humanlike.server.export.authenticity import SCREEN_FIELDS, decision_types, screen_rows
    from humanlike.server.export.writer import stimulus_frame
    from humanlike.server.participants import trial_store

    send_agents(app, spec)
    with app.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        tables = export_frames("small")
        [chunk] = trial_store.trial_chunks(SCREEN_FIELDS, experiment_id=exp.id, chunk_rows=None,
                                           trial_types=list(decision_types()))
        rows = screen_rows(chunk, LABELS, stimulus_frame(exp))
    expected = pd.concat([
        tables["classifications"].assign(task="classifications"),
        tables["decisions"][tables["decisions"]["n_tied"] == 1].assign(task="decisions")])
    expected = expected[~expected["practice"].astype(bool)]
    key = ["participant", "trial_index"]
    got = rows.sort_values(key).reset_index(drop=True)
    want = expected.sort_values(key).reset_index(drop=True)
    assert len(got) == len(want) > 300
    for column in ("stimulus", "response", "category", "correct", "task"):
        assert got[column].astype(str).tolist() == want[column].astype(str).tolist(), column
    assert got["condition"].astype(str).tolist() == want["stimulus_condition"].astype(str).tolist()
    assert got["rt_ms"].tolist() == pytest.approx(want["rt_ms"].astype(float).tolist(), nan_ok=True)


@SQLITE  # the reader is under test; both backends read in the tests above
def test_the_live_pass_reads_only_participants_with_new_trials(app, spec, monkeypatch):
    """The background pass keeps each participant's screen rows with the trial count they were
    read at: a second pass reads only the newcomer, and its verdicts are the full screen's."""
    from humanlike.server.export import authenticity as screen_module
    from humanlike.server.live import authenticity as live

    asked: list[list[int]] = []
    reader = screen_module.stored_rows
    monkeypatch.setattr(live, "stored_rows", lambda exp, ids=None: asked.append(ids) or reader(exp, ids))
    monkeypatch.setattr(live, "_ROWS", {})
    models = load_responses(find_model_responses(spec)[0])
    with api_client(app=app) as client:
        for k in range(3):
            from_address(client, k)
            run_participant(client, SimulatedStudy(spec, SimulationSettings(
                n_participants=1, agent="lazy", seed=k, id_prefix="lazy"), models), 0, False)
        with app.app_context():
            exp = db.session.execute(sa.select(Experiment)).scalar_one()
            refresh_authenticity(exp)
            from_address(client, 9)
            run_participant(client, SimulatedStudy(spec, SimulationSettings(
                n_participants=1, agent="model", seed=9, id_prefix="model"), models), 0, False)
            refresh_authenticity(exp)
            newcomer = db.session.execute(sa.select(Participant.id).where(
                Participant.platform_id.like("model%"))).scalar_one()
            stored = {a.participant_id: a.reasons for a in stored_verdicts(exp).values()}
            full = screen_module.experiment_screen(exp)
            ids = dict(db.session.execute(sa.select(Participant.public_id, Participant.id)).all())
    assert [len(a) for a in asked] == [3, 1] and asked[1] == [newcomer]
    assert stored == {ids[p]: r for p, r in full["authenticity_reasons"].items()}


def test_the_dashboard_shows_filters_and_keeps_the_verdicts(app, spec, monkeypatch):
    """The table's badges and filter, the participant page in words, and a failed screen on the
    panel with the verdicts stored before kept."""
    send_agents(app, spec)
    with app.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        refresh_authenticity(exp)
        model = db.session.execute(sa.select(Participant).where(
            Participant.platform_id.like("model%"))).scalars().first()
        one, model_public = model.id, model.public_id
    client = app.test_client()
    login(app, client)
    table = client.get("/admin/experiments/small/rows").get_data(as_text=True)
    assert table.count('data-authenticity="flagged"') == 6
    page = client.get(f"/admin/participants/{model_public}").get_data(as_text=True)
    assert 'data-authenticity="flagged"' in page
    assert "EC with model alpha 1.00, above the human reference 0.40" in page
    assert "never rejects, excludes or withholds pay" in page
    with app.app_context():  # as if one of them were only marked review
        db.session.execute(sa.update(ParticipantAuthenticity).where(
            ParticipantAuthenticity.participant_id == one).values(verdict="review"))
        db.session.commit()
    rows = client.get("/admin/experiments/small/rows?authenticity=review").get_data(as_text=True)
    assert rows.count("<tr data-participant") == 1 and 'data-authenticity="review"' in rows
    rows = client.get("/admin/experiments/small/rows?authenticity=flagged").get_data(as_text=True)
    assert rows.count("<tr data-participant") == 5
    rows = client.get("/admin/experiments/small/rows?authenticity=bogus").get_data(as_text=True)
    assert rows.count("<tr data-participant") == 6  # an unknown value filters nothing
    page = client.get("/admin/experiments/small?authenticity=review").get_data(as_text=True)
    assert '<option value="review" selected>' in page
    # a screen that fails leaves the verdicts stored before and says so on the panel, once logged
    from humanlike.server.live import panel

    def broken(exp):
        raise RuntimeError("no screen today")

    monkeypatch.setattr(panel, "refresh_authenticity", broken)
    with app.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        assert panel.refresh(exp, force=True)
        kept = {a.verdict for a in stored_verdicts(exp).values()}
    html = client.get("/admin/experiments/small/panel").get_data(as_text=True)
    assert 'data-section-error="authenticity"' in html and "no screen today" in html
    assert kept == {"flagged", "review"}

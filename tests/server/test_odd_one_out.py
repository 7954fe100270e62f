"""The odd-one-out trial type through the registry: the spec's block and its checks, the same
triplets for every participant in each one's own order, the API's response check, simulated
participants, the export's table, the stored QC and the metric on what was exported."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

from humanlike.server import create_app, database
from humanlike.server.extensions import db
from humanlike.server.study import experiments
from humanlike.server.study.experiments import load_experiment
from humanlike.server.study.spec import SpecError
from humanlike.server.study.timeline import generate_timeline
from humanlike.server.tables.core import ParticipantQC, Trial
from humanlike.server.trial_types.odd_one_out import draw_triplets
from tests.server.conftest import SMALL_SPEC, auth

SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # the type, not the backend

BLOCK = """[[blocks]]
name = "ratings"
trial_type = "rating"
kinds = ["natural"]
practice = 1
catch_trials = 2
repeats = 2
"""
ODD_BLOCK = """[[blocks]]
name = "triplets"
trial_type = "odd_one_out"
kinds = ["natural"]
practice = 1
repeats = 2
{extra}
[blocks.odd_one_out]
triplets = {triplets}
design_seed = 7
"""


def write_odd_experiment(dest: Path, triplets: int = 30, extra: str = "") -> Path:
    """The small digit experiment with one odd-one-out block over 20 digit images (2 per class)."""
    from humanlike.stimuli.digits import build_digit_stimuli

    stim = dest / "stimuli"
    stim.mkdir(parents=True, exist_ok=True)
    build_digit_stimuli(stim, per_class=2, catch_per_class=1, seed=1).to_csv(
        stim / "manifest.csv", index=False)
    cats = "".join(f'[[categories]]\nlabel = "{d}"\nkey = "{d}"\n\n' for d in range(10))
    spec = SMALL_SPEC.format(categories=cats).replace('slug = "small"', 'slug = "odd"')
    spec = spec.replace(BLOCK, ODD_BLOCK.format(triplets=triplets, extra=extra))
    (dest / "experiment.toml").write_text(spec)
    (dest / "consent.md").write_text("# Consent\n")
    (dest / "instructions.md").write_text("# Instructions\n\nPick the odd one out.\n")
    return dest / "experiment.toml"


@pytest.fixture(scope="module")
def odd_experiment(tmp_path_factory) -> Path:
    return write_odd_experiment(tmp_path_factory.mktemp("odd"))


def test_every_participant_gets_the_same_triplets_each_in_an_own_order(odd_experiment):
    loaded = load_experiment(odd_experiment)
    a = generate_timeline(loaded.spec, list(loaded.stimuli), "A", seed=1)["trials"]
    b = generate_timeline(loaded.spec, list(loaded.stimuli), "A", seed=2)["trials"]
    main_a = [t for t in a if t["type"] == "odd_one_out" and not t["practice"] and not t["is_repeat"]]
    main_b = [t for t in b if t["type"] == "odd_one_out" and not t["practice"] and not t["is_repeat"]]
    assert len(main_a) == len(main_b) == 30
    assert sum(t["practice"] for t in a) == 1 and sum(t["is_repeat"] for t in a) == 2
    assert sorted(map(tuple, (t["triplet"] for t in main_a))) == sorted(
        map(tuple, (t["triplet"] for t in main_b)))
    for t in main_a:
        assert t["triplet"] == sorted(t["triplet"]) and sorted(t["stimuli"]) == t["triplet"]
    shown_a = {tuple(t["triplet"]): t["stimuli"] for t in main_a}
    assert any(shown_a[tuple(t["triplet"])] != t["stimuli"] for t in main_b)  # own positions
    assert a[-1]["type"] == "debrief"


def test_triplets_are_drawn_distinct_and_uniformly_or_all_of_them():
    every = draw_triplets(6, None, 0)
    assert every.shape == (20, 3) and (np.diff(every, axis=1) > 0).all()
    drawn = draw_triplets(50, 500, 3)
    assert len(np.unique(drawn, axis=0)) == 500 and (np.diff(drawn, axis=1) > 0).all()
    assert (draw_triplets(50, 500, 3) == drawn).all()  # the design seed fixes them
    # uniform: each item is in 3/n of the triplets' slots (3 * 500 / 50 = 30 on average)
    per_item = np.bincount(drawn.ravel(), minlength=50)
    assert abs(per_item.mean() - 30) < 1e-9 and per_item.std() < 10
    most = draw_triplets(6, 15, 1)  # most of C(6, 3) = 20: a subset of all
    assert len(np.unique(most, axis=0)) == 15
    with pytest.raises(ValueError, match=r"odd_one_out.triplets = 21 but 6 stimuli make only 20"):
        draw_triplets(6, 21, 0)
    with pytest.raises(ValueError, match=r"30 stimuli make 4060 triplets \(more than 2000\): "
                                         r"set \[blocks.odd_one_out\] triplets"):
        draw_triplets(30, None, 0)


def test_the_spec_refuses_catch_trials_too_many_triplets_and_settings_on_other_blocks(tmp_path):
    catch = write_odd_experiment(tmp_path / "catch", extra="catch_trials = 1\n")
    with pytest.raises(SpecError, match=r"block triplets: odd_one_out blocks show triplets, not "
                                        r"single catch images; set catch_trials = 0"):
        load_experiment(catch)
    many = write_odd_experiment(tmp_path / "many", triplets=2000)
    with pytest.raises(SpecError, match=r"odd_one_out.triplets = 2000 but 20 stimuli make only 1140"):
        load_experiment(many)
    other = tmp_path / "other.toml"
    text = catch.read_text().replace('trial_type = "odd_one_out"', 'trial_type = "rating"')
    other.write_text(text.replace("catch_trials = 1\n", ""))
    (tmp_path / "stimuli").symlink_to(tmp_path / "catch" / "stimuli")
    for name in ("consent.md", "instructions.md"):
        (tmp_path / name).write_text("x")
    with pytest.raises(SpecError, match=r"blocks\[triplets\]\.odd_one_out needs trial_type = "
                                        r"'odd_one_out'"):
        load_experiment(other)


def test_the_qc_counts_position_bias_and_repeat_consistency():
    from humanlike.server.trial_types.odd_one_out import odd_one_out_qc

    rows = [  # participant, index, practice, is_repeat, repeat_of, choice
        ("a", 0, True, False, None, "right"),  # practice: not counted
        ("a", 1, False, False, None, "left"), ("a", 2, False, False, None, "left"),
        ("a", 3, False, False, None, "middle"), ("a", 4, False, False, None, "right"),
        ("a", 5, False, True, 1, "left"), ("a", 6, False, True, 3, "right"),
        ("b", 0, False, False, None, "middle"), ("b", 1, False, False, None, "middle"),
    ]
    trials = pd.DataFrame(rows, columns=["participant", "trial_index", "practice", "is_repeat",
                                         "repeat_of", "choice"])
    trials["repeat_of"] = trials["repeat_of"].astype("Int64")
    trials["response"] = [f'{{"choice": "{c}"}}' for c in trials.pop("choice")]  # stored JSON text
    qc = odd_one_out_qc(trials)
    # a: left 3 of 6 answers; repeats: trial 1 again left (same), trial 3 middle -> right (not)
    assert qc.loc["a"].tolist() == [pytest.approx(0.5), pytest.approx(0.5)]
    assert qc.loc["b", "position_bias"] == 1.0 and np.isnan(qc.loc["b", "repeat_consistency"])


@pytest.fixture
def odd_app(database_url, odd_experiment):
    application = create_app({"TESTING": True, "SECRET_KEY": "test-secret",
                              "SQLALCHEMY_DATABASE_URI": database_url,
                              "EXPERIMENT_PATHS": [str(odd_experiment)]})
    database.upgrade(application)
    experiments.sync_all(application)
    yield application
    database.dispose(application)


def _enter(client, pid: str) -> tuple[str, str]:
    resp = client.get(f"/start/odd?PROLIFIC_PID={pid}&STUDY_ID=s1&SESSION_ID={pid}-x")
    assert resp.status_code == 302, resp.get_data(as_text=True)
    public = resp.headers["Location"].split("#")[0].rstrip("/").split("/")[-1]
    page = client.get(f"/task/{public}").get_data(as_text=True)
    return public, re.search(r'"token": ?"([^"]+)"', page).group(1)


@SQLITE
def test_the_api_checks_the_choice_and_simulated_people_export_and_score(odd_app, odd_experiment,
                                                                         tmp_path):
    from humanlike.analysis.alignment.odd_one_out import (
        embedding_choices,
        odd_one_out_score,
        triplet_counts,
    )
    from humanlike.server.demo.simulate import (
        SimulatedStudy,
        SimulationSettings,
        api_client,
        simulate_participants,
    )
    from humanlike.server.export.writer import export_frames
    from humanlike.server.live.qc import refresh_qc
    from humanlike.server.participants.rehearsal import rehearsal_key
    from humanlike.server.tables.core import Experiment

    client = odd_app.test_client()
    pid, token = _enter(client, "REAL1")
    assert client.post(f"/api/v1/participants/{pid}/consent", json={"agree": True},
                       headers=auth(token)).status_code == 200
    timeline = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    first = timeline["trials"][0]
    assert first["type"] == "odd_one_out" and len(first["stimuli"]) == 3
    url = f"/api/v1/participants/{pid}/trials"
    body = {"trial_index": 0, "trial_type": "odd_one_out", "rt_ms": 900.0}
    for bad in ({"choice": "top"}, {"choice": 1}, {}):
        resp = client.post(url, json=body | {"response": bad}, headers=auth(token))
        assert resp.status_code == 422, resp.get_json()  # the API's answer to an invalid response
        assert "response.choice must be 'left', 'middle' or 'right'" in str(resp.get_json())
    with odd_app.app_context():
        assert db.session.execute(sa.select(sa.func.count()).select_from(Trial)).scalar_one() == 0
    resp = client.post(url, json=body | {"response": {"choice": "middle"}}, headers=auth(token))
    assert resp.status_code == 201

    study = SimulatedStudy(odd_experiment, SimulationSettings(n_participants=6, fail_catch=0, seed=3))
    with api_client(app=odd_app, rehearsal_key=rehearsal_key("test-secret", "odd")) as api:
        simulate_participants(api, study)
    from humanlike.analysis.io.export import read_export
    from humanlike.server.export.writer import write_export

    with odd_app.app_context():
        write_export("odd", tmp_path / "export")
        frames = export_frames("odd")
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        refresh_qc(exp, everyone=True)
        qc = db.session.execute(sa.select(ParticipantQC)).scalars().all()
    table = frames["odd_one_out"]
    assert list(table.columns[-8:]) == ["image_1", "image_2", "image_3", "left", "middle", "right",
                                        "choice", "odd_one_out"]
    real = table[table["participant"] == pid]
    assert len(real) == 1 and real["odd_one_out"].item() == first["stimuli"][1]
    shown = table[["left", "middle", "right"]].to_numpy()
    at = table["choice"].map({"left": 0, "middle": 1, "right": 2}).to_numpy()
    assert (shown[np.arange(len(table)), at] == table["odd_one_out"].to_numpy()).all()
    assert (np.sort(shown, axis=1) == table[["image_1", "image_2", "image_3"]].to_numpy()).all()
    simulated = table[table["participant"] != pid]
    assert len(simulated) == 6 * (30 + 1 + 2)
    # the stored QC times every participant's scoring trials (REAL1 answered only its practice)
    assert len(qc) == 7 and sum(row.median_rt_ms is not None for row in qc) == 6
    odd_metrics = [row.metrics for row in qc if row.metrics and "position_bias" in row.metrics]
    assert len(odd_metrics) == 6  # the type's own QC, kept among the stored metrics
    for m in odd_metrics:
        assert 1 / 3 <= m["position_bias"] <= 1 and m["repeat_consistency"] in (0.0, 0.5, 1.0)

    # the simulated people choose by their model (true class one-hot: the item whose class the
    # other two share is odd); a model with the same embedding matches them on those triplets
    stimuli = frames["stimuli"].set_index("stimulus")
    truth = stimuli["true_class"]
    emb = pd.DataFrame(np.eye(10)[truth.astype(int).to_numpy()], index=truth.index)
    counts = triplet_counts(simulated)
    # the export reader gives the same scoring triplets (a rehearsal analysed on purpose; REAL1's
    # practice answer, the repeats and no one else left out)
    read = read_export(tmp_path / "export", include_simulated=True).odd_one_out().frame
    from_files = triplet_counts(read)
    assert (from_files.triplets == counts.triplets).all() and (from_files.counts == counts.counts).all()
    classes = truth.loc[counts.triplets.ravel()].to_numpy().reshape(-1, 3)
    paired = np.array([len(set(row)) == 2 for row in classes.tolist()])
    assert paired.sum() >= 3  # 30 of C(20, 3): about 8 % of triplets hold a same-class pair
    choice = embedding_choices(counts.triplets, emb)
    result = odd_one_out_score(counts.counts[paired], choice[paired], n_resamples=200, random_state=0)
    assert result.n_responses == 6 * paired.sum()
    assert result.accuracy > 0.85 and result.ceiling > 0.85  # lapse 0.05: 1 - 0.05 * 2/3

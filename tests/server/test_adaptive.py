"""Adaptive allocation through the real HTTP API: simulated participants arrive, the panel worker's
refresh stores weights from the pairs its declared monitoring leaves undecided, later arrivals get
more of the undecided pairs' stimuli, each draw records its inclusion probabilities (floored by the
uniform share), the export carries them per rating, the panel's scores are the Horvitz-Thompson
estimates recomputed here from the export, and the same study run twice with the same seeds
allocates identically."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from PIL import Image

from humanlike.server import create_app, database
from humanlike.server.demo.simulate import (
    SimulatedStudy,
    SimulationSettings,
    api_client,
    simulate_participants,
)
from humanlike.server.extensions import db
from humanlike.server.study import experiments
from humanlike.server.tables.adaptive import AdaptiveDesign
from humanlike.server.tables.core import Experiment, Participant

MODELS = ("m0", "m1", "m2")
LABELS = ("a", "b", "c", "d")
MAX_TRIALS = 8
N_POOL = 24  # 6 natural + 3 pairs x 6 controversial
FLOOR = 0.25 * MAX_TRIALS / N_POOL  # every stimulus' least inclusion probability

SPEC = """\
slug = "adaptive"
title = "Adaptive allocation test"
platform = "prolific"
consent = "consent.md"
instructions = "instructions.md"
manifest = "stimuli/manifest.csv"

[presentation]
mode = "until_response"

[completion]
prolific_code = "CODE1234"

{categories}
[[blocks]]
name = "ratings"
trial_type = "rating"
kinds = ["natural", "controversial"]
max_trials = {max_trials}

[[conditions]]
name = "A"

[[conditions]]
name = "B"

[panel]
model_responses = ["stimuli/model_responses.csv"]
n_resamples = 300

[stopping]
measure = "comparisons_decided"
monitoring = "fixed_n"
looks = [8]

[adaptive]
random_share = 0.25
min_participants = 4
"""


def write_experiment(dest: Path) -> Path:
    """6 natural images all models agree on; 6 controversial images per model pair (a favours
    one label, b another, the third model in between)."""
    rng = np.random.default_rng(0)
    stim = dest / "stimuli"
    stim.mkdir(parents=True)
    rows, probs = [], []
    n_labels = len(LABELS)

    def add(name: str, kind: str, p: np.ndarray, **meta: object) -> None:
        Image.fromarray(rng.integers(0, 255, (8, 8), dtype=np.uint8)).save(stim / name)
        rows.append({"file": name, "kind": kind, **meta})
        for m, model in enumerate(MODELS):
            for k, label in enumerate(LABELS):
                probs.append({"model": model, "stimulus": name, "category": label,
                              "probability": float(p[m, k])})

    for i in range(6):
        true = i % n_labels
        p = np.full((3, n_labels), 0.05)
        p[:, true] = 0.9
        add(f"natural_{i}.png", "natural", p, true_class=LABELS[true])
    for a, b in combinations(range(3), 2):
        for i in range(6):
            c1, c2 = i % n_labels, (i + 1) % n_labels
            p = np.full((3, n_labels), 0.05)
            p[a, c1], p[b, c2] = 0.95, 0.95
            third = 3 - a - b
            p[third, c1], p[third, c2] = 0.5, 0.5
            add(f"contr_{a}{b}_{i}.png", "controversial", p, targeted_model_1=MODELS[a],
                targeted_model_2=MODELS[b], targeted_class_1=LABELS[c1], targeted_class_2=LABELS[c2])
    pd.DataFrame(rows).to_csv(stim / "manifest.csv", index=False)
    pd.DataFrame(probs).to_csv(stim / "model_responses.csv", index=False)
    cats = "".join(f'[[categories]]\nlabel = "{c}"\nkey = "{k}"\n\n'
                   for c, k in zip(LABELS, "1234", strict=True))
    (dest / "experiment.toml").write_text(SPEC.format(categories=cats, max_trials=MAX_TRIALS))
    (dest / "consent.md").write_text("# Consent\n")
    (dest / "instructions.md").write_text("# Instructions\n")
    return dest / "experiment.toml"


@pytest.fixture(scope="module")
def adaptive_spec(tmp_path_factory) -> Path:
    return write_experiment(tmp_path_factory.mktemp("adaptive"))


def _app(url: str, spec: Path):
    application = create_app({"TESTING": True, "SECRET_KEY": "test-secret",
                              "SQLALCHEMY_DATABASE_URI": url, "EXPERIMENT_PATHS": [str(spec)],
                              "ALLOCATION_SEED": 11, "ALLOCATION_RANDOM_TIES": False})
    database.upgrade(application)
    experiments.sync_all(application)
    return application


def _arrive(app, spec: Path, n: int, prefix: str, seed: int) -> None:
    models = pd.read_csv(spec.parent / "stimuli" / "model_responses.csv")
    study = SimulatedStudy(spec, SimulationSettings(n_participants=n, observer="m0", noise=0.1,
                                                    fail_catch=0, seed=seed, id_prefix=prefix),
                           model_responses=models)
    with api_client(app=app) as client:
        simulate_participants(client, study)


def _draws(app) -> list[dict]:
    with app.app_context():
        rows = db.session.execute(sa.select(Participant.allocation, Participant.timeline,
                                            Participant.condition)
                                  .order_by(Participant.id)).all()
    return [{**allocation["adaptive"], "condition": condition,
             "shown": sorted(t["stimulus"] for t in timeline["trials"]
                             if t.get("type") == "rating" and not t.get("practice"))}
            for allocation, timeline, condition in rows]


def _run_study(app, spec: Path) -> tuple[list[dict], dict]:
    """8 participants, the panel worker's refresh, 8 more."""
    from humanlike.server.live import panel

    _arrive(app, spec, 8, "first", 1)
    with app.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        assert panel.refresh(exp, force=True)  # the worker's call; it stores new weights
        design = db.session.execute(sa.select(AdaptiveDesign)).scalar_one()
        stored = {"version": design.version, "weights": design.weights,
                  "undecided": design.undecided, "hash": design.weights_hash}
        result = db.session.execute(sa.text("select result from panel_result")).scalar_one()
    _arrive(app, spec, 8, "second", 2)
    return _draws(app), {**stored, "panel": result}


def _pair_of(key: str) -> frozenset[str] | None:
    if not key.startswith("contr_"):
        return None
    a, b = key.split("_")[1]
    return frozenset((MODELS[int(a)], MODELS[int(b)]))


def test_adaptive_allocation_through_the_api(database_url, adaptive_spec, tmp_path):
    app = _app(database_url, adaptive_spec)
    draws, design = _run_study(app, adaptive_spec)
    first, second = draws[:8], draws[8:]
    # every draw: the block's max_trials stimuli with their inclusion probabilities, never below
    # the uniform floor; what the timeline shows is what was drawn
    for d in draws:
        assert sorted(d["inclusion"]) == d["shown"] == sorted(d["random"] + d["weighted"])
        assert len(d["shown"]) == MAX_TRIALS
        assert all(FLOOR - 1e-12 <= p <= 1 for p in d["inclusion"].values())
    assert {d["design_version"] for d in first} == {0}
    assert {d["design_version"] for d in second} == {1}
    assert {d["weights_hash"] for d in second} == {design["hash"]}
    # before the first weights the draw is uniform: every stimulus 8 / 24, all in the
    # equal-probability subset
    for d in first:
        np.testing.assert_allclose(list(d["inclusion"].values()), MAX_TRIALS / N_POOL)
        assert len(d["random"]) == MAX_TRIALS
    # the weights follow the panel: the pairs its declared test (fixed_n at N = 8) left undecided
    import json

    panel = json.loads(design["panel"]) if isinstance(design["panel"], str) else design["panel"]
    decided = {frozenset((p["a"], p["b"])) for p in panel["sequential"]["pairs"] if p["decided"]}
    undecided = {frozenset(p) for p in design["undecided"]}
    assert undecided and decided, panel["sequential"]
    assert undecided | decided == {frozenset(p) for p in combinations(MODELS, 2)}
    weights = design["weights"]
    # Neyman allocation: where the undecided pairs' models agree (the natural images, every model
    # alike) no rating moves their difference, so the weight is 0 and only the uniform floor
    # draws them; where they disagree it is positive
    natural = [w for k, w in weights.items() if k.startswith("natural_")]
    split = [w for k, w in weights.items() if _pair_of(k) is not None
             and any(_pair_of(k) & pair for pair in undecided)]
    assert natural == [0.0] * 6 and min(split) > 0, weights
    # later arrivals rate natural images at the floor's rate (6 x 1/12 = 0.5 of 8 per
    # participant in expectation, against 2 before the weights)
    n_natural = [sum(k.startswith("natural_") for k in d["shown"]) for d in draws]
    assert np.mean(n_natural[8:]) < 1.0 < np.mean(n_natural[:8]), n_natural
    for d in second:  # and their inclusion probability is the floor
        assert all(p == pytest.approx(FLOOR) for k, p in d["inclusion"].items()
                   if k.startswith("natural_"))
    # balanced over conditions as without [adaptive]
    assert sorted(pd.Series([d["condition"] for d in draws]).value_counts()) == [8, 8]
    # the export records each draw
    from humanlike.server.export.writer import write_export

    with app.app_context():
        write_export("adaptive", tmp_path / "out")
    people = pd.read_csv(tmp_path / "out" / "participants.csv")
    assert people["adaptive_design_version"].tolist() == [0] * 8 + [1] * 8
    assert people["adaptive_random"].iloc[:8].str.split(";").map(len).eq(MAX_TRIALS).all()
    assert (people["adaptive_weights_hash"].iloc[8:] == design["hash"]).all()
    assert people["adaptive_seed"].astype(str).tolist() == [str(d["seed"]) for d in draws]
    assert people["adaptive_pool_size"].eq(N_POOL).all()
    # each participant's whole design, rebuilt for the sequential test's bound (drawn or not):
    # the recorded probabilities where drawn, n in all, the floor at least
    from humanlike.server.live.adaptive import experiment_pool
    from humanlike.server.study.adaptive import design_matrix
    from humanlike.server.study.spec import ExperimentSpec

    with app.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        pool = experiment_pool(exp, ExperimentSpec.model_validate(exp.spec))
        rebuilt = design_matrix(exp.id, people["participant"].astype(str).tolist(), pool)
    for row, d in zip(rebuilt, draws, strict=True):
        np.testing.assert_allclose([row[pool.index(k)] for k in d["inclusion"]],
                                   list(d["inclusion"].values()), rtol=1e-12)
        assert row.sum() == pytest.approx(MAX_TRIALS) and row.min() >= FLOOR - 1e-12
    # each rating carries its inclusion probability, as the draw recorded it
    ratings = pd.read_csv(tmp_path / "out" / "ratings.csv")
    recorded = {(pid, k): p for pid, d in zip(people["participant"], draws)
                for k, p in d["inclusion"].items()}
    keys = list(zip(ratings["participant"], ratings["stimulus"]))
    np.testing.assert_allclose(ratings["inclusion_probability"], [recorded[k] for k in keys])
    # the panel's scores on the first 8: the HT mean of minus the squared error, recomputed here
    models = pd.read_csv(adaptive_spec.parent / "stimuli" / "model_responses.csv")
    first8 = ratings[ratings["participant"].isin(people["participant"].iloc[:8])]
    joined = first8.merge(models, on=["stimulus", "category"])
    per_stimulus = (joined.assign(sq=(joined["rating"] - joined["probability"]) ** 2)
                    .groupby(["model", "participant", "stimulus"])
                    .agg(sq=("sq", "mean"), pi=("inclusion_probability", "first")))
    ht = (-(per_stimulus["sq"] / per_stimulus["pi"])).groupby(["model", "participant"]).sum() / N_POOL
    expected = ht.groupby("model").mean()
    shown = {s["model"]: s["estimate"] for s in panel["scores"]}
    assert panel["score_label"].startswith("minus the mean squared error")
    for model in MODELS:
        assert shown[model] == pytest.approx(expected[model], rel=1e-9)
    # the report's pool-wide section: the same HT estimator on every analysed participant
    from humanlike.analysis.io.export import read_export
    from humanlike.analysis.planning.report import weighted_section
    from humanlike.analysis.ratings.analysis import analyze_ratings

    export = read_export(tmp_path / "out")
    analysed = analyze_ratings(export.ratings(), models, participants=export.participants,
                               n_resamples=20, random_state=0)
    section = weighted_section(export, analysed, models, 0.95, 0.05)
    joined = ratings.merge(models, on=["stimulus", "category"])
    per_stimulus = (joined.assign(sq=(joined["rating"] - joined["probability"]) ** 2)
                    .groupby(["model", "participant", "stimulus"])
                    .agg(sq=("sq", "mean"), pi=("inclusion_probability", "first")))
    every = ((-(per_stimulus["sq"] / per_stimulus["pi"])).groupby(["model", "participant"]).sum()
             / N_POOL).groupby("model").mean()
    table = section.tables[1].frame.set_index("model")["estimate"]
    for model in MODELS:
        assert table[model] == pytest.approx(every[model], rel=1e-9)
    # the report's monitored verdict: each difference scaled by a bound fixed before its draw
    # (the floor random_share gives every design), the guarantee stated
    from humanlike.analysis.report.sections import Section, monitored_verdicts

    verdict = Section("verdict", "verdict")
    monitored_verdicts(verdict, analysed, models, export,
                       {"measure": "comparisons_decided", "monitoring": "continuous"}, 0.25)
    assert "family-wise error <= 0.05 at any number of looks" in verdict.paragraphs[0]
    assert "16 participants" in verdict.paragraphs[0]
    # the same study run twice with the same seeds allocates identically
    again = _app(f"sqlite:///{tmp_path / 'again.db'}", adaptive_spec)
    draws_again, design_again = _run_study(again, adaptive_spec)
    assert draws_again == draws
    assert design_again["hash"] == design["hash"]


def test_simultaneous_arrivals_draw_once_each_and_stay_balanced(database_url, adaptive_spec):
    """12 arrivals released together (threads, a barrier) against a threaded server: all admitted,
    conditions 6 / 6, and each draw has its own arrival number (distinct seeds: no two counted the
    same participants, so the draw ran under the allocation lock)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import httpx
    from werkzeug.serving import make_server

    app = _app(database_url, adaptive_spec)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    barrier = threading.Barrier(12)

    def hit(i: int) -> int:
        with httpx.Client(timeout=60) as client:
            barrier.wait()
            return client.get(f"http://127.0.0.1:{server.server_port}/start/adaptive",
                              params={"PROLIFIC_PID": f"P{i}", "STUDY_ID": "s",
                                      "SESSION_ID": f"x{i}"}).status_code

    try:
        with ThreadPoolExecutor(12) as pool:
            codes = list(pool.map(hit, range(12)))
    finally:
        server.shutdown()
        thread.join()
    assert codes == [302] * 12
    draws = _draws(app)
    assert len(draws) == 12 and len({d["seed"] for d in draws}) == 12
    assert sorted(pd.Series([d["condition"] for d in draws]).value_counts()) == [6, 6]
    assert all(len(d["random"]) == MAX_TRIALS and len(d["shown"]) == MAX_TRIALS for d in draws)


def test_undecided_pairs_follow_the_declared_monitoring():
    from humanlike.server.live.adaptive import undecided_pairs

    def comparison(a, b, significant):
        return {"subset": "all", "a": a, "b": b, "significant": significant}

    # the monitored decisions, when the panel has them, not the fixed-sample comparisons
    result = {"comparisons": [comparison("m0", "m1", True), comparison("m0", "m2", True),
                              comparison("m1", "m2", False)],
              "sequential": {"pairs": [{"a": "m0", "b": "m1", "decided": False},
                                       {"a": "m2", "b": "m0", "decided": True},
                                       {"a": "m1", "b": "m2", "decided": False}]}}
    assert undecided_pairs(result, list(MODELS)).tolist() == [True, False, True]
    # no monitored decisions: the comparisons on all stimuli (another subset ignored)
    result = {"comparisons": [comparison("m0", "m1", True),
                              {**comparison("m1", "m2", True), "subset": "natural"}]}
    assert undecided_pairs(result, list(MODELS)).tolist() == [False, True, True]

"""Adaptive allocation through the real HTTP API: simulated participants arrive, the panel worker's
refresh stores weights from the panel's undecided comparisons, later arrivals get more of the
undecided pairs' stimuli, the random share stays exact, the export records each draw, and the same
study run twice with the same seeds allocates identically."""

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
RANDOM = 2  # round(0.25 * 8)

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
    # every draw: the block's max_trials stimuli, exactly the random share uniformly, the rest
    # weighted; what the timeline shows is what was drawn
    for d in draws:
        assert len(d["random"]) == RANDOM and len(d["weighted"]) == MAX_TRIALS - RANDOM
        assert sorted(d["random"] + d["weighted"]) == d["shown"]
    assert {d["design_version"] for d in first} == {0}
    assert {d["design_version"] for d in second} == {1}
    assert {d["weights_hash"] for d in second} == {design["hash"]}
    # the weights follow the panel: its undecided pairs, and the others decided
    import json

    panel = json.loads(design["panel"]) if isinstance(design["panel"], str) else design["panel"]
    decided = {frozenset((c["a"], c["b"])) for c in panel["comparisons"]
               if c["subset"] == "all" and c["significant"] and c["b"] in MODELS}
    undecided = {frozenset(p) for p in design["undecided"]}
    assert undecided and decided, panel["comparisons"]
    assert undecided | decided == {frozenset(p) for p in combinations(MODELS, 2)}
    weights = design["weights"]
    target = [w for k, w in weights.items() if _pair_of(k) in undecided]
    other = [w for k, w in weights.items() if _pair_of(k) not in undecided]
    # the undecided pairs' own stimuli carry most of the weight, each more than the mean of the
    # rest (other stimuli also separate those pairs a little: the third model sits in between)
    assert sum(target) > 0.6 and min(target) > np.mean(other), (target, other)
    # later arrivals rate more of the undecided pairs' stimuli: in the weighted part, well above
    # their share of the pool; the random part stays uniform
    pool_share = len(target) / len(weights)
    weighted_share = np.mean([_pair_of(k) in undecided for d in second for k in d["weighted"]])
    before = np.mean([_pair_of(k) in undecided for d in first for k in d["shown"]])
    assert weighted_share > 2 * pool_share and before < weighted_share, (weighted_share, before)
    # balanced over conditions as without [adaptive]
    assert sorted(pd.Series([d["condition"] for d in draws]).value_counts()) == [8, 8]
    # the export records each draw
    from humanlike.server.export.writer import write_export

    with app.app_context():
        write_export("adaptive", tmp_path / "out")
    people = pd.read_csv(tmp_path / "out" / "participants.csv")
    assert people["adaptive_design_version"].tolist() == [0] * 8 + [1] * 8
    assert people["adaptive_random"].str.split(";").map(len).eq(RANDOM).all()
    assert (people["adaptive_weights_hash"].iloc[8:] == design["hash"]).all()
    assert people["adaptive_seed"].astype(str).tolist() == [str(d["seed"]) for d in draws]
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
    assert all(len(d["random"]) == RANDOM and len(d["shown"]) == MAX_TRIALS for d in draws)


def test_a_comparison_leans_once_its_holm_sidak_p_is_below_the_lean_level():
    from humanlike.analysis.planning.adaptive import LEAN_P
    from humanlike.server.live.adaptive import directions

    def comparison(a, b, difference, p):
        return {"subset": "all", "a": a, "b": b, "difference": difference, "p_holm_sidak": p,
                "significant": p < 0.05}

    result = {"comparisons": [
        comparison("m0", "m1", 0.1, LEAN_P / 2),  # leans to m0: +1 for the pair (m0, m1)
        comparison("m2", "m0", 0.1, LEAN_P / 2),  # stated the other way round: m2 ahead of m0
        comparison("m1", "m2", -0.3, LEAN_P),  # not below the level: no lean yet
        {**comparison("m0", "m1", -0.1, 0.0), "subset": "natural"},  # another subset: ignored
    ]}
    assert directions(result, list(MODELS)).tolist() == [1.0, -1.0, 0.0]
    assert directions({}, list(MODELS)).tolist() == [0.0, 0.0, 0.0]

"""From participants to scores on the demo: simulated participants answer through the API, the
export feeds `humanlike analyze ratings` and `humanlike analyze mlds` unchanged."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from click.testing import CliRunner

from humanlike.cli import main
from humanlike.server import create_app, database
from humanlike.server.export.writer import write_export
from humanlike.server.study import experiments


def _simulate(app, n_participants: int, responses_path, seed: int = 0) -> None:
    """Participants whose ratings are the CNN's probabilities plus noise, rounded to the 5 levels;
    triads answered by a known MLDS observer; classifications by the CNN with lapses
    (:mod:`humanlike.server.demo.simulate`, through the HTTP API in-process); none fails catch trials."""
    from humanlike.analysis.ratings.scores import load_model_responses
    from humanlike.server.demo.simulate import (
        SimulatedStudy,
        SimulationSettings,
        api_client,
        simulate_participants,
    )

    settings = SimulationSettings(n_participants=n_participants, observer="cnn", noise=0.2,
                                  fail_catch=0, seed=seed)
    study = SimulatedStudy(app.config["EXPERIMENT_PATHS"][0], settings,
                           load_model_responses(responses_path))
    with api_client(app=app) as client:
        truth = simulate_participants(client, study)
    assert all(p["n_trials"] > 0 for p in truth.participants)


def test_the_demo_export_feeds_the_ratings_and_mlds_analyses(demo_spec, tmp_path):
    app = create_app({"SECRET_KEY": "x", "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/d.sqlite",
                      "EXPERIMENT_PATHS": [str(demo_spec)]})
    database.upgrade(app)
    experiments.sync_all(app)
    responses_path = demo_spec.parent / "stimuli" / "model_responses.csv"
    responses = pd.read_csv(responses_path, dtype={"category": str})
    assert set(responses["model"]) == {"cnn", "logreg", "kde", "adv_cnn"}
    _simulate(app, 5, responses_path)
    with app.app_context():
        write_export("demo", tmp_path / "export")
    database.dispose(app)
    runner = CliRunner()
    out = tmp_path / "ratings"
    result = runner.invoke(main, ["analyze", "ratings", str(tmp_path / "export"), "--models",
                                  str(responses_path), "--out", str(out), "--n-resamples", "200"])
    assert result.exit_code == 0, result.output
    scores = pd.read_csv(out / "scores.csv")
    assert {"cnn", "kde"} <= set(scores["model"])
    r = scores[scores["metric"] == "pearson_r"].set_index(["subset", "model"])["estimate"]
    # the simulated participants rate like the CNN, so the CNN must beat the other models, and on
    # controversial images (made to split CNN and KDE) the KDE must fall far behind it
    assert r.loc["all"].idxmax() == "cnn", r
    assert r.loc[("controversial", "cnn")] - r.loc[("controversial", "kde")] > 0.5, r
    result = runner.invoke(main, ["analyze", "mlds", str(tmp_path / "export" / "triads.csv"),
                                  "--out", str(tmp_path / "mlds")])
    assert result.exit_code == 0, result.output
    fits = pd.read_csv(tmp_path / "mlds" / "fits_by_sequence.csv")
    assert len(fits) == 3  # the demo's three MLDS sequences
    assert json.loads((tmp_path / "export" / "codebook.json").read_text())["triads"]
    result = runner.invoke(main, ["analyze", "ec", str(tmp_path / "export"), "--out",
                                  str(tmp_path / "ec"), "--n-boot", "100", "--n-sim", "100",
                                  "--no-figures"])
    assert result.exit_code == 0, result.output
    summary = pd.read_csv(tmp_path / "ec" / "summary.csv")
    assert set(summary["condition"]) >= {"noise15", "noise45"}  # the stimuli's noise levels
    assert summary[["ci_low", "ci_high"]].notna().all().all()
    assert pd.read_csv(tmp_path / "ec" / "matrix_demo.csv", index_col=0).shape == (5, 5)
    # the rating trials' decisions give a second, human-human kappa matrix (experiment
    # demo-ratings); with --models each model's decisions join it as observers
    assert pd.read_csv(tmp_path / "ec" / "matrix_demo-ratings.csv", index_col=0).shape == (5, 5)
    result = runner.invoke(main, ["analyze", "ec", str(tmp_path / "export"), "--models",
                                  str(responses_path), "--out", str(tmp_path / "ec_models"),
                                  "--n-resamples", "100", "--n-sim", "100", "--no-figures"])
    assert result.exit_code == 0, result.output
    matrix = pd.read_csv(tmp_path / "ec_models" / "matrix_demo-ratings.csv", index_col=0)
    assert matrix.shape == (9, 9) and {"cnn", "kde", "logreg", "adv_cnn"} <= set(matrix.index)
    pairs = pd.read_csv(tmp_path / "ec_models" / "pairs.csv")
    ratings_pairs = pairs[pairs["experiment"] == "demo-ratings"]
    informative = ratings_pairs[ratings_pairs["informative"]]
    assert len(informative) and informative[["ci_low", "ci_high"]].notna().all().all()
    # a model right on every scored image: its kappa is undefined (NaN, with the reason) by
    # default, "cnn vs humans" says so and no number is printed for it
    to_cnn = ratings_pairs[ratings_pairs["observer_b"] == "cnn"]
    assert to_cnn["kappa"].isna().all() and not to_cnn["informative"].any()
    assert to_cnn["reason"].str.contains("cnn at 100% accuracy").all()
    assert "demo-ratings: cnn vs humans kappa undefined" in result.output
    result = runner.invoke(main, ["analyze", "ec", str(tmp_path / "export"), "--models",
                                  str(responses_path), "--out", str(tmp_path / "ec_mvh"),
                                  "--n-resamples", "100", "--n-sim", "100", "--no-figures",
                                  "--degenerate", "mvh"])
    assert result.exit_code == 0, result.output
    pairs = pd.read_csv(tmp_path / "ec_mvh" / "pairs.csv")
    ratings_pairs = pairs[pairs["experiment"] == "demo-ratings"]
    assert ratings_pairs[["ci_low", "ci_high"]].notna().all().all()
    # closed form: an observer that is right on every image agrees with a person exactly on the
    # trials the person got right, so c_obs = the person's accuracy = c_exp and kappa = 0; a
    # person who was right on every image too (it happens with 5 simulated people) has c_obs = 1,
    # where model-vs-human's convention (--degenerate mvh) sets kappa = 1
    decisions = pd.read_csv(tmp_path / "export" / "decisions.csv", dtype={"category": str,
                                                                          "response": str})
    scored = decisions[(decisions["stimulus_kind"] == "natural") & ~decisions["practice"]
                       & ~decisions["is_repeat"]]
    accuracy = scored.groupby("participant")["correct"].mean()
    truth = scored.drop_duplicates("stimulus").set_index("stimulus")["category"]
    top = responses.loc[responses.groupby(["model", "stimulus"])["probability"].idxmax()]
    top = top[top["stimulus"].isin(truth.index)]
    model_right = (top.set_index("stimulus")["category"] == truth.reindex(top["stimulus"]).values)
    perfect = {m for m, ok in model_right.groupby(top["model"].values).all().items() if ok}
    assert "cnn" in perfect
    for model in perfect:
        rows = ratings_pairs[ratings_pairs["observer_b"] == model].set_index("observer_a")
        people = rows.index.intersection(accuracy.index)
        assert len(people) == 5
        assert np.allclose(rows.loc[people, "c_obs"], accuracy[people])
        expected = np.where(accuracy[people] == 1.0, 1.0, 0.0)
        assert np.allclose(rows.loc[people, "kappa"], expected, atol=1e-9)


def _partial(client, study, number: int, n_trials: int) -> str:
    """A participant who answers the first ``n_trials`` trials and leaves (the simulation's own
    answers and timing); returns the public id."""
    from humanlike.server.demo.simulate import _check

    s = study.settings
    start = _check(client.get(f"/start/{study.slug}", params={
        "PROLIFIC_PID": f"left{number}", "STUDY_ID": "s", "SESSION_ID": f"left{number}"}), "entry")
    path, _, fragment = start.headers["location"].partition("#")
    pid = path.rstrip("/").split("/")[-1]
    headers = {"Authorization": f"Bearer {fragment.removeprefix('token=')}"}
    api = f"/api/v1/participants/{pid}"
    _check(client.post(f"{api}/consent", json={"agree": True}, headers=headers), "consent")
    timeline = _check(client.get(f"{api}/timeline", headers=headers), "timeline").json()
    for entry in timeline["trials"][:n_trials]:
        body = {"trial_index": entry["index"], "trial_type": entry["type"],
                "response": study.answer(entry, False), **study.timing(entry, 60.0)}
        _check(client.post(f"{api}/trials", json=body, headers=headers), "trial")
    assert s.n_participants >= 1
    return pid


def test_one_analysed_set_gives_one_n_everywhere(demo_spec, tmp_path):
    """Completed, returned mid-way, rejected, QC-failed, researcher-included and timed-out
    participants: the export's `analysed`, the report, every analyze command and the live panel
    agree on who is analysed, and the returned participant is in none of the analyses."""
    import sqlalchemy as sa

    from humanlike.analysis.ratings.scores import load_model_responses
    from humanlike.server.demo.simulate import (
        SimulatedStudy,
        SimulationSettings,
        api_client,
        simulate_participants,
    )
    from humanlike.server.extensions import db
    from humanlike.server.live.panel import refresh
    from humanlike.server.participants.actions import set_analysis_override
    from humanlike.server.tables.core import Experiment, PanelResult, Participant

    app = create_app({"SECRET_KEY": "x", "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/d.sqlite",
                      "EXPERIMENT_PATHS": [str(demo_spec)]})
    database.upgrade(app)
    experiments.sync_all(app)
    responses_path = demo_spec.parent / "stimuli" / "model_responses.csv"
    study = SimulatedStudy(demo_spec, SimulationSettings(
        n_participants=7, observer="cnn", noise=0.2, fail_catch=2, seed=1),
        load_model_responses(responses_path))
    with api_client(app=app) as client:
        truth = simulate_participants(client, study)
        returned = _partial(client, study, 0, 25)
        timed_out = _partial(client, study, 1, 40)
    failing = [p["participant"] for p in truth.participants if p["fails_catch"]]
    good = [p["participant"] for p in truth.participants if not p["fails_catch"]]
    qc_failed, included = failing
    rejected = good[0]
    with app.app_context():
        people = {p.public_id: p for p in db.session.execute(sa.select(Participant)).scalars()}
        people[returned].status = "returned"
        people[timed_out].status = "timed_out"
        people[rejected].status = "rejected"
        set_analysis_override(people[included], "tester", "include", "catch images misread")
        db.session.commit()
        write_export("demo", tmp_path / "export")
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        assert refresh(exp, force=True)
        panel = db.session.execute(sa.select(PanelResult.result)).scalar_one()
    database.dispose(app)

    analysed = sorted([*good[1:], included])
    people = pd.read_csv(tmp_path / "export" / "participants.csv", dtype={"participant": str})
    assert sorted(people.loc[people["analysed"], "participant"]) == analysed
    reasons = people.set_index("participant")["analysed_reason"].fillna("")
    assert reasons[returned] == "returned" and reasons[timed_out] == "timed out"
    assert reasons[rejected] == "rejected" and "catch_accuracy" in reasons[qc_failed]
    sentence = (f"{len(analysed)} analysed of 9 who arrived: 6 completed, 1 returned, 1 timed out, "
                "1 rejected, 1 excluded by QC (catch_accuracy < 0.66: 1), 1 included by the "
                "researcher.")
    runner = CliRunner()
    out = tmp_path / "ratings"
    result = runner.invoke(main, ["analyze", "ratings", str(tmp_path / "export"), "--models",
                                  str(responses_path), "--out", str(out), "--n-resamples", "50"])
    assert result.exit_code == 0, result.output
    assert sentence in result.output
    assert json.loads((out / "summary.json").read_text())["analysed_participants"] == 5
    per = pd.read_csv(out / "per_participant.csv", dtype={"participant": str})
    assert sorted(per["participant"].unique()) == analysed
    result = runner.invoke(main, ["analyze", "ec", str(tmp_path / "export"), "--out",
                                  str(tmp_path / "ec"), "--n-resamples", "50", "--n-sim", "50",
                                  "--no-figures"])
    assert result.exit_code == 0, result.output
    assert sentence in result.output
    pairs = pd.read_csv(tmp_path / "ec" / "pairs.csv", dtype={"observer_a": str, "observer_b": str})
    for experiment in ("demo", "demo-ratings"):
        rows = pairs[pairs["experiment"] == experiment]
        assert sorted(set(rows["observer_a"]) | set(rows["observer_b"])) == analysed, experiment
    result = runner.invoke(main, ["analyze", "mlds", str(tmp_path / "export" / "triads.csv"),
                                  "--out", str(tmp_path / "mlds"), "--n-resamples", "0"])
    assert result.exit_code == 0, result.output
    assert sentence in result.output
    fits = pd.read_csv(tmp_path / "mlds" / "fits_by_participant.csv",
                       dtype={"participant": str})
    assert sorted(fits["participant"].unique()) == analysed
    report = tmp_path / "report.html"
    result = runner.invoke(main, [
        "report", str(tmp_path / "export"), "--models", str(responses_path), "--spec",
        str(demo_spec), "--out", str(report), "--n-resamples", "50", "--n-sim", "50"])
    assert result.exit_code == 0, result.output
    from html import escape

    html = report.read_text()
    assert escape(sentence, quote=False) in html.split('id="sample"')[1]
    methods = html.split('id="methods"')[1]
    assert escape(sentence[0].upper() + sentence[1:], quote=False) in methods
    # the Methods paragraph: design, presentation and sources of the analysed participants only
    assert "All participants saw one condition (analysed per condition: A (5))" in methods
    assert "Median trials per analysed participant and block, practice excluded: " in methods
    assert "Ratings were given on the levels 0, 0.25, 0.5, 0.75, 1 of each category." in methods
    assert "the image for 200 ms and a noise mask for 200 ms" in methods
    assert "The analysed data came from these platforms (participants): prolific (5)." in methods
    assert "measured refresh rates were " in methods
    assert panel["sample"]["sentence"] == sentence and panel["sample"]["analysed"] == 5
    assert panel["n_participants"] == panel["ec"]["n_participants"] == 5
    assert panel["mlds_scales"]["n_participants"] == 5
    qc = pd.read_csv(tmp_path / "ratings" / "qc.csv", dtype={"participant": str})
    qc = qc.set_index("participant")  # the QC record lists everyone who rated, and why not analysed
    assert qc.loc[returned, "excluded"] and qc.loc[returned, "exclusion_reasons"] == "export: returned"
    results = [*(tmp_path / "ratings").glob("*.csv"), *(tmp_path / "ec").glob("*.csv"),
               *(tmp_path / "mlds").glob("*.csv")]
    assert len(results) >= 10
    for path in results:
        if path.name != "qc.csv":
            assert returned not in path.read_text(), path


def _rating_frames(spec_path, n: int, kind: str, seed: int, noise: float = 0.25) -> pd.DataFrame:
    """The rating long form (as the export writes it, practice left out) of ``n`` participants of
    the demo, each on their own timeline: ``good`` answers as the demo's simulated observer (the
    CNN's probabilities plus Gaussian ``noise``, log-normal RTs around 1.2 s), ``random`` clicks
    a random level of a random row and moves on (~340 ms), ``uniform`` rates every row at a random
    level (both answer the catch images right, as the issue's random responder did), ``straight``
    gives the same response on every trial."""
    from humanlike.analysis.ratings.scores import load_model_responses
    from humanlike.server.demo.simulate import SimulatedStudy, SimulationSettings
    from humanlike.server.study.experiments import load_experiment
    from humanlike.server.study.timeline import generate_timeline

    loaded = load_experiment(spec_path)
    study = SimulatedStudy(spec_path, SimulationSettings(n_participants=n, noise=noise, seed=seed),
                           load_model_responses(spec_path.parent / "stimuli" / "model_responses.csv"))
    labels, levels = study.labels, np.array([0.0, 0.25, 0.5, 0.75, 1.0])
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        timeline = generate_timeline(loaded.spec, loaded.stimuli, "A", seed * 10_000 + i)
        same = dict(zip(labels, rng.choice(levels, len(labels)).tolist(), strict=True))
        for entry in timeline["trials"]:
            if entry["type"] != "rating" or entry["practice"]:
                continue
            if kind == "good":
                ratings = study.answer(entry, False)["ratings"]
                rt = study.timing(entry, 60.0)["rt_ms"]
            elif kind == "random":
                ratings = dict.fromkeys(labels, 0.0)
                ratings[labels[rng.integers(len(labels))]] = float(rng.choice(levels[1:]))
                rt = float(rng.lognormal(np.log(340), 0.3))
            elif kind == "uniform":
                ratings = dict(zip(labels, rng.choice(levels, len(labels)).tolist(), strict=True))
                rt = float(rng.lognormal(np.log(2000), 0.3))  # slow: RT alone must not catch it
            else:
                ratings, rt = same, float(rng.lognormal(np.log(1500), 0.3))
            if kind in ("random", "uniform") and entry["kind"] == "catch":
                ratings = study.answer(entry, False)["ratings"]  # passes the attention checks
            rows += [(f"{kind}{i}", entry["index"], entry["stimulus"], entry["kind"],
                      entry["is_repeat"], rt, label, value) for label, value in ratings.items()]
    return pd.DataFrame(rows, columns=["participant", "trial_index", "stimulus", "stimulus_kind",
                                       "is_repeat", "rt_ms", "category", "rating"])


def test_the_demo_rules_keep_attentive_people_and_catch_random_responders(demo_spec):
    """200 simulated attentive participants (human-like noise): at most 2% excluded; every
    random clicker, uniform rater and straight-liner excluded, by rules other than the RT floor
    too."""
    import time
    import tomllib

    from humanlike.analysis.exclusions import ExclusionRules
    from humanlike.analysis.ratings.data import attach_stimuli, clean_ratings, participant_qc
    from humanlike.server.study.experiments import load_experiment

    rules = ExclusionRules.from_mapping(tomllib.loads(demo_spec.read_text())["exclusion"])
    assert rules.max_identical_run_share and rules.min_natural_accuracy and rules.min_median_rt_ms
    stimuli = pd.DataFrame([{"stimulus": s.key, "kind": s.kind, "true_class": s.true_class}
                            for s in load_experiment(demo_spec).stimuli])
    frames = [_rating_frames(demo_spec, 200, "good", 1)] + [
        _rating_frames(demo_spec, 30, kind, seed) for kind, seed in
        (("random", 2), ("uniform", 3), ("straight", 4))]
    frame = clean_ratings(attach_stimuli(pd.concat(frames, ignore_index=True), stimuli),
                          rules.min_trial_rt_ms)
    started = time.perf_counter()
    qc = participant_qc(frame, None, rules)
    assert time.perf_counter() - started < 5  # vectorised: 290 participants in well under that
    kind = qc["participant"].str.extract(r"^([a-z]+)")[0]
    good = qc[kind == "good"]
    assert len(good) == 200 and good["excluded"].mean() <= 0.02, good.loc[
        good["excluded"], "exclusion_reasons"].tolist()
    for name in ("random", "uniform", "straight"):
        bad = qc[kind == name]
        assert len(bad) == 30 and bad["excluded"].all(), (name, bad["exclusion_reasons"].tolist())
        # still caught without the median RT floor and the catch images: natural accuracy,
        # repeats or identical runs
        others = bad["exclusion_reasons"].str.replace(
            r"(median_rt_ms|catch_accuracy) [^;]*;?", "", regex=True)
        assert (others != "").all(), name
    straight = qc[kind == "straight"]
    assert (straight["identical_run_share"] == 1.0).all()
    assert straight["exclusion_reasons"].str.contains("identical_run_share 1 > 0.25").all()

"""The live panel reads the rating array straight from the database in chunks: it must be the array
the export path gives (``write_export`` -> ``read_export(...).ratings()`` -> ``analyze_ratings``)
and the panel's numbers must be the ones ``analyze_ratings`` computes on it with the same seed.

The study has what the export path handles: practice trials, catch trials, repeated presentations,
too-fast trials, a stimulus shown twice without being marked a repeat, trials stored out of
order, a participant who stopped half way, one who only did practice trials, a QC
failure, a researcher's exclusion and a researcher's inclusion of a QC failure, natural and
controversial stimuli (strata from the targeted model pair), numeric category labels whose
numeric order differs from the spec's, and a model-responses file."""

from __future__ import annotations

import datetime as dt
import secrets
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

from humanlike.server import create_app, database
from humanlike.server.extensions import db
from humanlike.server.live import panel, panel_ratings
from humanlike.server.live.qc import refresh_qc
from humanlike.server.study import experiments
from humanlike.server.tables.core import Experiment, PanelResult, Participant, Stimulus, Trial

LABELS = ["2", "10", "1", "7"]  # the array orders them 1, 2, 7, 10
LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)
SPEC = """\
slug = "lean"
title = "Rating array from the database"
consent = "consent.md"
instructions = "instructions.md"
manifest = "stimuli/manifest.csv"
{categories}
[[blocks]]
name = "ratings"
trial_type = "rating"
kinds = ["natural", "controversial"]

[exclusion]
min_catch_accuracy = 0.5
min_trial_rt_ms = 150

[panel]
n_resamples = 150
model_responses = ["models.csv"]
"""


@pytest.fixture
def lean_app(database_url, tmp_path):
    from PIL import Image

    folder = tmp_path / "lean"
    (folder / "stimuli").mkdir(parents=True)
    rows = ["file,kind,true_class,targeted_model_1,targeted_model_2,targeted_class_1,"
            "targeted_class_2"]
    for i in range(8):
        rows.append(f"n{i}.png,natural,{LABELS[i % 4]},,,,")
    for i in range(6):
        pair = ("alexnet", "resnet") if i % 2 else ("vgg", "alexnet")
        rows.append(f"c{i}.png,controversial,,{pair[0]},{pair[1]},{LABELS[i % 4]},"
                    f"{LABELS[(i + 1) % 4]}")
    for i in range(2):
        rows.append(f"k{i}.png,catch,{LABELS[i]},,,,")
    for row in rows[1:]:
        Image.new("L", (8, 8), color=len(row)).save(folder / "stimuli" / row.split(",")[0])
    (folder / "stimuli" / "manifest.csv").write_text("\n".join(rows) + "\n")
    cats = "".join(f'[[categories]]\nlabel = "{d}"\nkey = "{k}"\n' for d, k in zip(LABELS, "abcd"))
    (folder / "experiment.toml").write_text(SPEC.format(categories=cats))
    (folder / "consent.md").write_text("consent\n")
    (folder / "instructions.md").write_text("instructions\n")
    rng = np.random.default_rng(3)
    keys = [r.split(",")[0] for r in rows[1:]]
    pd.DataFrame([{"model": m, "stimulus": k, "category": c, "probability": rng.uniform(.05, .95)}
                  for m in ("m1", "m2") for k in keys for c in LABELS]).to_csv(
        folder / "models.csv", index=False)
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "SQLALCHEMY_DATABASE_URI": database_url,
                      "EXPERIMENT_PATHS": [str(folder / "experiment.toml")]})
    database.upgrade(app)
    experiments.sync_all(app)
    yield app
    database.dispose(app)


def _trial(pid: int, index: int, sid: int, key: str, kind: str, ratings: dict, rt: float,
           practice: bool = False, repeat_of: int | None = None) -> dict:
    design = {"index": index, "type": "rating", "block": "ratings", "practice": practice,
              "stimulus": key, "kind": kind, "is_repeat": repeat_of is not None}
    return {"participant_id": pid, "trial_index": index, "trial_type": "rating", "design": design,
            "block": "ratings", "stimulus_id": sid, "response": {"ratings": ratings}, "rt_ms": rt,
            "is_repeat": repeat_of is not None, "repeat_of": repeat_of,
            "server_time": dt.datetime(2026, 1, 1, tzinfo=dt.UTC)}


def fill(app) -> None:
    """Ten participants; see the module docstring for who is who."""
    rng = np.random.default_rng(11)
    with app.app_context():
        exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == "lean")).scalar_one()
        stimuli = db.session.execute(sa.select(Stimulus.id, Stimulus.key, Stimulus.kind, Stimulus.true_class)
                                     .where(Stimulus.experiment_id == exp.id)
                                     .order_by(Stimulus.key.desc())).all()
        scored = [s for s in stimuli if s.kind != "catch"]
        catch = [s for s in stimuli if s.kind == "catch"]
        for j in range(10):
            p = Participant(public_id=secrets.token_hex(8), experiment_id=exp.id, platform="local",
                            platform_id=f"lean{j}", condition="default", token_hash="0" * 64,
                            seed=j, timeline={}, n_trials=20, status="completed",
                            created_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
            if j == 7:
                p.analysis_override, p.analysis_override_reason = "exclude", "looked away"
            if j == 8:
                p.analysis_override, p.analysis_override_reason = "include", "catch images too hard"
            db.session.add(p)
            db.session.flush()

            def ratings():
                return {lab: float(rng.choice(LEVELS)) for lab in LABELS}

            trials = [_trial(p.id, i, s.id, s.key, s.kind, ratings(), 900.0, practice=True)
                      for i, s in enumerate(scored[:2])]
            order = rng.permutation(len(scored))
            if j == 6:  # stopped half way (and never saw a catch image)
                order = order[: len(order) // 2]
            for s in (scored[i] for i in order):
                rt = 60.0 if rng.random() < 0.1 else float(rng.uniform(400, 3000))
                trials.append(_trial(p.id, len(trials), s.id, s.key, s.kind, ratings(), rt))
            if j != 6:
                for s in catch:  # participants 5 and 8 rate the wrong category highest
                    wrong = j in (5, 8)
                    top = LABELS[(LABELS.index(s.true_class) + 1) % 4] if wrong else s.true_class
                    trials.append(_trial(p.id, len(trials), s.id, s.key, s.kind,
                                         {lab: float(lab == top) for lab in LABELS}, 800.0))
                for first in (2, 3):  # two repeated presentations
                    again = trials[first]
                    s = next(x for x in scored if x.id == again["stimulus_id"])
                    trials.append(_trial(p.id, len(trials), s.id, s.key, s.kind, ratings(), 700.0,
                                         repeat_of=first))
            if j == 9:  # practice only
                trials = trials[:2]
            if j == 4:  # saw a stimulus twice, not as a marked repeat: the later trial counts
                again = trials[2]
                s = next(x for x in scored if x.id == again["stimulus_id"])
                trials.append(_trial(p.id, len(trials), s.id, s.key, s.kind, ratings(), 950.0))
            if j in (3, 4):  # stored out of trial order
                trials = trials[::-1]
            db.session.execute(sa.insert(Trial), trials)
        db.session.commit()


def experiment() -> Experiment:
    return db.session.execute(sa.select(Experiment).where(Experiment.slug == "lean")).scalar_one()


def export_path_analysis(exp: Experiment, tmp: Path):
    """What the panel computed before: a fresh export read back and ``analyze_ratings`` on it."""
    from humanlike.analysis.exclusions import ExclusionRules
    from humanlike.analysis.io.export import read_export
    from humanlike.analysis.ratings.analysis import analyze_ratings
    from humanlike.analysis.ratings.scores import load_model_responses
    from humanlike.server.export.writer import write_export

    write_export(exp.slug, tmp, raw_parquet=False)
    data = read_export(tmp)
    rules = ExclusionRules.from_mapping(exp.spec.get("exclusion", {}))
    return analyze_ratings(
        data.ratings(), load_model_responses(Path(exp.root) / "models.csv"),
        participants=data.participants, rules=ExclusionRules(min_trial_rt_ms=rules.min_trial_rt_ms),
        n_resamples=150, confidence_level=0.95, alpha=0.05, random_state=0, n_jobs=1)


def test_the_array_read_in_chunks_is_the_export_paths_array_and_gives_its_numbers(
        lean_app, tmp_path, monkeypatch):
    fill(lean_app)
    monkeypatch.setattr(panel_ratings, "CHUNK_ROWS", 7)  # many chunks
    with lean_app.app_context():
        exp = experiment()
        refresh_qc(exp)
        before = export_path_analysis(exp, tmp_path / "export")
        lean = panel_ratings.panel_ratings(exp, 150.0)
        result = panel.compute(exp)
    old, new = before.ratings, lean.array
    assert new.participants == old.participants and new.stimuli == old.stimuli
    assert new.categories == old.categories == ("1", "2", "7", "10")
    assert new.kinds == old.kinds and new.strata == old.strata
    assert "alexnet vs resnet" in new.strata and "alexnet vs vgg" in new.strata
    np.testing.assert_array_equal(new.values, old.values)  # NaN where the other has NaN
    assert np.isnan(new.values).any()  # too-fast trials and the participant who stopped
    assert len(new.participants) == 7  # 10 - practice only - QC failure - researcher exclusion
    assert lean.n_rated == len(before.qc) == 9
    assert result["n_excluded"] == lean.n_excluded == int(before.qc["excluded"].sum()) == 2
    assert result["n_participants"] == 7
    boot = before.bootstrap
    expected = {
        "ceilings": panel._records(boot.ceilings[boot.ceilings["metric"] == "pearson_r"],
                                   ["subset", "bound", "estimate", "ci_low", "ci_high"]),
        "scores": panel._records(boot.scores[boot.scores["metric"] == "pearson_r"],
                                 ["subset", "model", "estimate", "ci_low", "ci_high"]),
        "comparisons": panel._records(
            boot.comparisons[boot.comparisons["metric"] == "pearson_r"],
            ["subset", "a", "b", "difference", "ci_low", "ci_high", "p_holm_sidak", "significant"]),
    }
    for key, rows in expected.items():
        assert result[key] == rows, key  # exactly: the same array, the same random numbers
    assert {r["subset"] for r in result["ceilings"]} == {"all", "natural", "controversial"}


def more_trials(exp: Experiment) -> None:
    """Participant lean6 (who stopped half way) rates the rest; a new participant rates all."""
    rng = np.random.default_rng(5)
    stimuli = db.session.execute(sa.select(Stimulus).where(Stimulus.experiment_id == exp.id)
                                 .order_by(Stimulus.key)).scalars().all()
    halfway = db.session.execute(sa.select(Participant).where(
        Participant.platform_id == "lean6")).scalar_one()
    seen = set(db.session.execute(sa.select(Trial.stimulus_id).where(
        Trial.participant_id == halfway.id)).scalars())
    stored = len(seen)
    rows = []
    for s in (x for x in stimuli if x.id not in seen and x.kind != "catch"):
        rows.append(_trial(halfway.id, 100 + len(rows), s.id, s.key, s.kind,
                           {lab: float(rng.choice(LEVELS)) for lab in LABELS}, 1100.0))
    newcomer = Participant(public_id=secrets.token_hex(8), experiment_id=exp.id, platform="local",
                           platform_id="lean10", condition="default", token_hash="0" * 64, seed=10,
                           timeline={}, n_trials=20, status="completed",
                           created_at=dt.datetime(2026, 1, 2, tzinfo=dt.UTC))
    db.session.add(newcomer)
    db.session.flush()
    for i, s in enumerate(stimuli):
        top = s.true_class if s.kind == "catch" else None
        ratings = ({lab: float(lab == top) for lab in LABELS} if top
                   else {lab: float(rng.choice(LEVELS)) for lab in LABELS})
        rows.append(_trial(newcomer.id, i, s.id, s.key, s.kind, ratings, 1200.0))
    assert stored and len(rows) > len(stimuli)
    db.session.execute(sa.insert(Trial), rows)
    db.session.commit()


def test_a_pass_reads_only_the_participants_whose_trials_changed(lean_app, tmp_path, monkeypatch):
    """The cells of participants whose stored trials did not change are reused; the array is
    still the export path's after new trials, a new participant and a researcher's decision."""
    monkeypatch.setattr(panel_ratings, "IDS_PER_QUERY", 1)  # the two changed: two queries
    monkeypatch.setattr(panel_ratings, "CHUNK_ROWS", 7)
    fill(lean_app)
    with lean_app.app_context():
        exp = experiment()
        # every stored rating trial comes through the reader (a streaming SQLAlchemy result once
        # kept each query's first row in its own buffer, and the reader lost it)
        stored = db.session.execute(sa.select(sa.func.count()).select_from(Trial).where(
            Trial.trial_type == "rating")).scalar_one()
        chunks = list(panel_ratings.rating_chunks(exp))
        assert sum(map(len, chunks)) == stored and len(chunks) == -(-stored // 7)
        refresh_qc(exp)
        first = panel_ratings.panel_ratings(exp, 150.0)
        again = panel_ratings.panel_ratings(exp, 150.0)
        assert (first.n_read, again.n_read) == (10, 0)
        np.testing.assert_array_equal(again.array.values, first.array.values)

        more_trials(exp)
        refresh_qc(exp)
        grown = panel_ratings.panel_ratings(exp, 150.0)
        # the newcomer passes; lean6, done now, still passes
        assert grown.n_read == 2 and len(grown.array.participants) == 8
        expected = export_path_analysis(exp, tmp_path / "grown").ratings
        assert grown.array.participants == expected.participants
        assert grown.array.stimuli == expected.stimuli
        np.testing.assert_array_equal(grown.array.values, expected.values)

        person = db.session.execute(sa.select(Participant).where(
            Participant.platform_id == "lean0")).scalar_one()
        person.analysis_override, person.analysis_override_reason = "exclude", "test"
        db.session.commit()
        decided = panel_ratings.panel_ratings(exp, 150.0)
        assert decided.n_read == 0 and len(decided.array.participants) == 7
        expected = export_path_analysis(exp, tmp_path / "decided").ratings
        assert decided.array.participants == expected.participants
        np.testing.assert_array_equal(decided.array.values, expected.values)

        panel_ratings._CELLS.clear()  # a fresh process reads everyone: the same array
        fresh = panel_ratings.panel_ratings(exp, 150.0)
        assert fresh.n_read == 11
        np.testing.assert_array_equal(fresh.array.values, decided.array.values)


def test_too_few_passing_participants_give_the_analysis_error(lean_app):
    fill(lean_app)
    with lean_app.app_context():
        exp = experiment()
        refresh_qc(exp)
        for p in db.session.execute(sa.select(Participant)).scalars():
            if p.platform_id not in ("lean0", "lean9"):
                p.analysis_override, p.analysis_override_reason = "exclude", "test"
        db.session.commit()
        result = panel.compute(exp)
    assert result["kind"] == "ratings" and result["n_participants"] == 0
    assert result["error"].startswith("only 1 participant(s) pass QC")
    assert "export: researcher: test" in result["error"]


def test_a_changed_spec_recomputes_the_stored_qc_the_panel_excludes_by(lean_app):
    fill(lean_app)
    with lean_app.app_context():
        assert panel.refresh(experiment(), "w")
        assert db.session.get(PanelResult, experiment().id).result["n_excluded"] == 2
    spec = Path(lean_app.config["EXPERIMENT_PATHS"][0])
    spec.write_text(spec.read_text().replace("min_catch_accuracy = 0.5\n", ""))
    edited = create_app({"TESTING": True, "SECRET_KEY": "t", "ALLOW_SPEC_CHANGE": True,
                         "SQLALCHEMY_DATABASE_URI": lean_app.config["SQLALCHEMY_DATABASE_URI"],
                         "EXPERIMENT_PATHS": [str(spec)]})
    try:
        assert experiments.sync_all(edited) == []
        with edited.app_context():
            assert panel.refresh(experiment(), "w")  # the spec hash is part of the data version
            result = db.session.get(PanelResult, experiment().id).result
    finally:
        database.dispose(edited)
    assert result["n_excluded"] == 1  # the researcher's exclusion; the catch rule is gone
    assert result["n_participants"] == 8


def test_the_stored_qc_read_from_plain_rows_is_the_exports_qc(lean_app):
    """``refresh_qc`` reads only what the QC needs (plain rows, JSON parsed by Arrow) and builds only
    the ratings table; its numbers must be those of the export's participants table."""
    import math

    from humanlike.server.export.writer import export_frames
    from humanlike.server.tables.core import ParticipantQC

    fill(lean_app)
    with lean_app.app_context():
        exp = experiment()
        assert refresh_qc(exp) == 10
        people = export_frames(exp.slug)["participants"].set_index("participant")
        rows = db.session.execute(sa.select(Participant.public_id, ParticipantQC)
                                  .join(ParticipantQC)).all()
    assert len(rows) == 10
    for public_id, qc in rows:
        row = people.loc[public_id]
        assert qc.n_stored == row["n_stored"]
        for column in ("catch_accuracy", "repeat_reliability", "median_rt_ms"):
            expected = row[column]
            if isinstance(expected, float) and math.isnan(expected):
                assert getattr(qc, column) is None, column
            else:
                assert getattr(qc, column) == expected, column  # the same numbers, exactly
        override = "researcher" in str(row["exclusion_reasons"])
        if not override:  # the export's table has the researcher's decisions applied on top
            assert qc.qc_failed == bool(row["excluded"])
            assert qc.qc_reasons == (row["exclusion_reasons"] or "")
    assert sum(qc.qc_failed for _, qc in rows) == 2  # participants 5 and 8 fail the catch rule

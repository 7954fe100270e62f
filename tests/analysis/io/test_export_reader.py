"""The export reader applies exclusions once and the same way: a practice trial and an excluded
participant change no ratings, error-consistency or MLDS result (`include_excluded` brings the
participant back)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from humanlike.analysis.io.export import read_export
from humanlike.analysis.mlds.simulate import simulate_responses
from humanlike.analysis.ratings.simulation import simulate_rating_experiment
from humanlike.cli import main
from humanlike.stimuli.mlds_design import triad_design

META = ["true_class", "targeted_model_1", "targeted_model_2", "targeted_class_1", "targeted_class_2"]


def _participants(ids, excluded=()) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "participant": list(ids),
            "duration_s": 900.0,
            "excluded": [p in excluded for p in ids],
            "exclusion_reasons": ["catch_accuracy 0 < 0.5" if p in excluded else "" for p in ids],
        }
    )


def _invoke(args: list[str]) -> str:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return result.output


def _same_csvs(a: Path, b: Path, names: list[str]) -> None:
    for name in names:
        pd.testing.assert_frame_equal(pd.read_csv(a / name), pd.read_csv(b / name), obj=name)


@pytest.fixture(scope="module")
def rating_exports(tmp_path_factory):
    """The same rating export twice; the second adds a practice trial and an excluded participant."""
    sim = simulate_rating_experiment(
        n_participants=7, n_natural=6, n_per_pair=2, n_models=3, n_categories=5,
        missing=0.05, random_state=50,
    )  # fmt: skip
    ratings = sim.ratings.drop(columns=META).assign(practice=False)
    ids = sorted(ratings["participant"].unique())
    first = ratings[ratings["participant"] == ids[0]]
    practice = first[first["trial_index"] == first["trial_index"].min()].assign(
        practice=True, trial_index=-1, stimulus="practice/0000", rating=1.0
    )
    intruder = first.assign(participant="p999", rating=1.0 - first["rating"])
    root = tmp_path_factory.mktemp("rating-exports")
    for name, frame, people in (
        ("clean", ratings, _participants(ids)),
        ("noisy", pd.concat([practice, ratings, intruder]), _participants([*ids, "p999"], {"p999"})),
    ):
        folder = root / name
        folder.mkdir()
        frame.to_csv(folder / "ratings.csv", index=False)
        sim.stimuli.to_csv(folder / "stimuli.csv", index=False)
        people.to_csv(folder / "participants.csv", index=False)
    sim.models.to_csv(root / "models.csv", index=False)
    return root


def _ratings(root: Path, name: str, out: Path, *extra: str) -> dict:
    _invoke(["analyze", "ratings", str(root / name), "--models", str(root / "models.csv"),
             "--out", str(out), "--n-resamples", "100", "--n-jobs", "1", *extra])  # fmt: skip
    return json.loads((out / "summary.json").read_text())


def test_practice_trial_and_excluded_participant_change_no_ratings_result(rating_exports, tmp_path):
    clean = _ratings(rating_exports, "clean", tmp_path / "clean")
    noisy = _ratings(rating_exports, "noisy", tmp_path / "noisy")
    tables = ["scores.csv", "noise_ceiling.csv", "comparisons.csv", "per_participant.csv",
              "reliability.csv"]  # fmt: skip
    _same_csvs(tmp_path / "clean", tmp_path / "noisy", tables)
    assert noisy["participants"] == clean["participants"] + 1 and noisy["excluded"] == 1
    assert noisy["analysed_participants"] == clean["analysed_participants"] == 7
    assert noisy["stimuli"] == clean["stimuli"]  # the practice image is not scored


def test_include_excluded_brings_the_excluded_rater_back(rating_exports, tmp_path):
    summary = _ratings(rating_exports, "noisy", tmp_path / "o", "--include-excluded")
    assert summary["excluded"] == 0 and summary["analysed_participants"] == 8


def _classifications(folder: Path, noisy: bool) -> None:
    rng = np.random.default_rng(0)
    rows = []
    people = ["p01", "p02", "p03", "p04"] if noisy else ["p01", "p02", "p03"]
    for p in people:
        for i in range(40):
            rows.append({"experiment": "digits", "participant": p, "trial_index": i,
                         "practice": False, "stimulus": f"natural/d{i:02d}.png",
                         "stimulus_kind": "natural", "is_repeat": False,
                         "correct": bool(rng.random() < 0.7)})  # fmt: skip
    if noisy:
        rows.append({**rows[0], "trial_index": -1, "practice": True, "correct": not rows[0]["correct"]})
    folder.mkdir()
    pd.DataFrame(rows).to_csv(folder / "classifications.csv", index=False)
    _participants(people, {"p04"}).to_csv(folder / "participants.csv", index=False)


def test_practice_trial_and_excluded_participant_change_no_error_consistency(tmp_path):
    _classifications(tmp_path / "clean", noisy=False)
    _classifications(tmp_path / "noisy", noisy=True)
    for name in ("clean", "noisy"):
        _invoke(["analyze", "ec", str(tmp_path / name), "--out", str(tmp_path / f"{name}-out"),
                 "--n-boot", "100", "--n-sim", "100", "--no-figures"])  # fmt: skip
    _same_csvs(tmp_path / "clean-out", tmp_path / "noisy-out",
               ["pairs.csv", "summary.csv", "matrix_digits.csv"])  # fmt: skip
    _invoke(["analyze", "ec", str(tmp_path / "noisy"), "--out", str(tmp_path / "all"),
             "--n-boot", "20", "--n-sim", "20", "--no-figures", "--include-excluded"])  # fmt: skip
    pairs = pd.read_csv(tmp_path / "all" / "pairs.csv")
    assert "p04" in set(pairs["observer_a"]) | set(pairs["observer_b"])


def _triads(folder: Path, noisy: bool) -> None:
    rng, other = np.random.default_rng(0), np.random.default_rng(1)
    frames = []
    for seq, gamma in (("cat-dog", 0.7), ("car-bus", 1.8)):
        psi = (np.arange(7) / 6) ** gamma
        for p in range(5 if noisy else 4):
            gen = other if p == 4 else rng  # the excluded participant leaves the others unchanged
            d = triad_design(7, repeats=3, rng=gen)
            d["response"] = simulate_responses(d[["s1", "s2", "s3"]].to_numpy(), psi, 0.12,
                                               random_state=gen)  # fmt: skip
            if p == 4:  # and answers the other way round
                d["response"] = 1 - d["response"]
            frames.append(d.assign(sequence=seq, participant=f"p{p:02d}", practice=False))
    triads = pd.concat(frames, ignore_index=True)
    if noisy:
        practice = triads.iloc[[0]].assign(practice=True, response=1 - triads["response"].iloc[0])
        triads = pd.concat([practice, triads], ignore_index=True)
    folder.mkdir()
    triads.to_csv(folder / "triads.csv", index=False)
    people = sorted(triads["participant"].unique())
    _participants(people, {"p04"}).to_csv(folder / "participants.csv", index=False)


def test_practice_trial_and_excluded_participant_change_no_mlds_scale(tmp_path):
    _triads(tmp_path / "clean", noisy=False)
    _triads(tmp_path / "noisy", noisy=True)
    for name in ("clean", "noisy"):
        output = _invoke(["analyze", "mlds", str(tmp_path / name / "triads.csv"), "--out",
                          str(tmp_path / f"{name}-out"), "--n-boot", "50"])  # fmt: skip
    assert "dropped 1 excluded participants" in output
    _same_csvs(tmp_path / "clean-out", tmp_path / "noisy-out",
               ["scales_by_sequence.csv", "fits_by_sequence.csv", "fits_by_participant.csv"])
    _invoke(["analyze", "mlds", str(tmp_path / "noisy" / "triads.csv"), "--out",
             str(tmp_path / "all"), "--n-boot", "0", "--include-excluded"])  # fmt: skip
    fits = pd.read_csv(tmp_path / "all" / "fits_by_participant.csv")
    assert "p04" in set(fits["participant"])


def test_the_reader_reads_the_exports_qc_and_does_not_recompute_it(tmp_path):
    _classifications(tmp_path / "e", noisy=True)
    people = pd.read_csv(tmp_path / "e" / "participants.csv")
    people.assign(excluded=people["participant"] == "p02").to_csv(
        tmp_path / "e" / "participants.csv", index=False
    )
    export = read_export(tmp_path / "e")
    assert export.excluded_participants() == {"p02"}
    kept = export.classifications().frame
    assert set(kept["participant"]) == {"p01", "p03", "p04"} and not kept["practice"].any()
    everyone = read_export(tmp_path / "e", include_excluded=True).classifications().frame
    assert set(everyone["participant"]) == {"p01", "p02", "p03", "p04"}

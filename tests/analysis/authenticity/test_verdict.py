"""The verdict on real human observers (model-vs-human, shared data) and on one agent of each
type built from them: the humans pass, every agent is flagged, each for its own reason."""

import numpy as np
import pandas as pd
import pytest

from humanlike.analysis.authenticity.agents import lazy_agent, model_agent, replay_agent
from humanlike.analysis.authenticity.verdict import (
    COLUMNS,
    ScreenInput,
    export_columns,
    screen,
    verdicts,
)
from humanlike.analysis.data_paths import shared_data_dir
from humanlike.analysis.io.model_vs_human import read_model_vs_human


@pytest.fixture(scope="module")
def contrast():
    """The contrast experiment: 4 observers, 8 contrast levels x 160 images, 3 models."""
    frame = read_model_vs_human(shared_data_dir() / "model-vs-human" / "raw-data" / "contrast")
    frame = frame.rename(columns={"observer": "participant"})
    humans = frame[frame["group"] == "human"]
    models = frame[frame["group"] == "model"].rename(columns={"participant": "model"})
    return humans, models[["model", "stimulus", "response"]]


@pytest.fixture(scope="module")
def screened(contrast):
    humans, models = contrast
    rng = np.random.default_rng(7)
    first = humans[humans["participant"] == "subject-01"]
    agents = [model_agent(first, models[models["model"] == "resnet50"], "agent-model", rng),
              replay_agent(first, "agent-replay", rng),
              lazy_agent(first, "agent-lazy", "bird", rng)]
    return screen(ScreenInput(pd.concat([humans, *agents]), models))


def test_the_real_observers_pass_and_show_their_psychophysics(screened):
    humans = screened.loc[[f"subject-0{i}" for i in range(1, 5)]]
    assert (humans["authenticity"] == "pass").all()
    assert (humans["authenticity_reasons"] == "").all()
    # accuracy rises with contrast for every real observer (8 levels)
    assert (humans["difficulty_z"] > 5).all()
    assert (humans["ec_model_kappa"] < 0.4).all() and (humans["stimulus_z"] > 30).all()


def test_each_agent_is_flagged_for_its_own_reason(screened):
    assert (screened.loc[["agent-model", "agent-replay", "agent-lazy"], "authenticity"]
            == "flagged").all()
    model = screened.loc["agent-model"]
    assert model["ec_model"] == "resnet50" and model["ec_model_kappa"] == 1.0
    assert model["authenticity_reasons"].startswith("EC with model resnet50 1.00, above the human "
                                                    "reference")
    # its RTs are a human's: the timing does not give it away
    assert model["rt_cv"] > 0.15
    replay = screened.loc["agent-replay"]
    assert "answers do not depend on the image" in replay["authenticity_reasons"]
    assert abs(replay["stimulus_kappa"]) < 0.05
    assert "accuracy does not change with difficulty" in replay["authenticity_reasons"]
    lazy = screened.loc["agent-lazy"]
    assert lazy["stimulus_kappa"] == pytest.approx(0.0) and lazy["rt_cv"] < 0.01
    assert "reaction times too regular for a person" in lazy["authenticity_reasons"]


def test_input_provenance_is_decisive_and_a_missing_record_is_not_suspicious():
    table = pd.DataFrame({"stimulus_z": [40.0, 40.0, 40.0, np.nan], "rt_cv": 0.3,
                          "untrusted_inputs": [0, 3, np.nan, np.nan],
                          "webdriver": [False, False, True, np.nan]},
                         index=pd.Index(["human", "synthetic", "automated", "few"], name="participant"))
    out = verdicts(table)
    assert out["authenticity"].tolist() == ["pass", "flagged", "flagged", "pass"]
    assert out.loc["synthetic", "authenticity_reasons"] == "3 synthetic input events (isTrusted false)"
    table.loc["few", "rt_cv"] = np.nan
    assert verdicts(table).loc["few", "authenticity"] == "not_screened"


def test_export_columns_are_the_codebook(screened):
    out = export_columns(screened)
    assert list(out.columns) == list(COLUMNS)
    assert out.loc["agent-model", "auth_ec_model"] == "resnet50"
    assert out.loc["subject-01", "authenticity"] == "pass"


def test_a_model_kappa_significant_only_at_005_asks_for_review_not_a_flag():
    # the scripted browser agent on the demo: kappa 1 with the accurate cnn, p 0.017 (few errors)
    table = pd.DataFrame({"stimulus_z": [18.3], "rt_cv": [0.28], "ec_model": ["cnn"],
                          "ec_model_kappa": [1.0], "ec_model_p": [0.017], "ec_reference": [0.4]},
                         index=pd.Index(["agent"], name="participant"))
    out = verdicts(table)
    assert out.loc["agent", "authenticity"] == "review"
    assert out.loc["agent", "authenticity_reasons"] == (
        "EC with model cnn 1.00, above the human reference 0.40 (p = 0.02), not decisive")
    assert verdicts(table.assign(ec_model_p=0.2)).loc["agent", "authenticity"] == "pass"

"""Model observers answer triads by feature distance and are fitted like participants."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from humanlike.analysis.mlds.batch import fit_many
from humanlike.stimuli.mlds_design import triad_design
from humanlike.stimuli.observers import model_observer_triads, observer_triads


def manifest_for(features_by_sequence: dict[str, np.ndarray]) -> pd.DataFrame:
    rows = []
    for seq, feats in features_by_sequence.items():
        rows += [{"file": f"{seq}/{lv}.png", "kind": "mlds", "sequence": seq, "level": lv}
                 for lv in range(1, len(feats) + 1)]
    return pd.DataFrame(rows)


def test_observer_chooses_the_comparison_nearer_to_the_reference():
    feats = np.array([[0.0], [1.0], [5.0], [5.5]])  # levels 1..4 on a line
    manifest = manifest_for({"s": feats})
    design = pd.DataFrame({"s1": [1, 2, 1], "s2": [2, 3, 3], "s3": [3, 4, 4],
                           "swapped": [True, False, True]})
    out = observer_triads(feats, manifest, design, observer="line")
    # (1,2,3): d12 = 1 < d23 = 4 -> pair (2,3) differs more -> response 1
    # (2,3,4): d12 = 4 > d23 = 0.5 -> 0; (1,3,4): d12 = 5 > d23 = 0.5 -> 0
    assert out["response"].tolist() == [1, 0, 0]
    assert out["swapped"].tolist() == [True, False, True]
    assert list(out.columns) == ["participant", "sequence", "s1", "s2", "s3", "response",
                                 "swapped", "trial_type"]
    assert (out["participant"] == "line").all()


def test_a_design_without_sequence_is_applied_to_every_sequence():
    feats = {"a": np.arange(7.0)[:, None], "b": (np.arange(7.0) ** 2)[:, None]}
    manifest = manifest_for(feats)
    out = observer_triads(np.vstack(list(feats.values())), manifest, triad_design(7, rng=0))
    assert out.groupby("sequence").size().to_dict() == {"a": 35, "b": 35}


def test_ties_are_broken_by_a_fair_coin():
    feats = np.zeros((3, 2))
    design = pd.DataFrame({"s1": [1] * 2000, "s2": [2] * 2000, "s3": [3] * 2000})
    out = observer_triads(feats, manifest_for({"s": feats}), design, random_state=0)
    assert out["response"].mean() == pytest.approx(0.5, abs=0.04)


def test_noisy_feature_observer_recovers_the_feature_scale_when_fitted():
    """Features on a power curve psi = (level/6)^2 with decision noise: the fitted standard scale
    of the model observer is that curve."""
    psi = (np.arange(7) / 6) ** 2
    feats = psi[:, None] * np.array([[3.0, 4.0]])  # distances along a line = 5 * |dpsi|
    design = triad_design(7, replications=60, rng=1)
    out = observer_triads(feats, manifest_for({"s": feats}), design, decision_noise=0.5,
                          random_state=2)
    fits = fit_many(out)
    assert fits.converged[0]
    np.testing.assert_allclose(fits.scale_std[0], psi, atol=0.04)


def test_model_observer_runs_a_torch_model_on_the_manifest_images(tmp_path):
    torch = pytest.importorskip("torch")
    rows = []
    for lv in range(1, 8):
        value = round(255 * ((lv - 1) / 6) ** 2)
        Image.fromarray(np.full((8, 8), value, np.uint8)).save(tmp_path / f"l{lv}.png")
        rows.append({"file": f"l{lv}.png", "kind": "mlds", "sequence": "grey", "level": lv})
    pd.DataFrame(rows).to_csv(tmp_path / "manifest.csv", index=False)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Identity())
    out = model_observer_triads(model, tmp_path / "manifest.csv", triad_design(7, rng=0),
                                layer="0")
    assert (out["participant"] == "Sequential:0").all()
    # brightness grows as (level/6)^2, so the brighter pair is always the more different one
    s = out[["s1", "s2", "s3"]].to_numpy()
    b = ((s - 1) / 6) ** 2
    np.testing.assert_array_equal(out["response"], (b[:, 2] - b[:, 1] > b[:, 1] - b[:, 0]
                                                    ).astype(int))


def test_design_levels_missing_from_the_manifest_are_reported():
    feats = np.zeros((3, 1))
    design = pd.DataFrame({"s1": [1], "s2": [2], "s3": [5]})
    with pytest.raises(ValueError, match="levels must lie in 1..3"):
        observer_triads(feats, manifest_for({"s": feats}), design)


def test_model_observer_from_a_model_toml_sees_the_declared_normalisation(tmp_path):
    torch = pytest.importorskip("torch")
    from .test_model_spec import HERE
    from .torchvision_like import tiny_cnn

    rows = []
    for lv in range(1, 8):
        value = round(255 * ((lv - 1) / 6) ** 2)
        Image.fromarray(np.full((4, 4), value, np.uint8)).convert("RGB").save(tmp_path / f"l{lv}.png")
        rows.append({"file": f"l{lv}.png", "kind": "mlds", "sequence": "grey", "level": lv})
    pd.DataFrame(rows).to_csv(tmp_path / "manifest.csv", index=False)
    toml = tmp_path / "tiny.toml"
    toml.write_text(
        f'[model]\nentry_point = "torchvision_like:tiny_cnn"\npython_path = ["{HERE}"]\n'
        "[input]\nsize = 8\nchannels = 3\nmean = 0.5\nstd = 0.25\n"
        '[classes]\nnames = ["a", "b", "c", "d"]\n'
    )
    design = triad_design(7, rng=0)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        out = model_observer_triads(toml, tmp_path / "manifest.csv", design, layer="1")
        torch.manual_seed(0)
        net = tiny_cnn()
    assert (out["participant"] == "tiny:1").all()
    # The same responses from the bare network on normalised, resized images (layer "1": ReLU).
    grey = ((np.arange(7) / 6) ** 2 * 255).round() / 255
    images = np.repeat(grey[:, None, None, None], 3, axis=1) * np.ones((1, 1, 8, 8))
    with torch.no_grad():
        feats = torch.relu(net[0]((torch.from_numpy(images).float() - 0.5) / 0.25)).flatten(1)
    expected = observer_triads(feats.numpy(), pd.read_csv(tmp_path / "manifest.csv"), design)
    np.testing.assert_array_equal(out["response"], expected["response"])

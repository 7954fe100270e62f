"""``humanlike analyze ka``: files in, curves / AUC tables / figure out."""

from __future__ import annotations

import sys
import types

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from humanlike.analysis.kernel.protocol import balanced_subsets, kernel_analysis_protocol
from humanlike.cli import main

N_PER_CLASS, CLASSES = 15, ("cat", "dog", "car")


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    labels = np.repeat(CLASSES, N_PER_CLASS)
    ids = np.array([f"im{i:02d}.png" for i in range(labels.size)])
    codes = np.repeat(np.arange(3), N_PER_CLASS)
    good = rng.standard_normal((labels.size, 5)) + 2 * np.eye(5)[codes]
    frame = pd.DataFrame(good, columns=[f"f{j}" for j in range(5)])
    frame.insert(0, "image", ids)
    # Rows shuffled: the CLI must align every representation by image id.
    frame.sample(frac=1.0, random_state=1).to_csv(tmp_path / "model.csv", index=False)
    rates = rng.poisson(5 + 3 * np.eye(4)[codes % 4].T, size=(4, labels.size)).astype(float)
    neural = pd.DataFrame(rates, columns=ids)
    neural.insert(0, "blank", [1.0, 2.0, 0.5, 1.5])
    neural.insert(0, "site", ["s1", "s2", "s3", "s4"])
    neural.to_csv(tmp_path / "IT.csv", index=False)
    pd.DataFrame({"image": ids, "label": labels}).to_csv(tmp_path / "labels.csv", index=False)
    return tmp_path, ids, labels, good, rates, codes


def test_cli_writes_curves_auc_tables_and_figure_matching_the_library(files):
    tmp, _, labels, good, rates, _ = files
    out = tmp / "out"
    args = ["analyze", "ka", str(tmp / "model.csv"), "--neural", str(tmp / "IT.csv"),
            "--labels", str(tmp / "labels.csv"), "--out", str(out), "--subsets", "3"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    for name in ("ka_curves.csv", "ka_auc.csv", "ka_auc_subsets.csv", "ka_subsets.csv",
                 "ka_auc.md", "ka_curves.png"):  # fmt: skip
        assert (out / name).stat().st_size > 0
    subsets = balanced_subsets(labels, n_subsets=3, random_state=0)
    blank = np.array([1.0, 2.0, 0.5, 1.5])[:, None]
    it = ((rates - blank) / rates.std(axis=1, ddof=1, keepdims=True)).T
    expected = {
        "model": kernel_analysis_protocol(good, labels, subsets=subsets),
        "IT": kernel_analysis_protocol(it, labels, subsets=subsets),
    }
    auc = pd.read_csv(out / "ka_auc.csv").set_index("representation")
    for name, r in expected.items():
        assert auc.loc[name, "auc_mean"] == pytest.approx(r.auc_mean, abs=1e-10)
        assert auc.loc[name, "auc_sd"] == pytest.approx(r.auc_sd, abs=1e-10)
    curves = pd.read_csv(out / "ka_curves.csv")
    assert len(curves) == 2 * 3 * (subsets.shape[1] + 1)
    members = pd.read_csv(out / "ka_subsets.csv")
    assert members.groupby(["subset", "label"]).size().eq(12).all()  # 80% of 15 per class
    assert "| model |" in result.output and "| IT |" in result.output


def test_cli_computes_features_of_a_torch_model_over_a_manifest(files, monkeypatch):
    torch = pytest.importorskip("torch")
    tmp, ids, labels, *_ = files
    pd.DataFrame({"file": ids, "kind": "natural", "true_class": labels}).to_csv(
        tmp / "manifest.csv", index=False
    )
    rng = np.random.default_rng(2)
    codes = np.repeat(np.arange(3), N_PER_CLASS)
    images = (rng.random((ids.size, 3, 4, 4)) + codes[:, None, None, None]).astype(np.float32)
    calls = {}

    def load_manifest_images(manifest_csv, size=None):
        calls["manifest"] = (str(manifest_csv), size)
        return list(ids), images

    def extract_features(model, imgs, *, layer=None, batch_size=64, device=None):
        calls.setdefault("layers", []).append(layer)
        calls["device"] = device
        with torch.no_grad():
            return model(torch.from_numpy(imgs)).numpy()

    fake = types.ModuleType("humanlike.stimuli.features")
    fake.load_manifest_images, fake.extract_features = load_manifest_images, extract_features
    monkeypatch.setitem(sys.modules, "humanlike.stimuli.features", fake)
    out = tmp / "out_model"
    args = ["analyze", "ka", "--model", "torch.nn:Flatten", "--manifest", str(tmp / "manifest.csv"),
            "--image-size", "4", "--out", str(out), "--subsets", "2"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert calls["manifest"] == (str(tmp / "manifest.csv"), 4) and calls["layers"] == [None]
    assert calls["device"] == "cpu"  # the default of --device
    subsets = balanced_subsets(labels, n_subsets=2, random_state=0)
    expected = kernel_analysis_protocol(images.reshape(ids.size, -1), labels, subsets=subsets)
    auc = pd.read_csv(out / "ka_auc.csv").set_index("representation")
    assert auc.loc["Flatten", "auc_mean"] == pytest.approx(expected.auc_mean, abs=1e-6)


def test_cli_rejects_representations_of_different_images(files):
    tmp, ids, _, good, *_ = files
    other = pd.DataFrame(good[:-1], columns=[f"f{j}" for j in range(5)])
    other.insert(0, "image", ids[:-1])
    other.to_csv(tmp / "short.csv", index=False)
    result = CliRunner().invoke(
        main, ["analyze", "ka", str(tmp / "model.csv"), str(tmp / "short.csv"),
               "--labels", str(tmp / "labels.csv"), "--out", str(tmp / "o")],
    )  # fmt: skip
    assert result.exit_code != 0
    assert "hold different images" in result.output


def test_cli_without_labels_names_the_option_to_add(files):
    tmp, *_ = files
    result = CliRunner().invoke(main, ["analyze", "ka", str(tmp / "model.csv"), "--out", str(tmp)])
    assert result.exit_code != 0
    assert "--labels" in result.output


def test_cli_reads_model_features_through_the_stimuli_feature_extractor(files):
    pytest.importorskip("torch")
    from PIL import Image

    tmp, ids, labels, *_ = files
    rng = np.random.default_rng(3)
    codes = np.repeat(np.arange(3), N_PER_CLASS)
    pixels = np.clip(60 * codes[:, None, None] + rng.integers(0, 80, (ids.size, 6, 6)), 0, 255)
    (tmp / "img").mkdir()
    for name, p in zip(ids, pixels.astype(np.uint8)):
        Image.fromarray(p, mode="L").save(tmp / "img" / name)
    pd.DataFrame({"file": [f"img/{i}" for i in ids], "kind": "natural", "true_class": labels})\
        .to_csv(tmp / "manifest.csv", index=False)  # fmt: skip
    out = tmp / "out_real"
    args = ["analyze", "ka", "--model", "torch.nn:Flatten", "--manifest", str(tmp / "manifest.csv"),
            "--out", str(out), "--subsets", "2"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    # Manifest ids sort like ids; features are the grey pixels scaled to [0, 1].
    subsets = balanced_subsets(labels, n_subsets=2, random_state=0)
    expected = kernel_analysis_protocol(
        pixels.reshape(ids.size, -1) / 255.0, labels, subsets=subsets
    )
    auc = pd.read_csv(out / "ka_auc.csv").set_index("representation")
    assert auc.loc["Flatten", "auc_mean"] == pytest.approx(expected.auc_mean, abs=1e-6)


def test_a_pickled_model_file_is_refused_without_being_unpickled(tmp_path):
    import pickle

    import click
    import torch

    from humanlike.cli.analyze_ka import _load_torch_model

    marker = tmp_path / "ran"

    class Payload:  # unpickling this would create the marker file
        def __reduce__(self):
            return (open, (str(marker), "w"))

    path = tmp_path / "model.pt"
    torch.save({"model": Payload()}, path, pickle_module=pickle)
    with pytest.raises(click.BadParameter, match="refuses to unpickle"):
        _load_torch_model(str(path))
    assert not marker.exists()

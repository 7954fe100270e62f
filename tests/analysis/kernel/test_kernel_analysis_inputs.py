"""Reading features, labels and neural recordings for kernel analysis (Cadieu et al. 2013, App. B)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from humanlike.analysis.kernel.inputs import (
    attach_labels,
    normalise_sites,
    read_features,
    read_labels,
    read_neural,
)


@pytest.fixture
def table():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 3))
    frame = pd.DataFrame(X, columns=["f0", "f1", "f2"])
    frame.insert(0, "image", [f"img{i}.png" for i in range(6)])
    frame["label"] = ["cat", "dog"] * 3
    return frame, X


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_feature_tables_round_trip_ids_features_and_labels(tmp_path, table, suffix):
    frame, X = table
    path = tmp_path / f"layer4{suffix}"
    frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path)
    got = read_features(path)
    assert got.name == "layer4"
    np.testing.assert_array_equal(got.ids, frame["image"].to_numpy())
    np.testing.assert_allclose(got.X, X)
    np.testing.assert_array_equal(got.labels, frame["label"].to_numpy())


def test_npy_features_are_indexed_by_row_number_and_take_labels_from_a_file(tmp_path, table):
    _, X = table
    np.save(tmp_path / "feats.npy", X)
    pd.DataFrame({"image": [5, 4, 3, 2, 1, 0], "label": list("bababa")}).to_csv(
        tmp_path / "labels.csv", index=False
    )
    got = attach_labels(read_features(tmp_path / "feats.npy"), read_labels(tmp_path / "labels.csv"))
    np.testing.assert_array_equal(got.ids, [str(i) for i in range(6)])
    np.testing.assert_array_equal(got.labels, list("ababab"))  # matched by id, not by position
    np.testing.assert_allclose(got.X, X)


def test_missing_labels_are_reported_with_the_image_ids(tmp_path, table):
    frame, _ = table
    frame.drop(columns="label").to_csv(tmp_path / "f.csv", index=False)
    partial = pd.Series(["cat"], index=["img0.png"])
    with pytest.raises(ValueError, match="5 image\\(s\\) have no label.*img1.png"):
        attach_labels(read_features(tmp_path / "f.csv"), partial)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda f: f.drop(columns="image"), "missing image-id column 'image'"),
        (lambda f: f.assign(f1=["x"] * 6), "non-numeric: \\['f1'\\]"),
        (lambda f: f.assign(f2=[np.nan] + [0.0] * 5), "column 'f2', row 0"),
        (lambda f: f.assign(image=["a"] * 6), "lists image 'a' twice"),
    ],
)
def test_bad_feature_tables_raise_value_error_naming_the_column(tmp_path, table, mutate, message):
    frame, _ = table
    mutate(frame).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match=message):
        read_features(tmp_path / "bad.csv")


def test_unsupported_suffix_is_rejected(tmp_path):
    (tmp_path / "f.txt").write_text("1 2 3\n")
    with pytest.raises(ValueError, match="unsupported file type '.txt'"):
        read_features(tmp_path / "f.txt")


def test_site_normalisation_subtracts_blank_rate_and_divides_by_sd_over_images():
    rates = np.array([[10.0, 20.0, 30.0, 40.0], [5.0, 5.0, 7.0, 7.0]])
    blank = np.array([10.0, 4.0])
    Z = normalise_sites(rates, blank)
    assert Z.shape == (4, 2)  # images x sites
    # Hand-computed: site 0 SD (ddof=1) = sqrt(500/3); site 1 SD = sqrt(4/3).
    np.testing.assert_allclose(Z[:, 0], np.array([0, 10, 20, 30]) / np.sqrt(500 / 3))
    np.testing.assert_allclose(Z[:, 1], np.array([1, 1, 3, 3]) / np.sqrt(4 / 3))
    np.testing.assert_allclose(Z.std(axis=0, ddof=1), 1.0)


def test_silent_site_is_rejected_by_index():
    with pytest.raises(ValueError, match="site\\(s\\) \\[1\\] have zero SD"):
        normalise_sites(np.array([[1.0, 2.0], [3.0, 3.0]]), np.zeros(2))


def test_neural_table_reads_sites_by_images_with_a_blank_column(tmp_path):
    frame = pd.DataFrame(
        {"site": ["V4_1", "IT_7"], "blank": [10.0, 4.0], "a.png": [10.0, 5.0],
         "b.png": [20.0, 5.0], "c.png": [30.0, 7.0], "d.png": [40.0, 7.0]}
    )  # fmt: skip
    frame.to_csv(tmp_path / "it.csv", index=False)
    got = read_neural(tmp_path / "it.csv")
    np.testing.assert_array_equal(got.ids, ["a.png", "b.png", "c.png", "d.png"])
    expected = normalise_sites(frame.iloc[:, 2:].to_numpy(), frame["blank"].to_numpy())
    np.testing.assert_allclose(got.X, expected)
    raw = read_neural(tmp_path / "it.csv", normalise=False)
    np.testing.assert_allclose(raw.X, frame.iloc[:, 2:].to_numpy().T)


def test_neural_npy_takes_blank_rates_from_a_separate_file(tmp_path):
    rates = np.array([[10.0, 20.0, 30.0], [1.0, 2.0, 4.0]])
    np.save(tmp_path / "v4.npy", rates)
    np.save(tmp_path / "blank.npy", np.array([1.0, 0.5]))
    got = read_neural(tmp_path / "v4.npy", blank=str(tmp_path / "blank.npy"))
    np.testing.assert_allclose(got.X, normalise_sites(rates, np.array([1.0, 0.5])))
    with pytest.raises(ValueError, match="blank-image rates"):
        read_neural(tmp_path / "v4.npy")

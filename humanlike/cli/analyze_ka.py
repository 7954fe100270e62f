"""``humanlike analyze ka``: kernel-analysis curves and KA-AUC of feature files, recordings, models."""

from __future__ import annotations

import importlib
from pathlib import Path

import click
import numpy as np
import pandas as pd
from tqdm import tqdm

from humanlike.analysis.kernel.analysis import analyze_kernels
from humanlike.analysis.kernel.inputs import (
    FeatureTable,
    attach_labels,
    read_features,
    read_labels,
    read_neural,
)
from humanlike.analysis.kernel.protocol import balanced_subsets


def _load_torch_model(spec: str):
    """A torch module from ``package.module:attr`` (a module or a factory called without
    arguments), a model TOML (``humanlike.stimuli.model_spec``: entry point + safetensors/state-dict
    weights, or TorchScript) or a TorchScript file. Pickled files are refused, never unpickled."""
    import torch

    if ":" in spec and not Path(spec).exists():
        module_name, attr = spec.split(":", 1)
        try:
            obj = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise click.BadParameter(f"cannot import {spec!r}: {exc}", param_hint="--model") from exc
        model = obj if isinstance(obj, torch.nn.Module) else obj()
    elif Path(spec).is_file():
        from humanlike.stimuli.model_spec import load_network, load_torchscript, read_model_spec

        try:
            if Path(spec).suffix == ".toml":
                model = load_network(read_model_spec(spec))
            else:
                model = load_torchscript(Path(spec))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--model") from None
    else:
        raise click.BadParameter(
            f"{spec!r} is neither 'module:attr', a model TOML nor a TorchScript file",
            param_hint="--model",
        )
    if not isinstance(model, torch.nn.Module):
        raise click.BadParameter(f"{spec!r} did not give a torch.nn.Module", param_hint="--model")
    return model.eval()


def _model_tables(
    spec: str,
    manifest: Path,
    layers: tuple[str, ...],
    size: int | None,
    batch_size: int,
    device: str = "cpu",
) -> list[FeatureTable]:
    """Features of every requested layer of the model over the manifest's images."""
    from humanlike.stimuli.features import extract_features, load_manifest_images

    model = _load_torch_model(spec)
    id_list, images = load_manifest_images(manifest, size=size)
    ids = np.asarray([str(i) for i in id_list])
    stem = spec.rsplit(":", 1)[-1] if ":" in spec else Path(spec).stem
    tables = []
    for layer in layers or (None,):
        X = extract_features(model, images, layer=layer, batch_size=batch_size, device=device)
        name = stem if layer is None else f"{stem}:{layer}"
        tables.append(
            FeatureTable(name, ids, np.asarray(X, dtype=np.float64).reshape(len(ids), -1))
        )
    return tables


def _manifest_labels(manifest: Path, label_col: str) -> pd.Series:
    frame = pd.read_csv(manifest)
    for col in ("file", label_col):
        if col not in frame.columns:
            raise click.BadParameter(
                f"{manifest}: no column {col!r} to label images by; pass --labels",
                param_hint="--manifest",
            )
    return pd.Series(frame[label_col].to_numpy(), index=frame["file"].astype(str))


def _labelled_and_aligned(
    tables: list[FeatureTable], label_map: pd.Series | None
) -> tuple[list[FeatureTable], np.ndarray]:
    """Label every table (from ``label_map``, else a table's own label column) and put all in
    sorted image-id order (so subsets do not depend on row order); all must hold the same
    images with the same labels."""
    if label_map is None:
        own = [t for t in tables if t.labels is not None]
        if not own:
            raise click.UsageError("no labels: pass --labels or give a table with a label column")
        label_map = pd.Series(own[0].labels, index=own[0].ids)
    tables = [attach_labels(t, label_map) if t.labels is None else t for t in tables]
    ref = tables[0]
    order = pd.Index(np.sort(ref.ids))
    out = []
    for t in tables:
        if set(t.ids) != set(ref.ids):
            diff = sorted(set(t.ids) ^ set(ref.ids))[:3]
            raise click.UsageError(
                f"{t.name} and {ref.name} hold different images (e.g. {diff}); kernel analysis "
                "compares representations of the same images"
            )
        pos = pd.Index(t.ids).get_indexer(order)
        assert t.labels is not None  # attach_labels() above labelled every table
        out.append(FeatureTable(t.name, t.ids[pos], t.X[pos], t.labels[pos]))
        first, last = out[0].labels, out[-1].labels
        assert first is not None and last is not None
        if not np.array_equal(last.astype(str), first.astype(str)):
            raise click.UsageError(f"{t.name} and {ref.name} disagree on image labels")
    labels = out[0].labels
    assert labels is not None
    return out, labels


@click.command("ka")
@click.argument("features", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--labels",
    "labels_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="CSV/Parquet of image id and label (else a label column).",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for ka_curves.csv, ka_auc.csv, ka_auc.md, ka_curves.png.",
)
@click.option("--name", "names", multiple=True, help="Name per FEATURES file (default: stem).")
@click.option("--index-col", default="image", show_default=True, help="Image-id column.")
@click.option("--label-col", default="label", show_default=True, help="Label column.")
@click.option(
    "--neural",
    "neural_paths",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Sites x images recordings (repeatable).",
)
@click.option(
    "--blank",
    default="blank",
    show_default=True,
    help="Blank-image rate: column of the recordings, or a .npy/.csv file.",
)
@click.option("--no-normalise", is_flag=True, help="Use raw rates (skip Appendix B).")
@click.option("--model", "model_spec", help="Torch model: 'module:attr', a model TOML or a TorchScript file "
              "(pickled files are refused).")
@click.option(
    "--manifest",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Stimulus manifest CSV whose images the model sees.",
)
@click.option("--layer", "layers", multiple=True, help="Model layer to read (repeatable).")
@click.option("--image-size", type=int, default=None, help="Resize images to this side.")
@click.option("--batch-size", type=int, default=64, show_default=True)
@click.option(
    "--device",
    default="cpu",
    show_default=True,
    help="Where the model's features are computed: auto (a GPU when present), cpu, cuda[:N].",
)
@click.option(
    "--quantiles",
    default="0.1,0.5,0.9",
    show_default=True,
    help="Distance quantiles that set the kernel widths.",
)
@click.option("--subsets", "n_subsets", type=int, default=10, show_default=True)
@click.option(
    "--fraction",
    type=float,
    default=0.8,
    show_default=True,
    help="Share of the smallest class taken per class in each subset.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the subsets.")
@click.option(
    "--float32",
    "use_float32",
    is_flag=True,
    help="Eigendecompose in float32 (about 2x faster; KA-AUC agrees to ~1e-6).",
)
def command(
    features,
    labels_path,
    out_dir,
    names,
    index_col,
    label_col,
    neural_paths,
    blank,
    no_normalise,
    model_spec,
    manifest,
    layers,
    image_size,
    batch_size,
    device,
    quantiles,
    n_subsets,
    fraction,
    seed,
    use_float32,
) -> None:
    """Kernel analysis (Cadieu et al. 2013) of FEATURES files, recordings and model layers.

    Every representation must cover the same images; all are analysed on the same
    class-balanced subsets.
    """
    try:
        q = tuple(float(v) for v in quantiles.split(","))
    except ValueError:
        raise click.BadParameter(
            f"{quantiles!r} is not a comma-separated list", param_hint="--quantiles"
        ) from None
    if names and len(names) != len(features):
        raise click.BadParameter("give one --name per FEATURES file", param_hint="--name")
    if bool(model_spec) != bool(manifest):
        raise click.UsageError("--model and --manifest go together")
    try:
        tables = [
            read_features(p, index_col=index_col, label_col=label_col, name=n)
            for p, n in zip(features, names or [None] * len(features))
        ]
        tables += [read_neural(p, blank=blank, normalise=not no_normalise) for p in neural_paths]
        if model_spec:
            tables += _model_tables(
                model_spec, manifest, layers, image_size, batch_size, device
            )
        if not tables:
            raise click.UsageError("nothing to analyse: give FEATURES, --neural or --model")
        if len({t.name for t in tables}) != len(tables):
            raise click.UsageError("representation names must be unique; use --name")
        label_map = None
        if labels_path:
            label_map = read_labels(labels_path, index_col=index_col, label_col=label_col)
        elif model_spec and all(t.labels is None for t in tables):
            label_map = _manifest_labels(manifest, "true_class")
        tables, labels = _labelled_and_aligned(tables, label_map)
        subsets = balanced_subsets(
            labels, n_subsets=n_subsets, fraction=fraction, random_state=seed
        )
        result = analyze_kernels(
            tables,
            labels,
            subsets,
            quantiles=q,
            dtype=np.float32 if use_float32 else np.float64,
            progress=lambda items: tqdm(items, desc="kernel analysis", unit="representation"),
        )
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    written = result.save(out_dir)
    click.echo(result.summary(), nl=False)
    click.echo(f"wrote {', '.join(path.name for path in written)} to {out_dir}")


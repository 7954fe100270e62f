"""MLDS blend sequences between two object images (Richard Webster et al. 2023, CogSci).

Each image is converted to grey by (R + G + B) / 3 and blurred with a Gaussian of sigma = 3 px;
a sequence is the alpha blend A(a', b', Phi) = a' (1 - Phi) + b' Phi of the two processed images
at the nominal levels Phi = 0, 1/(n-1), ..., 1 (7 levels by default). When object masks are
given, pixels outside an object are set to a uniform ``background`` grey before blurring, so the
sequence shows the objects on a common ground. Pairs are chosen by the Jaccard index of their
masks, |A & B| / |A | B|, keeping each instance's top-k partners.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd
from PIL import Image
from scipy import ndimage

MANIFEST_COLUMNS = ["file", "kind", "sequence", "level", "phi", "source_a", "source_b", "jaccard"]


def to_grey(image: np.ndarray) -> np.ndarray:
    """Grey image (H, W) in [0, 1]: (R + G + B) / 3 of an RGB(A) image; grey images pass through.

    uint8 input is divided by 255; float input must already lie in [0, 1]; alpha is ignored."""
    image = np.asarray(image)
    if image.dtype == np.uint8:
        image = image.astype(np.float64) / 255.0
    else:
        image = image.astype(np.float64)
        if image.size and (image.min() < 0.0 or image.max() > 1.0):
            raise ValueError("float images must have values in [0, 1]")
    if image.ndim == 2:
        return image
    if image.ndim == 3 and image.shape[2] in (3, 4):
        return image[..., :3].mean(axis=2)
    if image.ndim == 3 and image.shape[2] == 1:
        return image[..., 0]
    raise ValueError(f"expected an (H, W), (H, W, 3) or (H, W, 4) image, got shape {image.shape}")


def jaccard_index(mask_a: np.ndarray, mask_b: np.ndarray) -> float:
    """|A & B| / |A | B| of two boolean masks of the same shape (1 if both are empty)."""
    a, b = np.asarray(mask_a, bool), np.asarray(mask_b, bool)
    if a.shape != b.shape:
        raise ValueError(f"masks must have the same shape, got {a.shape} and {b.shape}")
    union = np.count_nonzero(a | b)
    return 1.0 if union == 0 else np.count_nonzero(a & b) / union


def select_pairs(masks: Mapping[str, np.ndarray], k: int = 1) -> pd.DataFrame:
    """Pairs of instances by mask overlap: each instance keeps its ``k`` partners with the highest
    Jaccard index; duplicates (a, b) / (b, a) are merged. Columns ``source_a, source_b, jaccard``,
    sorted by decreasing Jaccard index (ties by name)."""
    names = list(masks)
    if len(names) < 2:
        raise ValueError("need at least two masks to form pairs")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    shapes = {np.shape(m) for m in masks.values()}
    if len(shapes) != 1:
        raise ValueError(f"all masks must have the same shape; got shapes {sorted(shapes)}")
    flat = np.stack([np.asarray(masks[n], bool).ravel() for n in names]).astype(np.float32)
    inter = flat @ flat.T
    area = flat.sum(axis=1)
    union = area[:, None] + area[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        jac = np.where(union > 0, inter / union, 1.0)
    np.fill_diagonal(jac, -np.inf)
    k = min(k, len(names) - 1)
    # stable order: highest Jaccard first, ties broken by name order
    top = np.argsort(-jac, axis=1, kind="stable")[:, :k]
    rows = np.repeat(np.arange(len(names)), k)
    cols = top.ravel()
    lo, hi = np.minimum(rows, cols), np.maximum(rows, cols)
    pairs = np.unique(np.column_stack([lo, hi]), axis=0)
    out = pd.DataFrame({
        "source_a": [names[i] for i in pairs[:, 0]],
        "source_b": [names[j] for j in pairs[:, 1]],
        "jaccard": jac[pairs[:, 0], pairs[:, 1]].astype(float),
    })
    return out.sort_values(["jaccard", "source_a", "source_b"], ascending=[False, True, True],
                           kind="stable").reset_index(drop=True)


def prepare_image(image: np.ndarray, mask: np.ndarray | None = None, *, blur_sigma: float = 3.0,
                  background: float = 0.5) -> np.ndarray:
    """Grey (R+G+B)/3, pixels outside ``mask`` set to ``background``, Gaussian blur (sigma px)."""
    grey = to_grey(image)
    if mask is not None:
        mask = np.asarray(mask, bool)
        if mask.shape != grey.shape:
            raise ValueError(f"mask shape {mask.shape} does not match image shape {grey.shape}")
        grey = np.where(mask, grey, background)
    return ndimage.gaussian_filter(grey, sigma=blur_sigma, mode="nearest")


def blend_levels(n_levels: int = 7) -> np.ndarray:
    """Nominal levels Phi = 0, 1/(n-1), ..., 1."""
    if n_levels < 3:
        raise ValueError(f"a sequence needs at least 3 levels, got {n_levels}")
    return np.linspace(0.0, 1.0, n_levels)


def blend_sequence(
    image_a: np.ndarray,
    image_b: np.ndarray,
    *,
    mask_a: np.ndarray | None = None,
    mask_b: np.ndarray | None = None,
    n_levels: int = 7,
    blur_sigma: float = 3.0,
    background: float = 0.5,
) -> np.ndarray:
    """(n_levels, H, W) composites a' (1 - Phi) + b' Phi of the processed images (module doc)."""
    a = prepare_image(image_a, mask_a, blur_sigma=blur_sigma, background=background)
    b = prepare_image(image_b, mask_b, blur_sigma=blur_sigma, background=background)
    if a.shape != b.shape:
        raise ValueError(f"images must have the same size, got {a.shape} and {b.shape}; "
                         "resize them first (e.g. with fit_square)")
    phi = blend_levels(n_levels)[:, None, None]
    return a[None] * (1.0 - phi) + b[None] * phi


def fit_square(image: np.ndarray, size: int) -> np.ndarray:
    """Centre-crop to a square and resize to ``size`` x ``size`` (bilinear; masks: nearest)."""
    image = np.asarray(image)
    h, w = image.shape[:2]
    side = min(h, w)
    top, left = (h - side) // 2, (w - side) // 2
    crop = image[top:top + side, left:left + side]
    if crop.dtype == bool:
        pil = Image.fromarray(crop.astype(np.uint8) * 255)
        return np.asarray(pil.resize((size, size), Image.Resampling.NEAREST)) > 127
    if crop.dtype != np.uint8:
        crop = np.clip(np.round(crop * 255.0), 0, 255).astype(np.uint8)
    return np.asarray(Image.fromarray(crop).resize((size, size), Image.Resampling.BILINEAR))


def write_sequences(
    pairs: pd.DataFrame,
    images: Mapping[str, np.ndarray],
    masks: Mapping[str, np.ndarray] | None,
    out_dir: str | Path,
    *,
    n_levels: int = 7,
    blur_sigma: float = 3.0,
    background: float = 0.5,
    subdir: str = "",
    sequence_names: Sequence[str] | None = None,
    manifest_name: str | None = "manifest.csv",
) -> pd.DataFrame:
    """Render one blend sequence per row of ``pairs`` (``source_a, source_b, jaccard``) as 8-bit
    grey PNGs ``<subdir>/<sequence>/level_<l>.png`` under ``out_dir``; return (and, unless
    ``manifest_name`` is None, write) the manifest with columns ``MANIFEST_COLUMNS``: ``file``
    relative to ``out_dir``, ``kind = mlds``, ``sequence``, ``level`` (1-based), ``phi``,
    ``source_a``, ``source_b``, ``jaccard``."""
    missing = [c for c in ("source_a", "source_b") if c not in pairs.columns]
    if missing:
        raise ValueError(f"pairs needs column(s) {missing}; got {list(pairs.columns)}")
    out_dir = Path(out_dir)
    names = list(sequence_names) if sequence_names is not None else [
        f"seq{i:03d}" for i in range(len(pairs))]
    if len(names) != len(pairs) or len(set(names)) != len(names):
        raise ValueError("sequence_names must be unique, one per pair")
    phi = blend_levels(n_levels)
    rows = []
    for name, pair in zip(names, pairs.itertuples(index=False), strict=True):
        source_a, source_b = cast(str, pair.source_a), cast(str, pair.source_b)
        for source in (source_a, source_b):
            if source not in images:
                raise ValueError(f"pairs names image {source!r}, which is not among the images")
        frames = blend_sequence(
            images[source_a], images[source_b],
            mask_a=None if masks is None else masks.get(source_a),
            mask_b=None if masks is None else masks.get(source_b),
            n_levels=n_levels, blur_sigma=blur_sigma, background=background,
        )
        folder = Path(subdir) / name
        (out_dir / folder).mkdir(parents=True, exist_ok=True)
        pixels = np.clip(np.round(frames * 255.0), 0, 255).astype(np.uint8)
        jac = float(getattr(pair, "jaccard", np.nan))
        for level in range(n_levels):
            rel = (folder / f"level_{level + 1}.png").as_posix()
            Image.fromarray(pixels[level]).save(out_dir / rel)
            rows.append((rel, "mlds", name, level + 1, float(phi[level]), source_a, source_b, jac))
    manifest = pd.DataFrame(rows, columns=MANIFEST_COLUMNS)
    if manifest_name is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        manifest.to_csv(out_dir / manifest_name, index=False)
    return manifest


def object_mask(image: np.ndarray) -> np.ndarray:
    """Object mask of an image: its alpha channel (> 0.5) if it has one, else an Otsu threshold
    of the grey image, taking as object the side that covers fewer border pixels."""
    from skimage.filters import threshold_otsu

    image = np.asarray(image)
    if image.ndim == 3 and image.shape[2] == 4:
        alpha = image[..., 3].astype(float) / (255.0 if image.dtype == np.uint8 else 1.0)
        if alpha.min() < 0.5:
            return alpha > 0.5
    grey = to_grey(image)
    if grey.max() == grey.min():
        return np.ones(grey.shape, bool)
    above = grey > threshold_otsu(grey)
    border = np.concatenate([above[0], above[-1], above[:, 0], above[:, -1]])
    return ~above if border.mean() > 0.5 else above


def load_image(path: str | Path) -> np.ndarray:
    """Image file as a uint8 array (H, W), (H, W, 3) or (H, W, 4) (RGBA when it has alpha)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"image file not found: {path}")
    with Image.open(path) as im:
        has_alpha = im.mode in ("RGBA", "LA", "PA") or "transparency" in im.info
        mode = "RGBA" if has_alpha else ("L" if im.mode in ("L", "1", "I", "I;16", "F") else "RGB")
        return np.asarray(im.convert(mode))


def build_sequences(
    image_paths: Sequence[str | Path],
    out_dir: str | Path,
    *,
    mask_paths: Mapping[str, str | Path] | None = None,
    k: int = 1,
    size: int | None = 256,
    n_levels: int = 7,
    blur_sigma: float = 3.0,
    background: float = 0.5,
) -> pd.DataFrame:
    """From image files: masks (given files, else alpha, else Otsu), top-k Jaccard pairs, sequences
    written under ``out_dir`` with ``manifest.csv``. Images are named by file stem."""
    images, masks = {}, {}
    for path in map(Path, image_paths):
        name = path.stem
        if name in images:
            raise ValueError(f"two images share the name {name!r}; file stems must be unique")
        image = load_image(path)
        if mask_paths is not None and name in mask_paths:
            mask = to_grey(load_image(mask_paths[name])) > 0.5
            if mask.shape != image.shape[:2]:
                raise ValueError(f"mask {mask_paths[name]} has shape {mask.shape}, image {path} "
                                 f"has {image.shape[:2]}")
        else:
            mask = object_mask(image)
        if size is not None:
            image, mask = fit_square(image, size), fit_square(mask, size)
        images[name], masks[name] = image, mask
    pairs = select_pairs(masks, k=k)
    return write_sequences(pairs, images, masks, out_dir, n_levels=n_levels,
                           blur_sigma=blur_sigma, background=background)

"""Rendering of the analysis figures: one matplotlib figure, written as inline SVG text (the HTML
report, the dashboard), or as SVG / PDF / PNG files (the CLI).

Every figure of the project is drawn once, by a function in a subpackage's ``plots`` module that
returns a :class:`matplotlib.figure.Figure`; this module only turns such a figure into text or files.
"""

from __future__ import annotations

import io
import itertools
import re
import weakref
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure

#: File formats :func:`save_figure` writes (vector first).
FORMATS = ("svg", "pdf", "png")

_ids = itertools.count()


def to_svg(fig: Figure, *, close: bool = True) -> str:
    """The figure as an ``<svg>`` element (no XML prolog), text kept as text, with element ids
    unique to this figure so several SVGs can live in one HTML page; closes the figure."""
    import matplotlib.pyplot as plt

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": f"hl{next(_ids)}"}):
        fig.savefig(buffer, format="svg", bbox_inches="tight")
    if close:
        plt.close(fig)
    text = buffer.getvalue()
    start = text.find("<svg")
    if start < 0:  # pragma: no cover - matplotlib always writes an svg element
        raise RuntimeError("matplotlib wrote no <svg> element")
    svg = text[start:]
    # a fixed pixel size would overflow narrow pages: scale with the container, keep the ratio
    return re.sub(r'<svg([^>]*?) width="([\d.]+)pt" height="([\d.]+)pt"',
                  r'<svg\1 width="\2pt" height="\3pt" style="max-width:100%;height:auto"',
                  svg, count=1)


def save_figure(fig: Figure, path: str | Path, *, dpi: int = 150, close: bool = False) -> Path:
    """Write the figure to ``path`` in the format its suffix names (.svg, .pdf or .png), cropped to
    its content so nothing is cut."""
    import matplotlib.pyplot as plt

    path = Path(path)
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise ValueError(f"{path}: figure files are {', '.join('.' + f for f in FORMATS)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context({"svg.fonttype": "none", "pdf.fonttype": 42}):
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
    if close:
        plt.close(fig)
    return path


_CAPTIONS: weakref.WeakKeyDictionary[Figure, str] = weakref.WeakKeyDictionary()


def set_caption(fig: Figure, text: str) -> Figure:
    """Attach the caption that explains every mark, bar, band and bracket of ``fig``."""
    _CAPTIONS[fig] = " ".join(text.split())
    return fig


def caption(fig: Figure) -> str:
    """The caption :func:`set_caption` attached to ``fig`` ('' if none)."""
    return _CAPTIONS.get(fig, "")

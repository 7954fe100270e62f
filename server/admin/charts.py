"""Small charts drawn as SVG by the templates (``templates/admin/_charts.html``): these functions only
turn numbers into coordinates in a 0..W x 0..H box. Every label the templates print is escaped by
Jinja; no participant text goes into an SVG attribute unescaped."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import numpy as np

W, H, PAD = 320.0, 160.0, 28.0


@dataclass
class Chart:
    """Coordinates ready to draw, with the axis labels."""

    points: list[tuple[float, float]] = field(default_factory=list)
    bars: list[tuple[float, float, float, float]] = field(default_factory=list)
    x_label: str = ""
    y_label: str = ""
    x_ticks: list[tuple[float, str]] = field(default_factory=list)
    y_ticks: list[tuple[float, str]] = field(default_factory=list)
    diagonal: tuple[float, float, float, float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """Nothing to draw."""
        return not self.points and not self.bars


def _scale(values: np.ndarray, lo: float, hi: float, out_lo: float, out_hi: float) -> np.ndarray:
    span = hi - lo if hi > lo else 1.0
    return out_lo + (values - lo) / span * (out_hi - out_lo)


def cumulative(times: list[dt.datetime]) -> Chart:
    """Completions over time: a step line of the running count."""
    if not times:
        return Chart(x_label="time", y_label="completions")
    t = np.array([x.timestamp() for x in times])
    n = np.arange(1, len(t) + 1, dtype=float)
    xs = _scale(t, t[0], t[-1], PAD, W - 8)
    ys = _scale(n, 0, n[-1], H - PAD, 8)
    return Chart(points=[(round(float(x), 1), round(float(y), 1)) for x, y in zip(xs, ys)],
                 x_label="time", y_label="completions",
                 x_ticks=[(PAD, times[0].strftime("%m-%d %H:%M")),
                          (W - 8, times[-1].strftime("%m-%d %H:%M"))],
                 y_ticks=[(H - PAD, "0"), (8.0, str(len(times)))])


def nice_step(hi: float, n_ticks: int = 4) -> float:
    """A round tick step (1, 2, 2.5 or 5 times a power of ten) giving about ``n_ticks`` steps to ``hi``."""
    raw = max(hi, 1e-9) / n_ticks
    power = 10.0 ** np.floor(np.log10(raw))
    return float(next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw))


def histogram(values: np.ndarray, bins: int = 30, x_label: str = "RT (ms)",
              y_label: str = "trials") -> Chart:
    """A histogram (reaction times in ms, or minutes taken) on 0 .. a round number above the 99th
    percentile (values beyond it are counted in the last bin), with round ticks."""
    values = values[np.isfinite(values)]
    if values.size == 0:
        return Chart(x_label=x_label, y_label=y_label)
    hi = float(np.quantile(values, 0.99)) if values.size > 20 else float(values.max())
    step = nice_step(max(hi, 1.0))
    hi = step * np.ceil(max(hi, 1.0) / step)
    counts, edges = np.histogram(np.clip(values, 0, hi), bins=bins, range=(0, hi))
    xs = _scale(edges, edges[0], edges[-1], PAD, W - 8)
    top = float(counts.max()) or 1.0
    bars = [(round(float(xs[i]), 1), round(float(H - PAD - c / top * (H - PAD - 8)), 1),
             round(float(xs[i + 1] - xs[i]) - 0.5, 1), round(float(c / top * (H - PAD - 8)), 1))
            for i, c in enumerate(counts)]
    ticks = np.arange(0, hi + step / 2, step)
    return Chart(bars=bars, x_label=x_label, y_label=y_label,
                 x_ticks=[(round(float(x), 1), f"{t:g}") for x, t in
                          zip(_scale(ticks, 0, hi, PAD, W - 8), ticks)],
                 y_ticks=[(H - PAD, "0"), (8.0, str(int(top)))])


def scatter(pairs: list[tuple[float, float]]) -> Chart:
    """Repeat against first rating, with the identity line."""
    if not pairs:
        return Chart(x_label="first rating", y_label="repeat")
    a = np.array(pairs, dtype=float)
    lo, hi = float(np.nanmin(a)), float(np.nanmax(a))
    xs = _scale(a[:, 0], lo, hi, PAD, W - 8)
    ys = _scale(a[:, 1], lo, hi, H - PAD, 8)
    r = float(np.corrcoef(a[:, 0], a[:, 1])[0, 1]) if len(a) > 2 and a.std(axis=0).all() else None
    return Chart(points=[(round(float(x), 1), round(float(y), 1)) for x, y in zip(xs, ys)],
                 x_label="first rating", y_label="repeat",
                 x_ticks=[(PAD, f"{lo:g}"), (W - 8, f"{hi:g}")],
                 y_ticks=[(H - PAD, f"{lo:g}"), (8.0, f"{hi:g}")],
                 diagonal=(PAD, H - PAD, W - 8, 8.0), extra={"r": r, "n": len(a)})

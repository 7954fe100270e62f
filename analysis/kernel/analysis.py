"""Kernel analysis of several representations on the same class-balanced subsets; the result
prints and saves itself (curves, KA-AUC tables, subset membership, figure)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from humanlike.analysis.kernel.inputs import FeatureTable
from humanlike.analysis.kernel.plots import (
    auc_table,
    auc_table_markdown,
    curves_table,
    save_ka_figure,
)
from humanlike.analysis.kernel.protocol import (
    DEFAULT_QUANTILES,
    KAProtocolResult,
    kernel_analysis_protocol,
)

#: The files :meth:`KernelAnalysis.save` writes.
OUTPUTS = (
    "ka_curves.csv",
    "ka_auc.csv",
    "ka_auc_subsets.csv",
    "ka_subsets.csv",
    "ka_auc.md",
    "ka_curves.png",
)


@dataclass(frozen=True)
class KernelAnalysis:
    """Protocol results per representation, on images ``ids`` with ``labels`` and ``subsets``
    (rows of indices into ``ids``)."""

    results: dict[str, KAProtocolResult]
    ids: np.ndarray
    labels: np.ndarray
    subsets: np.ndarray

    def auc_table(self) -> pd.DataFrame:
        """KA-AUC mean, SD and range per representation."""
        return auc_table(self.results)

    def summary(self) -> str:
        """The KA-AUC table as Markdown."""
        return auc_table_markdown(self.auc_table())

    def save(self, out_dir: str | Path) -> list[Path]:
        """Write :data:`OUTPUTS`: curves, AUC tables (CSV, per subset, Markdown), subset
        membership and the curves figure."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        curves_table(self.results).to_csv(out / "ka_curves.csv", index=False)
        table = self.auc_table()
        table.to_csv(out / "ka_auc.csv", index=False)
        pd.DataFrame(
            [(name, s, auc) for name, r in self.results.items() for s, auc in enumerate(r.aucs)],
            columns=["representation", "subset", "auc"],
        ).to_csv(out / "ka_auc_subsets.csv", index=False)
        flat = self.subsets.ravel()
        pd.DataFrame(
            {
                "subset": np.repeat(np.arange(self.subsets.shape[0]), self.subsets.shape[1]),
                "image": self.ids[flat],
                "label": self.labels[flat],
            }
        ).to_csv(out / "ka_subsets.csv", index=False)
        (out / "ka_auc.md").write_text(auc_table_markdown(table))
        save_ka_figure(self.results, out / "ka_curves.png")
        return [out / name for name in OUTPUTS]


def analyze_kernels(
    tables: Sequence[FeatureTable],
    labels: np.ndarray,
    subsets: np.ndarray,
    quantiles: tuple[float, ...] = DEFAULT_QUANTILES,
    dtype: type = np.float64,
    progress: Callable[[Iterable[FeatureTable]], Iterable[FeatureTable]] | None = None,
) -> KernelAnalysis:
    """:func:`kernel_analysis_protocol` of every aligned table on the same ``subsets``."""
    wrap = progress or (lambda items: items)
    results = {
        t.name: kernel_analysis_protocol(
            t.X, labels, subsets=subsets, quantiles=quantiles, dtype=dtype
        )
        for t in wrap(tables)
    }
    return KernelAnalysis(results, tables[0].ids, labels, subsets)

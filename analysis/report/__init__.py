"""One HTML report for a whole study: every section the export's trial types allow, with the
methods' own figures (inline SVG), uncertainty and a generated methods paragraph.

``build_report(export, ...)`` computes a :class:`Report`; ``report.html()`` is one self-contained
page (no scripts, no network); ``report.save(path)`` writes it.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from humanlike.analysis.exclusions import ExclusionRules, as_rules
from humanlike.analysis.io.export import Export
from humanlike.analysis.planning.report import allocation_section
from humanlike.analysis.report.alignment import alignment_section
from humanlike.analysis.report.display import display_section
from humanlike.analysis.report.methods import design_text, methods_paragraph
from humanlike.analysis.report.replication import replication_sections
from humanlike.analysis.report.sections import (
    ReportSettings,
    Section,
    StudyResults,
    coverage,
    kappa_section,
    mlds_sections,
    ratings_sections,
    sample_section,
    timing_section,
)

__all__ = ["SECTION_KEYS", "Report", "ReportSettings", "Section", "build_report", "coverage"]

#: Section keys in the order the report shows them (a replication's spec adds "replication"
#: before "methods": :mod:`.replication`).
SECTION_KEYS = ("sample", "timing", "display", "allocation", "reliability", "ceilings", "scores",
                "kappa", "alignment", "mlds", "psychophysical", "methods")


@dataclass
class Report:
    """The computed report: title, sections in order, results, the methods paragraph."""

    title: str
    sections: list[Section]
    results: StudyResults
    methods: str
    settings: ReportSettings
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.UTC).strftime(
        "%Y-%m-%d %H:%M UTC"))

    def section(self, key: str) -> Section:
        return next(s for s in self.sections if s.key == key)

    def html(self) -> str:
        """The report as one self-contained HTML page."""
        import jinja2
        from markupsafe import Markup

        env = jinja2.Environment(
            loader=jinja2.PackageLoader("humanlike.analysis.report", "templates"),
            autoescape=True, trim_blocks=True, lstrip_blocks=True)

        def table_html(frame: pd.DataFrame) -> Markup:
            return Markup(frame.to_html(index=False, border=0, na_rep="", classes="data",
                                        float_format=_number, escape=True))

        env.filters["table"] = table_html
        env.filters["svg"] = Markup  # produced by matplotlib from our own figures
        return env.get_template("report.html.j2").render(report=self)

    def save_figures(self, folder: str | Path, fmt: str = "svg") -> list[Path]:
        """Write every figure as ``<section>_<n>.<fmt>`` (svg, pdf or png) into ``folder``."""
        from humanlike.analysis.figures import save_figure

        written = []
        for section in self.sections:
            for i, fig in enumerate(section.figures, start=1):
                if fig.figure is not None:
                    written.append(save_figure(fig.figure, Path(folder) / f"{section.key}_{i}.{fmt}"))
        return written

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.html(), encoding="utf-8")
        return path


def _number(value: float) -> str:
    """Table numbers: 3 significant digits, plain notation up to 99,999, '' for tiny noise."""
    if abs(value) < 1e-9:
        return "0"
    if 1 <= abs(value) < 1e5:
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    return f"{value:.3g}"


def build_report(
    export: Export,
    *,
    models: pd.DataFrame | None = None,
    spec: Mapping[str, Any] | None = None,
    rules: ExclusionRules | Mapping[str, object] | None = None,
    settings: ReportSettings | None = None,
    truth: Mapping[str, Any] | None = None,
    model_triads: pd.DataFrame | None = None,
    progress: Callable[[str], object] | None = None,
) -> Report:
    """Compute every section the export allows. ``spec``: the experiment's spec (a mapping, for
    intended durations, exclusion rules and the methods); ``truth``: sequence -> generating
    standard scale of simulated data; ``progress`` is called with each long step's name."""
    settings = settings or ReportSettings()
    step = progress or (lambda name: None)
    if rules is None and spec is not None:
        rules = spec.get("exclusion")
    rule_set = as_rules(rules)
    results = StudyResults()
    step("sample and timing")
    sections = [sample_section(export), timing_section(export, spec), display_section(export),
                allocation_section(export)]
    sections += ratings_sections(export, models, rule_set, settings, results, step, spec)
    sections.append(kappa_section(export, settings, results, step, models))
    sections.append(alignment_section(export, models, settings, results, step))
    sections += mlds_sections(export, settings, results,
                              None if truth is None else {k: np.asarray(v)
                                                          for k, v in truth.items()},
                              model_triads, step)
    sections += replication_sections(export, spec, settings, results, step)  # [replication]
    counts = {"sample": export.sample_sentence() or "", "design": design_text(spec, export)}
    present = {s.key for s in sections if s.missing is None}
    methods = methods_paragraph(spec, counts, rule_set, settings, present)
    sections.append(Section("methods", "Methods", paragraphs=[methods]))
    title = str((spec or {}).get("title") or (spec or {}).get("slug") or export.source.name)
    return Report(title, sections, results, methods, settings)

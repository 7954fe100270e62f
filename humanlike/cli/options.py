"""Options shared by the analysis commands, declared once."""

from __future__ import annotations

import click

confidence_option = click.option(
    "--confidence",
    default=0.95,
    show_default=True,
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    help="Confidence level of the CIs.",
)

alpha_option = click.option(
    "--alpha",
    default=0.05,
    show_default=True,
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    help="Family-wise error rate of the Holm-Sidak corrected tests.",
)

"""Options shared by the analysis commands, declared once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

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


class HiddenAliasOption(click.Option):
    """An option that still accepts deprecated names but leaves them out of ``--help``."""

    def __init__(self, *args: Any, hidden_aliases: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hidden_aliases = tuple(hidden_aliases)

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        """The help line without the hidden aliases."""
        opts = self.opts
        self.opts = [o for o in opts if o not in self.hidden_aliases]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = opts


def n_resamples_option(default: int, help: str, minimum: int = 1) -> Callable[[F], F]:
    """``--n-resamples`` (bootstrap resamples); ``--n-boot`` stays accepted as a hidden alias."""
    return click.option(
        "--n-resamples",
        "--n-boot",
        "n_resamples",
        cls=HiddenAliasOption,
        hidden_aliases=("--n-boot",),
        default=default,
        show_default=True,
        type=click.IntRange(min=minimum),
        help=help,
    )


cache_dir_option = click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where trained demo models are cached (default ~/.cache/humanlike).",
)
"""``--cache-dir`` of the commands that train or load the demo models."""

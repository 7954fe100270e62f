"""Words shared by the server and the analysis package (importable by both without Flask)."""

from __future__ import annotations

from enum import StrEnum


class StimulusKind(StrEnum):
    """What a stimulus is: a natural image, a controversial synthesis, an MLDS level, or a catch image."""

    NATURAL = "natural"
    CONTROVERSIAL = "controversial"
    MLDS = "mlds"
    CATCH = "catch"


STIMULUS_KINDS: tuple[str, ...] = tuple(kind.value for kind in StimulusKind)

"""The trial-type registry (DESIGN.md, Trial types): one entry per type declares its response
check, its export table with the columns it adds (and their codebook text), its frame builder,
whether the browser runner can show it, the timeline entries it builds for a spec block, the checks
of its manifest rows, the block settings it accepts and its simulated participant's answer. Adding
a type is one entry here (and, in the browser, its file that registers its trial builder with
``HumanlikeTrialTypes`` in ``static/js/trial_types.js``).

Records another system keeps in its own storage (psiTurk's) are not trial types: the export reads
them through ``export/stored_records.py``.

No module outside this one compares a trial type to a literal (``tests/server/test_registry.py``):
they ask the registry (``TRIAL_TYPES[name]``, its fields and the functions at the end)."""

from __future__ import annotations

from humanlike.server.trial_types.base import TrialType
from humanlike.server.trial_types.classification import CLASSIFICATION
from humanlike.server.trial_types.debrief import DEBRIEF
from humanlike.server.trial_types.odd_one_out import ODD_ONE_OUT
from humanlike.server.trial_types.rating import RATING
from humanlike.server.trial_types.triad import TRIAD

TRIAL_TYPES: dict[str, TrialType] = {t.name: t for t in (RATING, TRIAD, CLASSIFICATION, ODD_ONE_OUT,
                                                            DEBRIEF)}
"""Every trial type by name, in the order the export writes their tables."""


def rated_types() -> list[str]:
    """Names of the types whose responses rate every category (what QC and the panel read)."""
    return [t.name for t in TRIAL_TYPES.values() if t.rated]


def internal_types() -> list[str]:
    """Names of the types the timeline makes itself (debrief): not a spec block, not in ``trials``."""
    return [t.name for t in TRIAL_TYPES.values() if t.internal]


def browser_trial_types() -> list[str]:
    """Names of the types the browser runner can show (the builders registered with
    ``HumanlikeTrialTypes``)."""
    return [t.name for t in TRIAL_TYPES.values() if t.browser]


def block_trial_types() -> list[str]:
    """Names a spec block may use: the browser's types that are not internal."""
    return [t.name for t in TRIAL_TYPES.values() if t.browser and not t.internal]


def check_block_trial_type(name: str) -> str:
    """``name`` when a spec block may use it, else ValueError saying why and what is available."""
    available = ", ".join(block_trial_types())
    known = TRIAL_TYPES.get(name)
    if known is None or known.internal:
        raise ValueError(f"unknown trial type {name!r}; available: {available}")
    if not known.browser:
        raise ValueError(f"trial type {name!r} has no browser trial yet; available: {available}")
    return name


def check_trial_type(name: str) -> str:
    """``name`` when it is a registered trial type, else ValueError listing the registered ones."""
    if name not in TRIAL_TYPES:
        raise ValueError(f"unknown trial type {name!r}; one of {list(TRIAL_TYPES)}")
    return name


def block_settings() -> dict[str, list[str]]:
    """Each per-type block setting (a ``Block`` field) and the types whose blocks accept it."""
    owners: dict[str, list[str]] = {}
    for t in TRIAL_TYPES.values():
        for name in t.settings:
            owners.setdefault(name, []).append(t.name)
    return owners


PSITURK_KIND = "psiturk"
"""The spec ``kind`` of a psiTurk-compatible experiment (``server/psiturk/``)."""

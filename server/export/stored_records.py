"""Trial records another system keeps in its own storage (psiTurk's), and the export tables made
of them: ``STORED_RECORDS`` and ``stored_record_tables``."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from humanlike.server.export.psiturk import tidy_trials
from humanlike.server.trial_types.registry import PSITURK_KIND

if TYPE_CHECKING:
    import pandas as pd

    from humanlike.server.tables.core import Experiment


@dataclass(frozen=True)
class StoredRecords:
    """Trial records another system keeps in its own storage, and the export table made of them.

    psiTurk's records are stored by its ``/sync`` route in psiTurk storage (``psiturk_trial``
    rows): they are not a browser trial, not a spec block, not posted to ``/trials``, not in the
    ``trials`` table or the codebook (their columns are the records' own keys). ``read(exp)``
    returns the experiment's table from that storage, or None when it keeps no such records:
    the export writes ``table`` for each entry that returns one (``stored_record_tables``)."""

    name: str
    table: str
    read: Callable[[Experiment], pd.DataFrame | None]


def psiturk_records(exp: Experiment) -> pd.DataFrame | None:
    """A psiTurk-compatible experiment's trial records from psiTurk storage, one row per record and
    one column per trialdata key (``export.psiturk.tidy_trials``); None for any other experiment."""
    if (exp.spec or {}).get("kind") != PSITURK_KIND:
        return None
    return tidy_trials(exp.slug)


STORED_RECORDS: dict[str, StoredRecords] = {
    r.name: r for r in (StoredRecords(name="psiturk", table="psiturk_trials", read=psiturk_records),)
}


def stored_record_tables(exp: Experiment,
                         tables: Collection[str] | None = None) -> dict[str, pd.DataFrame]:
    """The table of every ``STORED_RECORDS`` entry that ``exp`` keeps records of, by table name
    (only those in ``tables`` when given; others are not read). The export writes each, after
    its own tables; none of them is in ``TRIAL_TYPES``, so its per-type loops never see them."""
    out: dict[str, pd.DataFrame] = {}
    for entry in STORED_RECORDS.values():
        if tables is not None and entry.table not in tables:
            continue
        frame = entry.read(exp)
        if frame is not None:
            out[entry.table] = frame
    return out

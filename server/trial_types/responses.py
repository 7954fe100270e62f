"""Stored responses parsed in bulk: ``json_values`` (Python objects from the stored JSON text),
``rating_values`` (many rating responses at once, with Arrow) and ``rating_rows``, the one builder
of the rating long form (the export's ``ratings`` table and QC's input)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


def json_values(texts: Iterable[Any]) -> list[Any]:
    """Stored JSON texts as Python objects (values that are objects already stay as they are)."""
    return [json.loads(t) if isinstance(t, str) else t for t in texts]


def _json_lines(texts: Sequence[str], schema: Any, threads: bool = False) -> Any | None:
    """``texts`` parsed by Arrow as JSON lines of ``schema``, or None where Arrow cannot."""
    import pyarrow as pa
    import pyarrow.json as pj

    try:
        table = pj.read_json(
            io.BytesIO("\n".join(texts).encode()),
            read_options=pj.ReadOptions(use_threads=threads, block_size=1 << (20 if threads else 24)),
            parse_options=pj.ParseOptions(explicit_schema=schema,
                                          unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None
    return table if table.num_rows == len(texts) else None


def rating_values(responses: Iterable[Any], labels: Sequence[str],
                  threads: bool = False) -> np.ndarray:
    """(trials, categories) float ratings of rated responses (``response.ratings``) in ``labels``
    order, NaN where a label is missing; a response is its stored JSON text (parsed by Arrow, all
    at once) or an object."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    values = list(responses)
    labels = list(labels)
    column = None
    if values and all(isinstance(v, str) for v in values):
        schema = pa.schema([("ratings", pa.struct([(label, pa.float64()) for label in labels]))])
        table = _json_lines(values, schema, threads)
        column = None if table is None else table.column("ratings").combine_chunks()
    if column is None or column.null_count:  # objects, other types, or a response without ratings
        return pd.DataFrame([r["ratings"] for r in json_values(values)],
                            columns=labels).to_numpy(dtype=float).reshape(len(values), len(labels))
    if not labels:
        return np.empty((len(values), 0))
    return np.column_stack([column.field(label).to_numpy(zero_copy_only=False) for label in labels])


RATING_LONG_COLUMNS = ("category", "rating")
"""The two columns ``rating_rows`` adds to each (trial, category) row."""


def rating_rows(trials: pd.DataFrame, columns: Sequence[str],
                labels: Sequence[str]) -> pd.DataFrame:
    """Rated trials in long form: one row per (trial, category), categories in ``labels`` order,
    each trial's ``columns`` then ``category`` and ``rating``; ``trials`` holds ``response``."""
    import numpy as np

    columns = list(columns)
    if not labels:
        return trials.iloc[0:0][columns]
    n = len(labels)
    base = trials[columns].iloc[np.repeat(np.arange(len(trials)), n)].reset_index(drop=True)
    base["category"] = np.tile(list(labels), len(trials))
    base["rating"] = rating_values(trials["response"], labels).ravel()  # row-major: trial, category
    return base

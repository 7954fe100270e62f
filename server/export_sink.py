"""Where the streamed export writes a table: a CSV file appended chunk by chunk (formula-like cells
neutralised) and a Parquet file written row group by row group (``pyarrow.parquet.ParquetWriter``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import IO

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

#: first characters that make a spreadsheet run a cell as a formula (OWASP CSV injection)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def is_formula_like(value: object) -> bool:
    """True for text a spreadsheet could evaluate: starts with = + - @ tab or CR, and is not a number."""
    return (isinstance(value, str) and value.startswith(FORMULA_START)
            and _NUMBER.fullmatch(value) is None)


def neutralise_csv_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with formula-like text cells prefixed by ``'`` (a copy only when one is found)."""
    out = frame
    for column in frame.columns:
        values = frame[column]
        if not (pd.api.types.is_object_dtype(values) or pd.api.types.is_string_dtype(values)):
            continue
        bad = [v for v in pd.unique(values) if is_formula_like(v)]  # distinct values only: fast
        if bad:
            if out is frame:
                out = frame.copy()
            out[column] = values.where(~values.isin(bad), "'" + values.astype(str))
    return out


class TableSink:
    """One export table: ``name.csv`` and ``name.parquet`` in ``out``, written chunk by chunk."""

    def __init__(self, out: Path, name: str, raw_parquet: bool = True) -> None:
        self.csv_path, self.parquet_path = out / f"{name}.csv", out / f"{name}.parquet"
        self.raw_parquet = raw_parquet
        self.rows = 0
        self._csv: IO[str] | None = None
        self._parquet: pq.ParquetWriter | None = None
        self._empty: pd.DataFrame | None = None

    def write(self, frame: pd.DataFrame) -> None:
        """Append one chunk (the first one, even empty, gives the CSV its header)."""
        frame = frame.reset_index(drop=True)
        safe = neutralise_csv_cells(frame)
        if self._csv is None:
            self._csv = open(self.csv_path, "w", newline="", encoding="utf-8")  # noqa: SIM115
            safe.to_csv(self._csv, index=False)
        elif len(frame):
            safe.to_csv(self._csv, index=False, header=False)
        if not len(frame):
            self._empty = frame if self._empty is None else self._empty
            return
        self.rows += len(frame)
        data = frame if self.raw_parquet else safe
        if self._parquet is None:
            table = pa.Table.from_pandas(data, preserve_index=False)
            schema = pa.schema([f.with_type(pa.large_string()) if pa.types.is_null(f.type) else f
                                for f in table.schema], metadata=table.schema.metadata)
            self._parquet = pq.ParquetWriter(self.parquet_path, schema)
        table = pa.Table.from_pandas(data, schema=self._parquet.schema, preserve_index=False)
        self._parquet.write_table(table)

    def close(self) -> None:
        """Finish both files; a table that never got a row is written empty, with its columns."""
        if self._csv is not None:
            self._csv.close()
        if self._parquet is not None:
            self._parquet.close()
        elif self._empty is not None:
            self._empty.to_parquet(self.parquet_path, index=False)

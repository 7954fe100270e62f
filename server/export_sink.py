"""Where the streamed export writes a table: a CSV file (formula-like cells neutralised) and a
Parquet file, both appended chunk by chunk through Arrow."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

#: first characters that make a spreadsheet run a cell as a formula (OWASP CSV injection)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_NUMBER_FULL = re.compile(rf"^{_NUMBER.pattern}$")
_FORMULA = re.compile(r"^[=+\-@\t\r]")


def is_formula_like(value: object) -> bool:
    """True for text a spreadsheet could evaluate: starts with = + - @ tab or CR, and is not a number."""
    return (isinstance(value, str) and value.startswith(FORMULA_START)
            and _NUMBER.fullmatch(value) is None)


def neutralise_csv_cells(table: pa.Table) -> pa.Table:
    """``table`` with formula-like text cells prefixed by ``'`` (vectorised, RE2 via Arrow)."""
    for i, field in enumerate(table.schema):
        if not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)):
            continue
        column = table.column(i)
        risky = pc.and_(pc.match_substring_regex(column, _FORMULA.pattern),
                        pc.invert(pc.match_substring_regex(column, _NUMBER_FULL.pattern)))
        if pc.any(risky).as_py():
            quoted = pc.binary_join_element_wise(pa.scalar("'", field.type), column, pa.scalar("", field.type))
            table = table.set_column(i, field, pc.if_else(risky, quoted, column))
    return table


def _csv_table(table: pa.Table) -> pa.Table:
    """Booleans spelled as pandas writes them (True/False), everything else as Arrow writes it."""
    for i, field in enumerate(table.schema):
        if pa.types.is_boolean(field.type):
            column = pc.if_else(table.column(i), "True", "False")
            table = table.set_column(i, pa.field(field.name, pa.string()), column)
    return table


class TableSink:
    """One export table: ``name.csv`` and ``name.parquet`` in ``out``, written chunk by chunk by
    Arrow's writers (``pyarrow.csv.CSVWriter``, ``pyarrow.parquet.ParquetWriter``)."""

    def __init__(self, out: Path, name: str, raw_parquet: bool = True) -> None:
        self.csv_path, self.parquet_path = out / f"{name}.csv", out / f"{name}.parquet"
        self.raw_parquet = raw_parquet
        self.rows = 0
        self._schema: pa.Schema | None = None
        self._csv: pa_csv.CSVWriter | None = None
        self._parquet: pq.ParquetWriter | None = None

    def _table(self, frame: pd.DataFrame) -> pa.Table:
        if self._schema is None:
            table = pa.Table.from_pandas(frame, preserve_index=False)
            # a column with no value yet is text (the writers need one schema for every chunk)
            self._schema = pa.schema(
                [f.with_type(pa.large_string()) if pa.types.is_null(f.type) else f for f in table.schema],
                metadata=table.schema.metadata)
        return pa.Table.from_pandas(frame, schema=self._schema, preserve_index=False)

    def write(self, frame: pd.DataFrame) -> None:
        """Append one chunk; the first chunk (even an empty one) fixes the columns and their types."""
        if self._schema is not None and not len(frame):
            return
        raw_table = self._table(frame.reset_index(drop=True))
        safe_table = neutralise_csv_cells(raw_table)
        csv_table = _csv_table(safe_table)
        if self._csv is None:
            self._csv = pa_csv.CSVWriter(str(self.csv_path), csv_table.schema,
                                         write_options=pa_csv.WriteOptions(quoting_style="needed"))
            self._parquet = pq.ParquetWriter(str(self.parquet_path), self._schema)
        assert self._parquet is not None
        self._csv.write_table(csv_table)
        self._parquet.write_table(raw_table if self.raw_parquet else safe_table)
        self.rows += len(frame)

    def close(self) -> None:
        """Finish both files."""
        if self._csv is not None:
            self._csv.close()
        if self._parquet is not None:
            self._parquet.close()

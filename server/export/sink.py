"""Where the streamed export writes a table: a CSV file (formula-like cells neutralised) and a
Parquet file, both appended chunk by chunk through Arrow."""

from __future__ import annotations

import queue
import re
import threading
from pathlib import Path

import numpy as np
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


_FORMULA_BYTE = np.zeros(256, dtype=bool)
_FORMULA_BYTE[np.frombuffer("".join(FORMULA_START).encode(), dtype=np.uint8)] = True


def _formula_start(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Where the text cells of ``column`` start as ``_FORMULA`` matches (False where missing),
    from each cell's first byte read off Arrow's offsets and data buffers (every prefix is one
    ASCII byte)."""
    parts = []
    for chunk in column.chunks:
        _, offsets_buffer, data_buffer = chunk.buffers()[:3]
        width = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
        offsets = (np.frombuffer(offsets_buffer, dtype=width)[chunk.offset:chunk.offset + len(chunk) + 1]
                   if len(chunk) else np.zeros(1)).astype(np.int64)
        data = (np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None
                else np.zeros(0, dtype=np.uint8))
        starts = offsets[:-1]
        filled = offsets[1:] > starts
        first = np.zeros(len(chunk), dtype=np.uint8)
        first[filled] = data[starts[filled]]
        hit = _FORMULA_BYTE[first] & filled
        if chunk.null_count:
            hit &= chunk.is_valid().to_numpy(zero_copy_only=False)
        parts.append(pa.array(hit, type=pa.bool_()))
    return pa.chunked_array(parts, type=pa.bool_())


def neutralise_csv_cells(table: pa.Table) -> pa.Table:
    """``table`` with formula-like text cells prefixed by ``'`` (vectorised, RE2 via Arrow; the
    number pattern only runs on columns where some cell starts like a formula)."""
    for i, field in enumerate(table.schema):
        if not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)):
            continue
        column = table.column(i)
        start = _formula_start(column)
        if not pc.any(start).as_py():
            continue
        risky = pc.and_(start, pc.invert(pc.match_substring_regex(column, _NUMBER_FULL.pattern)))
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
            table = pa.Table.from_pandas(frame, preserve_index=False, nthreads=1)
            # a column with no value yet is text (the writers need one schema for every chunk)
            self._schema = pa.schema(
                [f.with_type(pa.large_string()) if pa.types.is_null(f.type) else f for f in table.schema],
                metadata=table.schema.metadata)
        return pa.Table.from_pandas(frame, schema=self._schema, preserve_index=False, nthreads=1)

    def prepare(self, frame: pd.DataFrame) -> tuple[pa.Table, pa.Table] | None:
        """One chunk as the CSV's table and the Parquet's (None: nothing to append); the first
        chunk (even an empty one) fixes the columns and their types."""
        if self._schema is not None and not len(frame):
            return None
        raw_table = self._table(frame.reset_index(drop=True))
        safe_table = neutralise_csv_cells(raw_table)
        return _csv_table(safe_table), (raw_table if self.raw_parquet else safe_table)

    def write_csv(self, table: pa.Table) -> None:
        """Append a prepared chunk to the CSV file."""
        if self._csv is None:
            self._csv = pa_csv.CSVWriter(str(self.csv_path), table.schema,
                                         write_options=pa_csv.WriteOptions(quoting_style="needed"))
        self._csv.write_table(table)
        self.rows += table.num_rows

    def write_parquet(self, table: pa.Table) -> None:
        """Append a prepared chunk to the Parquet file."""
        if self._parquet is None:
            self._parquet = pq.ParquetWriter(str(self.parquet_path), self._schema)
        self._parquet.write_table(table)

    def write(self, frame: pd.DataFrame) -> None:
        """Append one chunk to both files (see ``prepare``)."""
        prepared = self.prepare(frame)
        if prepared is not None:
            self.write_csv(prepared[0])
            self.write_parquet(prepared[1])

    def close(self) -> None:
        """Finish both files."""
        if self._csv is not None:
            self._csv.close()
        if self._parquet is not None:
            self._parquet.close()


class SinkWriter:
    """The sinks' writes on two background threads, in the order they were handed over and at
    most ``depth`` chunks behind each: one prepares each chunk and appends it to its CSV file, the
    other appends it to its Parquet file. Arrow's conversions and writers release the GIL, so the
    export reads and builds its next chunks meanwhile. A write that failed is raised by the next
    ``write`` or by ``close``."""

    def __init__(self, depth: int = 16) -> None:
        self._csv: queue.Queue[tuple[TableSink, pd.DataFrame] | None] = queue.Queue(maxsize=depth)
        self._parquet: queue.Queue[tuple[TableSink, pa.Table] | None] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._threads = [
            threading.Thread(target=self._run_csv, name="humanlike-export-csv", daemon=True),
            threading.Thread(target=self._run_parquet, name="humanlike-export-parquet",
                             daemon=True)]
        for thread in self._threads:
            thread.start()

    def _run_csv(self) -> None:
        try:
            while (item := self._csv.get()) is not None:
                sink, frame = item
                if self._error is not None:
                    continue
                try:
                    prepared = sink.prepare(frame)
                    if prepared is not None:
                        sink.write_csv(prepared[0])
                        self._parquet.put((sink, prepared[1]))
                except BaseException as exc:  # handed to the exporting thread
                    self._error = exc
        finally:
            self._parquet.put(None)

    def _run_parquet(self) -> None:
        while (item := self._parquet.get()) is not None:
            sink, table = item
            if self._error is None:
                try:
                    sink.write_parquet(table)
                except BaseException as exc:  # handed to the exporting thread
                    self._error = exc

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def write(self, sink: TableSink, frame: pd.DataFrame) -> None:
        """Hand ``frame`` over to be appended to ``sink``."""
        self._raise()
        self._csv.put((sink, frame))

    def close(self) -> None:
        """Wait for every write handed over; raise the first that failed."""
        if self._threads[0].is_alive():
            self._csv.put(None)
        for thread in self._threads:
            thread.join()
        self._raise()

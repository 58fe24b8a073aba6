"""Rows -> Parquet part files while a run goes -> one merged file at the end; nothing lost, memory bounded.

Used by the recorder (``requests.parquet``) and the telemetry poller (``telemetry.parquet``). A batch stays
in memory until its part file is on disk: a failed write (a full disk) keeps it for the next flush. A row
whose values do not fit the schema cannot be written at all; it is counted in ``rows_lost`` with the reason,
and the other rows of its batch are written. The part files alone are readable if the process dies before
the merge (:func:`read_table`).

Every file write goes through ``run_io`` (by default a plain call): a caller on an event loop hands it to a
native thread, so a large part does not stall the loop while pyarrow encodes it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .layout import UnreadableFile, atomic_write, write_parquet

__all__ = ["PartWriter", "merge_parts", "read_parquet", "read_table", "source_files"]

log = logging.getLogger(__name__)

PART_GLOB = "part-*.parquet"


def call(function: Callable, *args: Any) -> Any:
    return function(*args)


class PartWriter:
    def __init__(
        self,
        run_dir: Path,
        target: str,
        parts: str,
        schema: pa.Schema,
        sort_by: list[tuple[str, str]] | None = None,
        run_io: Callable[..., Any] = call,
    ):
        self.target = Path(run_dir) / target
        self.parts_dir = Path(run_dir) / parts
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        self.schema = schema
        self.sort_by = sort_by
        self.buffer: list[dict] = []  # rows not yet converted
        self.tables: list[pa.Table] = []  # converted, not yet written
        self.part_count = len(list(self.parts_dir.glob(PART_GLOB)))
        self.rows_written = 0
        self.rows_lost = 0
        self.loss_reasons: list[str] = []
        self.write_failures = 0
        self.run_io = run_io
        self.in_flight = 0  # rows of the part being written

    def add(self, rows: list[dict]) -> None:
        self.buffer.extend(rows)

    def add_table(self, table: pa.Table) -> None:
        """Rows already converted (with this writer's schema): written at the next flush."""
        self.tables.append(table)

    def convert(self) -> None:
        """Turn the buffered rows into Arrow now (a caller that must not block long converts small slices)."""
        if self.buffer:
            rows, self.buffer = self.buffer, []
            self.tables.append(self._table(rows))

    @property
    def pending(self) -> int:
        return len(self.buffer) + sum(t.num_rows for t in self.tables) + self.in_flight

    def _table(self, rows: list[dict]) -> pa.Table:
        try:
            return pa.Table.from_pylist(rows, schema=self.schema)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            pass
        good = []
        for row in rows:  # one bad value must not cost its whole batch
            try:
                pa.Table.from_pylist([row], schema=self.schema)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                self.rows_lost += 1
                if len(self.loss_reasons) < 10:
                    self.loss_reasons.append(f"{type(exc).__name__}: {str(exc)[:200]}")
                continue
            good.append(row)
        return pa.Table.from_pylist(good, schema=self.schema)

    def flush(self) -> bool:
        """Write the buffered rows as one part file; False (rows kept) when the write failed. One flush at a
        time: a caller whose ``run_io`` lets others run makes them wait (the recorder holds a lock)."""
        self.convert()
        if not self.tables:
            return True
        # Taken out before the write: rows added while ``run_io`` lets others run go to the next part.
        table, self.tables = pa.concat_tables(self.tables), []
        path = self.parts_dir / f"part-{self.part_count + 1:06d}.parquet"
        self.in_flight = table.num_rows
        try:
            self.run_io(write_parquet, path, table)
        except Exception as exc:
            self.tables.insert(0, table)  # kept for the next flush, as before it was taken out
            if not isinstance(exc, OSError):
                raise
            self.write_failures += 1
            # Said on the first failures and then every hundredth: a disk that stays full fails every flush.
            if self.write_failures <= 3 or self.write_failures % 100 == 0:
                log.warning(
                    "could not write %s (%s); keeping %d rows in memory to retry (failure %d)",
                    path,
                    exc.strerror or exc,
                    table.num_rows,
                    self.write_failures,
                )
            return False
        finally:
            self.in_flight = 0
        self.part_count += 1
        self.rows_written += table.num_rows
        return True

    def merge(self) -> Path:
        """All part files -> the target file (streamed, or sorted when ``sort_by`` is set); idempotent."""
        self.flush()
        self.run_io(merge_parts, self.target, self.parts_dir, self.schema, self.sort_by)
        return self.target

    def close(self, attempts: int = 3) -> Path:
        """Final merge; rows that still cannot be written count as lost; the part files go once merged."""
        for _ in range(attempts):
            if self.flush():
                break
        if self.pending:
            self.loss_reasons.append(f"{self.pending} rows could not be written (disk full or not writable)")
            self.rows_lost += self.pending
            self.buffer, self.tables = [], []
        self.merge()
        for part in self.parts_dir.glob(PART_GLOB):
            part.unlink()
        with contextlib.suppress(OSError):
            self.parts_dir.rmdir()
        return self.target


def merge_parts(target: Path, parts_dir: Path, schema: pa.Schema, sort_by: list[tuple[str, str]] | None = None) -> Path:
    parts = sorted(Path(parts_dir).glob(PART_GLOB))
    if target.exists() and not parts:
        return target
    if sort_by:
        tables = [pq.read_table(part, schema=schema) for part in parts]
        table = pa.concat_tables(tables) if tables else schema.empty_table()
        return write_parquet(target, table.sort_by(sort_by) if table.num_rows else table)

    def stream(tmp: Path) -> None:
        with pq.ParquetWriter(tmp, schema) as writer:
            for part in parts:
                writer.write_table(pq.read_table(part, schema=schema))

    return atomic_write(target, stream)


def _read(path: Path, columns: list[str] | None) -> pa.Table:
    try:
        # Row group by row group, on one thread: reading a night's requests costs their size, not twice it.
        return pq.read_table(path, columns=_present(pq.read_schema(path), columns), pre_buffer=False, use_threads=False)
    except (pa.ArrowException, OSError) as exc:
        raise UnreadableFile(f"{path}: cannot read this Parquet file, it is truncated or damaged ({exc})") from None


def source_files(run_dir: Path, target: str, parts: str) -> list[Path]:
    """The files that hold the rows: the merged file when its footer reads, else the part files (a run that died
    before its merge, or a merged file damaged since); [] when neither exists. ``UnreadableFile`` when the merged
    file is damaged and no part file is left to read instead."""
    path = Path(run_dir) / target
    files = sorted((Path(run_dir) / parts).glob(PART_GLOB))
    if not path.exists():
        return files
    try:
        pq.read_metadata(path)
        return [path]
    except (pa.ArrowException, OSError) as exc:
        if not files:
            raise UnreadableFile(
                f"{path}: cannot read this Parquet file, it is truncated or damaged ({exc}); no part files are left "
                "to read instead"
            ) from None
        log.warning("%s cannot be read (%s); reading its %d part files instead", path, exc, len(files))
        return files


def read_table(run_dir: Path, target: str, parts: str, columns: list[str] | None = None) -> pa.Table | None:
    """The merged file, or the part files of a run that died before its merge (or whose merged file is damaged);
    None when neither exists."""
    files = source_files(run_dir, target, parts)
    if not files:
        return None
    tables = [_read(f, columns) for f in files]
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="default")


def read_parquet(path: Path) -> pa.Table:
    """One whole Parquet file; ``UnreadableFile`` naming it when it is truncated or damaged."""
    return _read(Path(path), None)


def _present(schema: pa.Schema, columns: list[str] | None) -> list[str] | None:
    return None if columns is None else [c for c in columns if c in schema.names]

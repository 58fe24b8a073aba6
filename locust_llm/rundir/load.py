"""A run directory -> ``RunData``: everything the analysis reads, typed, in one place.

Reads the merged files, or the part files of a run that was killed before its merge. The per-chunk lists are
the bulk of a large run (a gigabyte per million requests of 256 tokens), so they stay on disk: ``ChunkLists``
reads the row groups that hold the rows asked for, when they are asked for (one step at a time).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ValidationError

from ..records import REQUESTS_SCHEMA, ErrorClass
from . import layout
from .clocks import align, samples_of
from .consistency import Consistency, ConsistencyAnswer
from .env import RunEnv
from .events import Event, Unfinished, UsageSuspect, parse_event
from .parts import read_parquet, read_table, source_files
from .probes import ProbeResult, ProbesFile
from .quality import QualityFile
from .steps import StepRow
from .telemetry_meta import TelemetryMeta

__all__ = [
    "ChunkLists",
    "RunData",
    "amend_usage",
    "close_open_steps",
    "flat_rows",
    "load_requests",
    "load_run",
    "load_telemetry",
    "read_events",
    "read_steps",
    "read_typed",
    "split_requests",
]

TELEMETRY_COLUMNS = ["t", "variant", "source", "metric", "labels", "value"]
LIST_COLUMNS = ["chunk_offsets", "chunk_tokens", "chunk_drafted", "chunk_accepted"]
M = TypeVar("M", bound=BaseModel)


@dataclass
class RunData:
    """One run directory's contents (or several merged)."""

    requests: pd.DataFrame  # one row per request; index = row position in ``lists``
    steps: list[StepRow]
    events: list[Event] = field(default_factory=list)
    env: RunEnv = field(default_factory=RunEnv)
    client: pd.DataFrame = field(default_factory=pd.DataFrame)
    host: pd.DataFrame = field(default_factory=pd.DataFrame)  # HOST_SCHEMA rows; empty when not recorded
    consistency: dict[str, list[ConsistencyAnswer]] = field(default_factory=dict)
    quality: QualityFile | None = None  # quality.json: the task set and every variant's answers (None: no check)
    probes: list[ProbeResult] = field(default_factory=list)  # probes.json: one row per probe or fault
    telemetry: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=TELEMETRY_COLUMNS))
    telemetry_meta: TelemetryMeta = field(default_factory=TelemetryMeta)
    run_dir: Path | None = None
    lists: ChunkLists | None = None  # chunk_offsets, chunk_tokens per request (None: columns of ``requests``)


class ChunkLists:
    """The per-chunk lists of a run's requests, by row position, as blocks read only when needed."""

    def __init__(self, blocks: list[tuple[int, int, Callable[[], pa.Table]]]):
        self.blocks = blocks  # (first row, rows, read the block's lists)

    @classmethod
    def of_files(cls, files: list[Path]) -> ChunkLists:
        blocks: list[tuple[int, int, Callable[[], pa.Table]]] = []
        first = 0
        for path in files:
            meta = pq.ParquetFile(path).metadata
            for group in range(meta.num_row_groups):
                rows = meta.row_group(group).num_rows
                blocks.append((first, rows, partial(_read_group, path, group)))
                first += rows
        return cls(blocks)

    @classmethod
    def concat(cls, parts: list[ChunkLists]) -> ChunkLists:
        blocks, first = [], 0
        for part in parts:
            for _, rows, read in part.blocks:
                blocks.append((first, rows, read))
                first += rows
        return cls(blocks)

    def select(self, positions: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per list column, the rows at ``positions`` (ascending) as ``(items per row, items flat)``, reading only
        the blocks that hold them; a null list has no items. Selected in NumPy, one block at a time: Arrow's
        ``take`` copies every list it keeps (a quarter of the analysis of a million requests)."""
        lengths: dict[str, list[np.ndarray]] = {name: [] for name in LIST_COLUMNS}
        items: dict[str, list[np.ndarray]] = {name: [] for name in LIST_COLUMNS}
        for first, rows, read in self.blocks:
            lo, hi = np.searchsorted(positions, [first, first + rows])
            if hi <= lo:
                continue
            keep = np.zeros(rows, dtype=bool)
            keep[positions[lo:hi] - first] = True
            block = read()
            for name in LIST_COLUMNS:
                counts, values = flat_rows(block.column(name), keep)
                lengths[name].append(counts)
                items[name].append(values)
        return {name: (_joined(lengths[name], np.int64), _joined(items[name], np.float64)) for name in LIST_COLUMNS}


def _joined(parts: list[np.ndarray], empty: type[np.generic]) -> np.ndarray:
    """``np.concatenate(parts)``, each part let go once copied: a step's chunks are never held twice. No parts:
    an empty array of type ``empty``."""
    if not parts:
        return np.empty(0, dtype=empty)
    out = np.empty(sum(part.size for part in parts), dtype=parts[0].dtype)
    at = 0
    while parts:
        part = parts.pop(0)
        out[at : at + part.size] = part
        at += part.size
    return out


def flat_rows(column: pa.ChunkedArray | pa.Array, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(items per kept row, the kept rows' items flat)`` of a list column; ``keep``: one flag per row."""
    lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    items = pc.list_flatten(column).to_numpy(zero_copy_only=False)
    if keep.all():
        return lengths, items
    return lengths[keep], items[np.repeat(keep, lengths)]


def _read_group(path: Path, group: int) -> pa.Table:
    return pq.ParquetFile(path).read_row_group(group, columns=LIST_COLUMNS)


def load_requests(run_dir: Path, columns: list[str] | None = None) -> pd.DataFrame:
    """``requests.parquet`` (or its parts) as one frame, lists included."""
    table = read_table(run_dir, layout.REQUESTS, layout.REQUEST_PARTS, columns)
    if table is None:
        names = columns or REQUESTS_SCHEMA.names
        return REQUESTS_SCHEMA.empty_table().select(names).to_pandas()
    return table.to_pandas()


def split_requests(run_dir: Path) -> tuple[pd.DataFrame, ChunkLists]:
    """The scalar columns as a frame, and the per-chunk lists left on disk behind a ``ChunkLists``."""
    scalars = [name for name in REQUESTS_SCHEMA.names if name not in LIST_COLUMNS]
    table = read_table(run_dir, layout.REQUESTS, layout.REQUEST_PARTS, scalars)
    files = source_files(run_dir, layout.REQUESTS, layout.REQUEST_PARTS)
    frame = table.to_pandas() if table is not None else REQUESTS_SCHEMA.empty_table().select(scalars).to_pandas()
    return frame, ChunkLists.of_files(files)


def load_telemetry(run_dir: Path) -> pd.DataFrame:
    table = read_table(run_dir, layout.TELEMETRY, layout.TELEMETRY_PARTS)
    return table.to_pandas() if table is not None else pd.DataFrame(columns=TELEMETRY_COLUMNS)


def _misfits(exc: ValidationError, whole: str, skip: int = 0) -> str:
    """Each field that does not fit, by its place in the document (``whole``: the document itself); ``skip``: the
    leading parts of each place that are not fields (a union's tags)."""
    return "; ".join(f"{'.'.join(map(str, e['loc'][skip:])) or whole}: {e['msg']}" for e in exc.errors())


def read_steps(path: Path, rows: list) -> list[StepRow]:
    """``steps.json``'s rows, typed; a row that does not fit names the file, the row and the field."""
    steps = []
    for index, row in enumerate(rows):
        try:
            steps.append(StepRow.model_validate(row))
        except ValidationError as exc:
            raise layout.UnreadableFile(f"{path}: steps[{index}] is not a step row ({_misfits(exc, 'row')})") from None
    return steps


def read_typed(path: Path, model: type[M]) -> M | None:
    """A JSON run file as its model (None when it does not exist); one that does not fit names the file and where."""
    if not path.exists():
        return None
    try:
        return model.model_validate(layout.read_json(path))
    except ValidationError as exc:
        raise layout.UnreadableFile(f"{path}: not a {path.name} file ({_misfits(exc, 'file')})") from None


def read_events(path: Path, events: list) -> list[Event]:
    """``steps.json``'s events, typed (``rundir.events``); one of a known kind that does not fit names the file,
    the event and the field."""
    out = []
    for index, data in enumerate(events):
        try:
            out.append(parse_event(data))
        except ValidationError as exc:
            # The location starts with the union's tags (known/other, the kind): the field is what follows.
            why = _misfits(exc, "kind", skip=2)
            raise layout.UnreadableFile(f"{path}: events[{index}] is not a run event ({why})") from None
    return out


def close_open_steps(steps: list[StepRow], requests: pd.DataFrame) -> Unfinished | None:
    """Steps a run left open (no ``t_end``: it is still running, or was killed before it could finish) end at its
    last record; each is marked ``closed_at_last_record``. Returns the ``unfinished`` run event, or None."""
    open_steps = [step for step in steps if not np.isfinite(step.t_end)]
    if not open_steps:
        return None
    times = requests[[c for c in ("t_done", "t_end", "t_send") if c in requests]].to_numpy(dtype=float)
    last = float(np.nanmax(times)) if np.isfinite(times).any() else np.nan
    for step in open_steps:
        steady = step.t_steady
        step.close_at(max(last, steady) if np.isfinite(steady) and np.isfinite(last) else last)
    return Unfinished(
        t=last if np.isfinite(last) else None,
        variant=open_steps[-1].variant,
        step=open_steps[-1].step,
        steps=[step.step for step in open_steps],
    )


def amend_usage(requests: pd.DataFrame, events: list[Event]) -> pd.DataFrame:
    """Requests a tokenizer found suspect after they were sent (the ``usage_suspect`` run event: request id -> why)
    become ``suspect_usage`` failures; their rows on disk keep what the server said."""
    suspect = {rid: why for e in events if isinstance(e, UsageSuspect) for rid, why in e.requests.items()}
    if not suspect or not len(requests):
        return requests
    hit = requests["request_id"].isin(list(suspect)) & requests["error_class"].isna()
    requests.loc[hit, "error_class"] = ErrorClass.SUSPECT_USAGE
    requests.loc[hit, "error_message"] = requests.loc[hit, "request_id"].map(suspect)
    return requests


def load_run(run_dir: Path) -> RunData:
    run_dir = Path(run_dir)
    steps_doc = layout.read_json(run_dir / layout.STEPS)
    client = run_dir / layout.CLIENT
    host = run_dir / layout.HOST
    requests, lists = split_requests(run_dir)
    # Worker stamps onto the master's clock before anything is assigned to the master's step windows.
    clocks = samples_of(layout.read_json(run_dir / layout.CLOCKS).get("samples") or [])
    requests = align(requests, clocks)
    steps = read_steps(run_dir / layout.STEPS, list(steps_doc.get("steps", [])))
    events = read_events(run_dir / layout.STEPS, list(steps_doc.get("events", [])))
    requests = amend_usage(requests, events)
    unfinished = close_open_steps(steps, requests)
    return RunData(
        requests=requests,
        lists=lists,
        steps=steps,
        events=events + ([unfinished] if unfinished else []),
        env=read_typed(run_dir / layout.ENV, RunEnv) or RunEnv(),
        client=align(read_parquet(client).to_pandas(), clocks, columns=("t",)) if client.exists() else pd.DataFrame(),
        host=read_parquet(host).to_pandas() if host.exists() else pd.DataFrame(),
        consistency=(read_typed(run_dir / layout.CONSISTENCY, Consistency) or Consistency({})).root,
        quality=read_typed(run_dir / layout.QUALITY, QualityFile),
        probes=(read_typed(run_dir / layout.PROBES, ProbesFile) or ProbesFile()).probes,
        telemetry=load_telemetry(run_dir),
        telemetry_meta=read_typed(run_dir / layout.TELEMETRY_META, TelemetryMeta) or TelemetryMeta(),
        run_dir=run_dir,
    )

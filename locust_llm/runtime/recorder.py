"""Master side of the records' path (or the single process in local mode): batches -> ``requests.parquet``.

Batches are appended to Parquet part files as they arrive (``rundir.PartWriter``) and merged at the end; the
part files alone are still readable if the process dies. ``drained()`` is true when every worker is idle and
every record it sent has arrived and is on disk. A batch's records come as columns (``columns``), turned into
one Arrow table at once, plus any records that did not pack, as dicts, converted a slice at a time.

Nothing received is dropped on the way: records go to the part writer before the live figures see them, a failed
part write (a full disk) is retried every flush and again, with pauses, at the end, and whatever still cannot be
written is counted in ``parts.rows_lost`` (the experiment turns it into a ``records_lost`` event, exit 5).

Part files are written in a native thread (``in_native_thread``): on the master, writing a part at high rates
took 1-2 s of the event loop, near Locust's ~3 s heartbeat limit, past which its workers would count as lost.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent
import pyarrow as pa
from gevent.event import Event
from gevent.lock import BoundedSemaphore

from ..client import ledger
from ..records import REQUESTS_SCHEMA, now
from ..rundir import PartWriter, layout
from . import columns as cols
from .live import LiveStats
from .shipper import progress_key

log = logging.getLogger(__name__)

__all__ = ["CLIENT_SCHEMA", "Recorder", "in_native_thread"]

FLUSH_INTERVAL_S = 2.0
CLOSE_ATTEMPTS = 5  # the last flush: a disk that frees up within a few seconds still gets every row
CLOSE_RETRY_S = 1.0
INTAKE_SLICE = 200  # records converted at a time: streams sharing this process wait at most for one slice
CLIENT_SCHEMA = pa.schema(
    [
        ("t", pa.float64()),
        ("worker", pa.int32()),
        ("cpu_percent", pa.float64()),
        ("loop_lag_ms_max", pa.float64()),
        ("loop_lag_ms_mean", pa.float64()),
    ]
)


def _caught(function: Callable, args: tuple) -> tuple[Any, OSError | None]:
    try:
        return function(*args), None
    except OSError as exc:
        return None, exc


def in_native_thread(function: Callable, *args):
    """``function(*args)`` in gevent's pool of native threads; the calling greenlet waits, the loop runs on
    (heartbeats, messages, streams): pyarrow releases the GIL while it encodes and writes. An ``OSError`` (a full
    disk) comes back as a value and is raised here: gevent would print a traceback for one raised in its pool."""
    result, error = gevent.get_hub().threadpool.apply(_caught, (function, args))
    if error is not None:
        raise error
    return result


@dataclass
class WorkerTally:
    received: int = 0
    sent_total: int = 0
    users_running: int = 0
    final: bool = False
    pid: int | None = None
    progress: dict = field(default_factory=dict)  # "variant|step" -> [completed steady requests, output tokens]
    ledger: dict = field(default_factory=dict)  # its requests to servers besides the streams (``client.ledger``)
    refused: list[str] = field(default_factory=list)  # why it could not build a request (the run stops, exit 2)
    created: int = 0  # records it made so far (requests sent or dropped), as it last said


class Recorder:
    """Receives record batches and keeps them on disk under ``run_dir``."""

    def __init__(self, run_dir: Path, clock_offsets: Callable[[], dict[str, float]] = dict):
        self.run_dir = Path(run_dir)
        self.parts = PartWriter(
            self.run_dir, layout.REQUESTS, layout.REQUEST_PARTS, REQUESTS_SCHEMA, run_io=in_native_thread
        )
        self._writing = BoundedSemaphore()  # one part write or merge at a time (others wait, the loop runs on)
        self._stop = Event()
        self.client_samples: list[dict] = []
        self.live = LiveStats()
        self.tally: dict[int, WorkerTally] = {}
        self.intake: deque[dict] = deque()  # received records as dicts, not yet converted
        self.batches: deque[dict] = deque()  # received column batches, not yet converted
        self.lost: set[int] = set()  # workers that stopped answering: nothing more will come from them
        self.suspect: dict[str, str] = {}  # request id -> why a tokenizer found its usage suspect (after it was sent)
        self.clock_offsets = clock_offsets  # the live figures go by the master's clock, like the analysis
        self._loop = gevent.spawn(self._flush_forever)

    @property
    def rows_written(self) -> int:
        return self.parts.rows_written

    def on_batch(self, data: dict) -> None:
        tally = self.tally.setdefault(int(data["worker"]), WorkerTally())
        packed = data.get("columns")
        tally.received += len(data["records"]) + (packed["n"] if packed else 0)
        tally.sent_total = int(data["sent_total"])
        tally.users_running = int(data["users_running"])
        tally.final = tally.final or bool(data.get("final"))
        tally.pid = data.get("pid", tally.pid)
        tally.progress = data.get("progress") or tally.progress
        tally.ledger = data.get("ledger") or tally.ledger
        tally.refused = list(data.get("refused") or tally.refused)
        tally.created = max(tally.created, int(data.get("created") or 0))
        self.suspect.update(data.get("suspect") or {})
        if packed:
            self.batches.append(packed)
        self.intake.extend(data["records"])
        self.client_samples.extend(data.get("client") or [])
        self.live.add([], data.get("client") or [])

    def on_created(self, data: dict) -> None:
        """A worker's running count of the records it made (``shipper.tell_created``)."""
        tally = self.tally.setdefault(int(data["worker"]), WorkerTally())
        tally.created = max(tally.created, int(data["created"]))

    def unaccounted(self, worker: int) -> int:
        """Records a worker made that never arrived: requests in flight or not yet shipped when it was last heard."""
        tally = self.tally.get(worker)
        return max(tally.created - tally.received, 0) if tally is not None else 0

    def take_in(self, pause: bool = True) -> None:
        """Received records -> live figures and Arrow. Dicts go a slice at a time: in a single-process run this
        shares the event loop with the streams, whose stamps must not wait for a whole second's batch; a column
        batch costs less than one such slice."""
        while self.batches:
            packed = self.batches.popleft()
            try:
                table = cols.to_table(packed)
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                self.intake.extend(cols.to_rows(packed))  # row by row: a value that does not fit costs only its row
                continue
            self.parts.add_table(table)
            self._live(lambda table=table: self.live.add_table(table, self.clock_offsets()))
            if pause:
                gevent.sleep(0)
        while self.intake:
            rows = [self.intake.popleft() for _ in range(min(INTAKE_SLICE, len(self.intake)))]
            self.parts.add(rows)
            self._live(lambda rows=rows: self.live.add(rows, [], self.clock_offsets()))
            self.parts.convert()
            if pause:
                gevent.sleep(0)

    @staticmethod
    def _live(add: Callable[[], None]) -> None:
        """The live figures only feed the web UI: a record they cannot take must not cost the run its records."""
        try:
            add()
        except Exception:
            log.exception("the live figures could not take a batch; its records are still written")

    def received(self) -> int:
        return sum(t.received for t in self.tally.values())

    def flush(self) -> bool:
        """What was taken in -> one part file, written off the event loop; False (rows kept) when it failed."""
        with self._writing:
            return self.parts.flush()

    def drained(self) -> bool:
        """Every worker idle, every record it sent received, and every received record written, lost, or held for
        the last flush (a disk that refuses writes must not hold the run: ``close`` retries, then counts them)."""
        self.take_in(pause=False)
        self.flush()
        on_disk = self.parts.rows_written + self.parts.rows_lost + self.parts.pending == self.received()
        return (
            bool(self.tally)
            and on_disk
            and all(
                t.users_running == 0 and t.received == t.sent_total for w, t in self.tally.items() if w not in self.lost
            )
        )

    def progress(self, variant: str, step: int) -> tuple[int, int]:
        """Completed steady-window requests of a step and their output tokens, over every worker so far."""
        key = progress_key(variant, step)
        counts = [t.progress.get(key, (0, 0)) for t in self.tally.values()]
        return sum(c[0] for c in counts), sum(c[1] for c in counts)

    def server_requests(self, own: dict) -> dict:
        """Every load process's requests to servers besides the streams, with this process's own (``own``, which
        replaces what it shipped to itself in a single-process run)."""
        others = {t.pid: t.ledger for t in self.tally.values() if t.pid != os.getpid()}
        return ledger.merged(own, *others.values())

    def worker_pids(self) -> set[int]:
        return {t.pid for t in self.tally.values() if t.pid}

    def missing(self) -> dict[int, int]:
        return {w: t.sent_total - t.received for w, t in self.tally.items() if t.sent_total != t.received}

    def _flush_forever(self) -> None:
        flushed = now()
        while not self._stop.wait(0.1):
            try:
                self.take_in()
                if now() - flushed >= FLUSH_INTERVAL_S:
                    self.flush()  # a failed write keeps its rows for the next round
                    flushed = now()
            except Exception:  # a dead flusher would leave the rest of the run in memory, unwritten
                log.exception("writing the records failed; they are kept and written in the next round")

    def finalize(self) -> Path:
        """Merge all parts into ``requests.parquet`` (streamed); idempotent; ``client.parquet`` beside it."""
        self.take_in(pause=False)
        # One small row per worker and second: kept in memory, written whole.
        layout.write_parquet(
            self.run_dir / layout.CLIENT, pa.Table.from_pylist(self.client_samples, schema=CLIENT_SCHEMA)
        )
        with self._writing:  # after a part being written, never beside it
            return self.parts.merge()

    def close(self) -> Path:
        """Final merge; the part files go once ``requests.parquet`` holds them. Rows that cannot be written after
        the last attempts count as lost (``parts.rows_lost``)."""
        # Stopped, not killed: a part being written in a thread is finished and counted before the merge.
        self._stop.set()
        self._loop.join()
        self.take_in(pause=False)
        for attempt in range(CLOSE_ATTEMPTS):
            if self.flush() or attempt == CLOSE_ATTEMPTS - 1:
                break
            gevent.sleep(CLOSE_RETRY_S)
        self.finalize()
        with self._writing:
            return self.parts.close()

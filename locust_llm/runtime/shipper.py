"""Worker side of the records' path: this process's records and client samples -> the recorder, once a second.

Each batch is a custom Locust message with the worker's running total, so the master can tell when every
record a worker sent has arrived. The records travel as columns (``columns.ColumnBatch``): the master converts a
batch without a Python object per record or per token. A batch that cannot be sent is kept and retried. Each
batch also carries the worker's pid and its running count of completed steady-window requests per step
(``progress``): the master extends a step that has seen too few, even while records wait for their tokenizer split;
and what this process asked of the servers besides the streams (``client.ledger``), for ``env.json``.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import gevent

from ..client import ledger
from ..records import Phase, RequestRecord
from .clientmon import ClientMonitor
from .columns import ColumnBatch

log = logging.getLogger(__name__)

__all__ = ["CREATED_MESSAGE", "RECORDS_MESSAGE", "RecordShipper", "progress_key"]

RECORDS_MESSAGE = "llm_records"
CREATED_MESSAGE = "llm_created"  # a worker's running count of requests made, between batches
SHIP_INTERVAL_S = 1.0
CREATED_INTERVAL_S = 0.1  # a lost worker's requests in flight are known up to this long before it stopped
REFINE_WAIT_S = 60.0  # at the end, how long records still being refined may take
# Refinements wait for a pause in the load (they call a tokenizer, perhaps the server's own) unless this many pile up.
MAX_DEFERRED = 5000


def progress_key(variant: str, step: int) -> str:
    return f"{variant}|{step}"


class RecordShipper:
    """Collects this process's records (and its client samples) and sends them to the recorder in batches."""

    def __init__(self, runner, worker: int, measuring: Callable[[], bool] = lambda: False, remote: bool = False):
        self.runner = runner
        self.worker = worker
        self.remote = remote  # a worker process: the master must learn of its requests before their records
        self.created = 0  # records made (each request, sent or dropped): the master counts those that never arrive
        self.created_told = 0
        self.measuring = measuring  # True while a step's warm-up or steady window runs
        # Steady-window requests still arriving (after their window, perhaps): request id -> (variant, step).
        self.streaming: dict[str, tuple[str, int]] = {}
        self.monitor = ClientMonitor(worker)
        self.buffer = ColumnBatch()
        self.sent_total = 0
        self.users_running = 0
        self.deferred: deque[tuple[RequestRecord, Callable[[], None]]] = deque()
        self.progress: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # "variant|step" -> [requests, tokens]
        self.refusals: list[str] = []  # why this process could not build a request (never sent, never a row)
        self.checks: deque[tuple[str, Callable[[], str | None]]] = deque()  # usage checks of records already sent
        self.suspect: dict[str, str] = {}  # request id -> why its usage is suspect, not yet told to the master
        self._loop: gevent.Greenlet | None = None

    def add(self, record: RequestRecord) -> None:
        self.count(record)
        self.buffer.add(record)

    def add_after(self, record: RequestRecord, work: Callable[[], None]) -> None:
        """Ship ``record`` once ``work`` (counting its chunks' tokens) has run. The work waits until no step is
        being measured and no stream a window sent is still arriving, so neither this process's stamps nor the server
        see it while anything is measured."""
        self.count(record)
        self.deferred.append((record, work))

    def check_later(self, request_id: str, check: Callable[[], str | None]) -> None:
        """A check of a shipped record's usage (``Split.check``): run when no step is measured, like ``refine``; a
        record it finds suspect is told to the master (``suspect`` in a batch), which amends the run."""
        self.checks.append((request_id, check))

    def refuse(self, message: str) -> None:
        """A request this process could not build (nothing was sent): said once to the master, which stops the
        run with exit 2, instead of a row per attempt."""
        if message not in self.refusals:
            log.error("cannot build a request, nothing was sent: %s", message)
            self.refusals.append(message)

    def count(self, record: RequestRecord) -> None:
        if record.phase == Phase.STEADY and record.ok:
            done = self.progress[progress_key(record.variant, record.step)]
            done[0] += 1
            done[1] += int(record.output_tokens)

    @contextmanager
    def measured_stream(self, record: RequestRecord) -> Iterator[None]:
        """Around one request's stream: a steady-window request holds the counting back until its last chunk, even
        after its window closed (the end of a window's streams is measured too)."""
        if record.phase != Phase.STEADY:
            yield
            return
        self.streaming[record.request_id] = (record.variant, record.step)
        try:
            yield
        finally:
            self.streaming.pop(record.request_id, None)

    def held_back(self) -> bool:
        """A window is being measured, or its streams are still arriving, and the records waiting are few enough to
        wait: tokenizer calls (perhaps to the server under test) stop, even in the middle of a backlog that began
        between steps."""
        return (self.measuring() or bool(self.streaming)) and len(self.deferred) <= MAX_DEFERRED

    def refine(self) -> None:
        while self.deferred and not self.held_back():
            record, work = self.deferred.popleft()
            try:
                work()
            except Exception as exc:  # the record keeps what it had: its counts stay marked approximate
                log.debug("refining %s failed: %s", record.request_id, exc)
            self.buffer.add(record)
        while self.checks and not self.held_back():
            request_id, check = self.checks.popleft()
            try:
                why = check()
            except Exception as exc:  # unchecked, not suspect
                log.debug("checking the usage of %s failed: %s", request_id, exc)
                continue
            if why:
                self.suspect[request_id] = why

    def start(self) -> None:
        self.monitor.start()
        if self._loop is None:
            self._loop = gevent.spawn(self._ship_forever)

    def _ship_forever(self) -> None:
        ticks = round(SHIP_INTERVAL_S / CREATED_INTERVAL_S)
        for tick in itertools.count(1):
            gevent.sleep(CREATED_INTERVAL_S)
            if tick % ticks:
                self.tell_created()
                continue
            if self.deferred or self.checks:
                self.refine()
            self.ship()

    def tell_created(self) -> None:
        """Between batches, how many requests this worker has made: if it stops answering, the master knows how many
        were in flight or not yet shipped (lost) up to ``CREATED_INTERVAL_S`` before."""
        if not self.remote or self.created == self.created_told:
            return
        try:
            self.runner.send_message(CREATED_MESSAGE, {"worker": self.worker, "created": self.created})
            self.created_told = self.created
        except Exception:  # the next batch carries it too
            log.debug("could not send the request count to the master", exc_info=True)

    def ship(self, final: bool = False) -> None:
        batch, self.buffer = self.buffer, ColumnBatch()
        client = self.monitor.drain()
        self.sent_total += len(batch)
        # Records still waiting to be refined (or checked) count as running work: the master waits for them.
        self.users_running = (self.runner.user_count + len(self.deferred) + len(self.checks)) if not final else 0
        suspect, self.suspect = self.suspect, {}
        try:
            self.runner.send_message(
                RECORDS_MESSAGE,
                {
                    "worker": self.worker,
                    "records": batch.misfits,
                    "columns": batch.columns(),
                    "client": client,
                    "sent_total": self.sent_total,
                    "users_running": self.users_running,
                    "final": final,
                    "pid": os.getpid(),
                    "progress": dict(self.progress),
                    "ledger": ledger.snapshot(),  # this process's requests besides the streams, so far
                    "refused": self.refusals[:5],
                    "created": self.created,
                    "suspect": suspect,
                },
            )
        except Exception:  # keep the batch; the next ship retries it
            log.exception("could not send %d records to the master; will retry", len(batch))
            batch.extend(self.buffer)
            self.buffer = batch
            self.monitor.samples = client + self.monitor.samples
            self.sent_total -= len(batch)
            self.suspect = {**suspect, **self.suspect}

    def stop(self) -> None:
        self.measuring = lambda: False  # the load has stopped (a step cut short included): nothing waits any more
        self.streaming.clear()
        with gevent.Timeout(REFINE_WAIT_S, False):
            self.refine()
        for record, _ in self.deferred:  # out of time: shipped with the counts they have
            self.buffer.add(record)
        self.deferred.clear()
        if self._loop is not None:
            self._loop.kill()
            self._loop = None
        self.monitor.stop()
        self.ship(final=True)

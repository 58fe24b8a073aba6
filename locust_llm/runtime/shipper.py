"""Worker side of the records' path: this process's records and client samples -> the recorder, once a second.

Each batch is a custom Locust message with the worker's running total, so the master can tell when every
record a worker sent has arrived. A batch that cannot be sent is kept and retried.
"""

from __future__ import annotations

import logging

import gevent

from ..records import RequestRecord
from .clientmon import ClientMonitor

log = logging.getLogger(__name__)

__all__ = ["RECORDS_MESSAGE", "RecordShipper"]

RECORDS_MESSAGE = "llm_records"
SHIP_INTERVAL_S = 1.0


class RecordShipper:
    """Collects this process's records (and its client samples) and sends them to the recorder in batches."""

    def __init__(self, runner, worker: int):
        self.runner = runner
        self.worker = worker
        self.monitor = ClientMonitor(worker)
        self.buffer: list[dict] = []
        self.sent_total = 0
        self.users_running = 0
        self._loop: gevent.Greenlet | None = None

    def add(self, record: RequestRecord) -> None:
        self.buffer.append(record.to_dict())

    def start(self) -> None:
        self.monitor.start()
        if self._loop is None:
            self._loop = gevent.spawn(self._ship_forever)

    def _ship_forever(self) -> None:
        while True:
            gevent.sleep(SHIP_INTERVAL_S)
            self.ship()

    def ship(self, final: bool = False) -> None:
        batch, self.buffer = self.buffer, []
        client = self.monitor.drain()
        self.sent_total += len(batch)
        self.users_running = self.runner.user_count if not final else 0
        try:
            self.runner.send_message(RECORDS_MESSAGE, {
                "worker": self.worker, "records": batch, "client": client, "sent_total": self.sent_total,
                "users_running": self.users_running, "final": final})
        except Exception:  # keep the batch; the next ship retries it
            log.exception("could not send %d records to the master; will retry", len(batch))
            self.buffer = batch + self.buffer
            self.monitor.samples = client + self.monitor.samples
            self.sent_total -= len(batch)

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.kill()
            self._loop = None
        self.monitor.stop()
        self.ship(final=True)

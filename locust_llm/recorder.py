"""Records from every process -> one ``requests.parquet``; nothing lost, memory bounded.

Worker side (any process running users): ``RecordShipper`` batches records and sends them to
the master once a second as a custom Locust message, with its running total. Master side (or the
single process in local mode): ``Recorder`` appends batches to Parquet part files as they
arrive and merges them into ``requests.parquet`` at the end; the part files alone are still
readable if the process dies.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import gevent
import pyarrow as pa
import pyarrow.parquet as pq

from .clientmon import ClientMonitor
from .live import LiveStats
from .records import RequestRecord

log = logging.getLogger(__name__)

RECORDS_MESSAGE = "llm_records"
SHIP_INTERVAL_S = 1.0
FLUSH_INTERVAL_S = 2.0

SCHEMA = pa.schema([
    ("run_id", pa.string()), ("variant", pa.string()), ("level", pa.float64()), ("step", pa.int32()),
    ("phase", pa.string()), ("mode", pa.string()), ("worker", pa.int32()), ("request_id", pa.string()),
    ("bucket", pa.string()), ("api", pa.string()), ("prompt_tokens", pa.int32()), ("max_tokens", pa.int32()),
    ("output_tokens", pa.int32()), ("token_source", pa.string()),
    ("t_intended", pa.float64()), ("t_send", pa.float64()), ("t_first", pa.float64()), ("t_end", pa.float64()),
    ("chunk_offsets", pa.list_(pa.float32())), ("chunk_tokens", pa.list_(pa.int32())),
    ("finish_reason", pa.string()), ("error_class", pa.string()), ("error_message", pa.string()),
    ("http_status", pa.int32()), ("draft_n", pa.int64()), ("draft_accepted", pa.int64()),
])

CLIENT_SCHEMA = pa.schema([("t", pa.float64()), ("worker", pa.int32()), ("cpu_percent", pa.float64()),
                           ("loop_lag_ms_max", pa.float64()), ("loop_lag_ms_mean", pa.float64())])


def records_table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


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


@dataclass
class WorkerTally:
    received: int = 0
    sent_total: int = 0
    users_running: int = 0
    final: bool = False


class Recorder:
    """Receives record batches and keeps them on disk under ``run_dir``."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.parts_dir = self.run_dir / "requests.parts"
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        self.buffer: list[dict] = []
        self.client_samples: list[dict] = []
        self.live = LiveStats()
        self.tally: dict[int, WorkerTally] = {}
        self.part_count = 0
        self.rows_written = 0
        self._loop = gevent.spawn(self._flush_forever)

    def on_batch(self, data: dict) -> None:
        tally = self.tally.setdefault(int(data["worker"]), WorkerTally())
        tally.received += len(data["records"])
        tally.sent_total = int(data["sent_total"])
        tally.users_running = int(data["users_running"])
        tally.final = tally.final or bool(data.get("final"))
        self.buffer.extend(data["records"])
        self.client_samples.extend(data.get("client") or [])
        self.live.add(data["records"], data.get("client") or [])

    def drained(self) -> bool:
        """Every worker idle and every record it sent received."""
        return bool(self.tally) and all(t.users_running == 0 and t.received == t.sent_total
                                        for t in self.tally.values())

    def missing(self) -> dict[int, int]:
        return {w: t.sent_total - t.received for w, t in self.tally.items() if t.sent_total != t.received}

    def _flush_forever(self) -> None:
        while True:
            gevent.sleep(FLUSH_INTERVAL_S)
            self.flush()

    def flush(self) -> None:
        if not self.buffer:
            return
        rows, self.buffer = self.buffer, []
        self.part_count += 1
        path = self.parts_dir / f"part-{self.part_count:06d}.parquet"
        tmp = path.with_suffix(".tmp")
        pq.write_table(records_table(rows), tmp)
        os.replace(tmp, path)
        self.rows_written += len(rows)

    def finalize(self) -> Path:
        """Merge all parts into ``requests.parquet`` (streamed row group by row group); idempotent."""
        self.flush()
        # One small row per worker and second: kept in memory, written whole.
        pq.write_table(pa.Table.from_pylist(self.client_samples, schema=CLIENT_SCHEMA), self.run_dir / "client.parquet")
        return merge_parts(self.run_dir)

    def close(self) -> Path:
        """Final merge; the part files go once ``requests.parquet`` holds them."""
        self._loop.kill()
        target = self.finalize()
        for part in self.parts_dir.glob("part-*.parquet"):
            part.unlink()
        self.parts_dir.rmdir()
        return target


def merge_parts(run_dir: Path) -> Path:
    run_dir = Path(run_dir)
    target = run_dir / "requests.parquet"
    parts = sorted((run_dir / "requests.parts").glob("part-*.parquet"))
    tmp = run_dir / "requests.parquet.tmp"
    with pq.ParquetWriter(tmp, SCHEMA) as writer:
        for part in parts:
            writer.write_table(pq.read_table(part, schema=SCHEMA))
    os.replace(tmp, target)
    return target

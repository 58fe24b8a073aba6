"""The recorder on the master: batches from workers -> part files -> requests.parquet; when is it drained."""

import errno
import os
import time

import gevent
import pandas as pd

import locust_llm.rundir.parts as parts_module
from locust_llm.records import RequestRecord
from locust_llm.rundir import layout
from locust_llm.runtime import recorder as recorder_module
from locust_llm.runtime.live import LiveStats
from locust_llm.runtime.recorder import Recorder


def batch(worker: int, n: int, sent_total: int, users_running: int = 0, start: int = 0, final: bool = False):
    records = [
        RequestRecord(
            run_id="r",
            variant="v",
            level=1.0,
            step=0,
            phase="steady",
            worker=worker,
            request_id=f"w{worker}-{start + i}",
        ).to_dict()
        for i in range(n)
    ]
    return {
        "worker": worker,
        "records": records,
        "client": [],
        "sent_total": sent_total,
        "users_running": users_running,
        "final": final,
    }


def test_drained_only_when_every_sent_record_is_on_disk(tmp_path):
    recorder = Recorder(tmp_path)
    try:
        assert not recorder.drained()  # nothing heard from any worker yet
        recorder.on_batch(batch(0, 3, sent_total=3, users_running=2))
        assert not recorder.drained()  # users still running
        recorder.on_batch(batch(1, 2, sent_total=5, users_running=0))
        assert recorder.missing() == {1: 3}  # worker 1 sent 5, 2 arrived
        recorder.on_batch(batch(0, 0, sent_total=3, users_running=0))
        assert not recorder.drained()
        recorder.on_batch(batch(1, 3, sent_total=5, start=2))
        assert recorder.missing() == {} and recorder.drained()
        assert recorder.rows_written == 8  # drained() wrote what it had received
    finally:
        path = recorder.close()
    frame = pd.read_parquet(path)
    assert len(frame) == 8 and frame["request_id"].is_unique
    assert not (tmp_path / "requests.parts").exists()


def test_a_full_disk_keeps_the_batch_until_it_can_be_written(tmp_path, monkeypatch):
    recorder = Recorder(tmp_path)
    try:
        import locust_llm.rundir.parts as parts

        def full(path, table):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(parts, "write_parquet", full)
        recorder.on_batch(batch(0, 4, sent_total=4))
        # Received and held for the disk: the run need not wait for it (the last flush retries, then counts them).
        assert recorder.drained()
        assert recorder.rows_written == 0 and recorder.parts.pending == 4
        monkeypatch.undo()
        assert recorder.drained() and recorder.rows_written == 4
    finally:
        path = recorder.close()
    assert len(pd.read_parquet(path)) == 4


class FlakyDisk:
    """``write_parquet`` for the part files that fails with ENOSPC for its first ``failures`` calls (every call
    with None), then writes."""

    def __init__(self, failures: int | None):
        self.failures, self.calls = failures, 0

    def __call__(self, path, table):
        self.calls += 1
        if self.failures is None or self.calls <= self.failures:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return layout.write_parquet(path, table)


def wait_for(condition, timeout_s: float = 20.0) -> bool:
    """Let the recorder's flusher greenlet run until ``condition()`` holds; False after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        gevent.sleep(0.02)
    return True


def test_the_flusher_keeps_every_row_through_a_full_disk_and_a_failing_live_figure(tmp_path, monkeypatch):
    disk = FlakyDisk(failures=3)
    monkeypatch.setattr(parts_module, "write_parquet", disk)
    monkeypatch.setattr(recorder_module, "FLUSH_INTERVAL_S", 0.0)
    broken, add = iter([True]), LiveStats.add

    def add_once_broken(self, records, *args):  # the first batch of records breaks the live figures
        if records and next(broken, False):
            raise RuntimeError("a live figure that cannot be computed")
        return add(self, records, *args)

    monkeypatch.setattr(LiveStats, "add", add_once_broken)
    recorder = Recorder(tmp_path)
    try:
        for i in range(5):
            recorder.on_batch(batch(0, 7, sent_total=7 * (i + 1), users_running=1, start=7 * i))
        assert wait_for(lambda: recorder.rows_written == 35)  # written by the flusher alone, once the disk freed up
        assert disk.calls > 3 and not recorder._loop.dead
    finally:
        path = recorder.close()
    frame = pd.read_parquet(path)
    assert len(frame) == recorder.received() == 35 and frame["request_id"].is_unique
    assert recorder.parts.rows_lost == 0


def test_the_last_flush_waits_for_the_disk_and_counts_what_never_fits(tmp_path, monkeypatch):
    monkeypatch.setattr(recorder_module, "CLOSE_RETRY_S", 0.0)
    # Free again during the last attempts: every row is written.
    monkeypatch.setattr(parts_module, "write_parquet", FlakyDisk(failures=recorder_module.CLOSE_ATTEMPTS - 1))
    recorder = Recorder(tmp_path / "freed")
    recorder.on_batch(batch(0, 6, sent_total=6))
    assert len(pd.read_parquet(recorder.close())) == 6 and recorder.parts.rows_lost == 0
    # Full for good: every row is counted lost, with the reason, for the run's records_lost event.
    monkeypatch.setattr(parts_module, "write_parquet", FlakyDisk(failures=None))
    recorder = Recorder(tmp_path / "full")
    recorder.on_batch(batch(0, 6, sent_total=6))
    assert recorder.drained() and recorder.parts.pending == 6  # every record arrived; the disk refuses them
    assert len(pd.read_parquet(recorder.close())) == 0
    assert recorder.parts.rows_lost == recorder.received() == 6
    assert "disk full" in recorder.parts.loss_reasons[-1]


def test_a_part_is_written_off_the_event_loop_and_close_waits_for_it(tmp_path, monkeypatch):
    """Writing a part takes a native thread, not the event loop: a greenlet ticking meanwhile keeps ticking while
    the write runs (on the loop it could not tick at all). Closing while a part is being written waits for it."""
    import gevent
    import numpy as np
    import pyarrow as pa

    import locust_llm.rundir.parts as parts
    from locust_llm.records import REQUESTS_SCHEMA

    ticks, during = [0], []
    write = parts.write_parquet

    def watched(path, table):
        before = ticks[0]
        out = write(path, table)
        during.append(ticks[0] - before)
        return out

    def tick():  # a loop that mostly waits, as the master's does (a busy one would starve the writer of the GIL)
        while True:
            ticks[0] += 1
            gevent.sleep(0.001)

    monkeypatch.setattr(parts, "write_parquet", watched)
    row = RequestRecord(
        run_id="r",
        variant="v",
        level=1.0,
        step=0,
        phase="steady",
        worker=0,
        request_id="x",
        chunk_offsets=[0.01 * i for i in range(256)],
        chunk_tokens=[1] * 256,
    ).to_dict()
    big = pa.Table.from_pylist([row], schema=REQUESTS_SCHEMA).take(pa.array(np.zeros(3_000, dtype=np.int64)))
    recorder = Recorder(tmp_path)
    ticker = gevent.spawn(tick)
    try:
        gevent.sleep(0)
        recorder.parts.add_table(big)
        assert recorder.flush()
        assert len(during) == 1 and during[0] >= 1  # the loop ran while the part was written
        recorder.parts.add_table(big)
        writing = gevent.spawn(recorder.flush)
        gevent.sleep(0)  # the second part is being written now
        assert len(during) == 1 and not writing.dead
        path = recorder.close()
        assert writing.value is True and len(during) >= 2
    finally:
        ticker.kill()
    assert recorder.rows_written == 6_000 and len(pd.read_parquet(path, columns=["worker"])) == 6_000

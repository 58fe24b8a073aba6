"""The recorder on the master: batches from workers -> part files -> requests.parquet; when is it drained."""

import pandas as pd

from locust_llm.records import RequestRecord
from locust_llm.runtime.recorder import Recorder


def batch(worker: int, n: int, sent_total: int, users_running: int = 0, start: int = 0, final: bool = False):
    records = [RequestRecord(run_id="r", variant="v", level=1.0, step=0, phase="steady", worker=worker,
                             request_id=f"w{worker}-{start + i}").to_dict() for i in range(n)]
    return {"worker": worker, "records": records, "client": [], "sent_total": sent_total,
            "users_running": users_running, "final": final}


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
        assert not recorder.drained()  # received, but not on disk
        assert recorder.rows_written == 0 and recorder.parts.pending == 4
        monkeypatch.undo()
        assert recorder.drained() and recorder.rows_written == 4
    finally:
        path = recorder.close()
    assert len(pd.read_parquet(path)) == 4

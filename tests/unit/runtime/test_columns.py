"""Records as columns between worker and master: what the shipper sends over Locust's wire format and the
recorder takes in is, row for row, what the records held (as ``REQUESTS_SCHEMA`` stores it), and the live
figures from a column batch are those from the same records as dicts."""

import math
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from locust.rpc.protocol import Message

from locust_llm.records import NAN, REQUESTS_SCHEMA, ErrorClass, Phase, RequestRecord
from locust_llm.runtime.columns import ColumnBatch, to_table
from locust_llm.runtime.live import LiveStats
from locust_llm.runtime.recorder import Recorder
from locust_llm.runtime.shipper import RecordShipper

MESSAGES = ["délai dépassé: 超时 🚫", 'HTTP 500: "quoted" \\ back\nslash\ttab', "", "x" * 500]


def make_records(n: int, seed: int, max_tokens: int = 1024) -> list[RequestRecord]:
    rng = random.Random(seed)
    records = []
    for i in range(n):
        tokens = rng.choice([0, 1, 7, 64, 256, max_tokens])
        t_send = 1_764_000_000.0 + i * 0.013 + rng.random()
        offsets, t = [], rng.uniform(0.01, 0.3)
        for _ in range(tokens):
            offsets.append(t)
            t += rng.uniform(0.001, 0.05)  # float64 values that float32 must round
        counts = [rng.choice([1, 1, 1, 2, 4]) for _ in range(tokens)]
        failed = tokens == 0 or rng.random() < 0.05
        record = RequestRecord(
            run_id="run-ü",
            variant=rng.choice(["baseline", "spec-k4"]),
            level=rng.choice([1, 2.5, 8]),
            step=i % 3,
            phase=rng.choice([Phase.WARMUP, Phase.STEADY, Phase.DRAIN]),
            mode="closed" if i % 4 else "open",
            worker=i % 2,
            user=i % 5 if i % 4 else -1,
            request_id=f"w-{seed}-{i}",
            seq=i,
            bucket=rng.choice(["short", "long"]),
            prompt_tokens=rng.randint(1, 4096),
            max_tokens=rng.choice([64, 3_000_000_000]),
            output_tokens=sum(counts),
            token_source="usage_deltas",
            t_intended=rng.choice([NAN, t_send - 0.001]),
            t_connect=rng.choice([NAN, t_send - 0.002]),
            t_send=t_send,
            t_first=t_send + offsets[0] if offsets else NAN,
            t_end=t_send + offsets[-1] if offsets else NAN,
            t_done=t_send + t,
            chunk_offsets=offsets,
            chunk_tokens=counts,
            finish_reason=None if failed else "length",
            error_class=rng.choice([ErrorClass.HTTP_ERROR, ErrorClass.IDLE_TIMEOUT]) if failed else None,
            error_message=rng.choice(MESSAGES) if failed else None,
            http_status=rng.choice([None, 200, 500]),
            draft_n=rng.choice([None, 0, 40]),
            draft_accepted=rng.choice([None, 31]),
            server_prefill_ms=rng.choice([None, NAN, 12.5]),
            server_decode_ms=rng.choice([None, 830.25]),
        )
        if i % 11 == 5:
            record.chunk_tokens = record.chunk_tokens[:-1]  # a record whose lists do not pair up is kept as it is
        if i % 97 == 50 and offsets:
            offsets[-1] = 1e39  # beyond float32: travels as a dict, stored as inf as a record-by-record conversion does
        records.append(record)
    return records


class WireRunner:
    """A worker's runner whose messages cross Locust's own serialisation to the master's recorder."""

    user_count = 0

    def __init__(self, recorder: Recorder, failures: int = 0):
        self.recorder = recorder
        self.failures = failures

    def send_message(self, msg_type, data, client_id=None):
        if self.failures:
            self.failures -= 1
            raise ConnectionError("master unreachable")
        msg = Message.unserialize(Message(msg_type, data, "worker-0").serialize())
        self.recorder.on_batch(msg.data)


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def by_id(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda row: row["request_id"])


def ship_and_take_in(tmp_path, records, per_batch: int, failures: int = 0) -> tuple[pa.Table, Recorder]:
    recorder = Recorder(tmp_path)
    shipper = RecordShipper(WireRunner(recorder, failures), worker=0)
    try:
        for i, record in enumerate(records):
            shipper.add(record)
            if i % per_batch == per_batch - 1:
                shipper.ship()
                recorder.take_in(pause=False)
        shipper.stop()  # the final batch
        assert recorder.drained()
    finally:
        path = recorder.close()
    assert pq.read_schema(path).equals(REQUESTS_SCHEMA)
    return pq.read_table(path), recorder


@pytest.mark.parametrize("n, per_batch", [(5, 2), (1500, 700)])  # small batches, and batches of many slices
def test_shipped_records_are_the_rows_on_disk(tmp_path, n, per_batch):
    records = make_records(n, seed=n)
    table, recorder = ship_and_take_in(tmp_path, records, per_batch)
    assert recorder.rows_written == n and recorder.parts.rows_lost == 0
    # What a conversion record by record stores: the truth, independent of the columns.
    expected = by_id(pa.Table.from_pylist([r.to_dict() for r in records], schema=REQUESTS_SCHEMA))
    actual = by_id(table)
    assert len(actual) == n
    assert any(math.isinf(x) for row in actual for x in row["chunk_offsets"]) == (n > 50)  # the misfit is kept
    for want, got in zip(expected, actual, strict=False):
        assert same(got, want), want["request_id"]
    # ... and the records themselves, the chunk offsets rounded to the schema's float32.
    for record, got in zip(sorted(records, key=lambda r: r.request_id), actual, strict=False):
        with np.errstate(over="ignore"):
            want = {**record.to_dict(), "chunk_offsets": np.float32(record.chunk_offsets).tolist()}
        assert all(same(float(want[k]) if isinstance(got[k], float) else want[k], got[k]) for k in want), got


def test_a_batch_that_cannot_be_sent_is_sent_whole_later(tmp_path):
    records = make_records(40, seed=3, max_tokens=32)
    table, recorder = ship_and_take_in(tmp_path, records, per_batch=10, failures=2)
    assert table.column("request_id").to_pylist() == [r.request_id for r in records]  # once each, in order
    assert recorder.tally[0].sent_total == 40


def test_a_value_that_does_not_fit_costs_only_its_own_row(tmp_path):
    records = make_records(30, seed=4, max_tokens=16)
    records[3].chunk_tokens = [1, 2**40]  # beyond int32: cannot be packed, travels as a dict
    records[17].prompt_tokens = 2**63  # fits msgpack, not int64: its whole batch is converted row by row
    table, recorder = ship_and_take_in(tmp_path, records, per_batch=10)
    assert recorder.parts.rows_lost == 2 and len(recorder.parts.loss_reasons) == 2
    kept = [r for i, r in enumerate(records) if i not in (3, 17)]
    expected = by_id(pa.Table.from_pylist([r.to_dict() for r in kept], schema=REQUESTS_SCHEMA))
    assert all(same(got, want) for got, want in zip(by_id(table), expected, strict=False)) and table.num_rows == 28


def figures(live: LiveStats) -> dict:
    return {
        key: (f.requests, f.errors, f.drafted, f.accepted, list(f.ttft_ms), list(f.tpot_ms), dict(f.tokens_by_tick))
        for key, f in live.levels.items()
    }


@pytest.mark.parametrize("offsets, days_ago", [(None, 0), ({"1": 0.25, "7": 3.0}, 0), (None, 3)])
def test_live_figures_from_columns_are_those_from_dicts(offsets, days_ago):
    records = make_records(400, seed=5, max_tokens=300)
    old = next(r for r in records if r.ok and r.chunk_tokens)
    old.t_send -= days_ago * 86400  # a batch whose ticks span too much to count densely: sorted instead
    batch = ColumnBatch()
    for record in records:
        batch.add(record)
    table = to_table(batch.columns())
    from_dicts, from_columns = LiveStats(), LiveStats()
    for live in (from_dicts, from_columns):
        for record in records:
            live.collect(record.variant, record.step)
    from_dicts.add(table.to_pylist(), [], offsets)
    from_columns.add_table(table, offsets)
    assert figures(from_columns) == figures(from_dicts)
    assert list(from_columns.levels) == list(from_dicts.levels)  # the table's rows keep their first-seen order
    cycles = {key: [list(row) for row in rows] for key, rows in from_columns.cycles.items()}
    assert same(cycles, {key: [list(row) for row in rows] for key, rows in from_dicts.cycles.items()})
    assert sum(map(len, cycles.values())) == sum(1 for r in table.to_pylist() if r["mode"] == "closed") > 0
    assert all(same(list(a), list(b)) for a, b in zip(from_columns.recent, from_dicts.recent, strict=False))
    assert len(from_columns.recent) == len(from_dicts.recent) > 0
    assert sum(sum(f.tokens_by_tick.values()) for f in from_columns.levels.values()) > 0

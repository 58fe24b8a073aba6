"""Part files: a bad row costs only itself, a failed write keeps its rows, a killed run is still readable."""

import pyarrow as pa
import pytest

from locust_llm.records import REQUESTS_SCHEMA, RequestRecord
from locust_llm.rundir import PartWriter, layout, load_requests
from locust_llm.rundir.parts import read_table


def rows(n: int, start: int = 0) -> list[dict]:
    return [
        RequestRecord(run_id="r", variant="v", request_id=f"id-{start + i}", max_tokens=i).to_dict() for i in range(n)
    ]


def writer(tmp_path) -> PartWriter:
    return PartWriter(tmp_path, layout.REQUESTS, layout.REQUEST_PARTS, REQUESTS_SCHEMA)


def test_a_value_that_does_not_fit_loses_only_its_row(tmp_path):
    parts = writer(tmp_path)
    bad = rows(1, 100)[0]
    bad["output_tokens"] = 2**70  # larger than any integer column
    parts.add(rows(3) + [bad] + rows(2, 10))
    assert parts.flush()
    assert parts.rows_written == 5 and parts.rows_lost == 1 and len(parts.loss_reasons) == 1
    frame = load_requests(tmp_path)
    assert sorted(frame["request_id"]) == sorted(f"id-{i}" for i in (0, 1, 2, 10, 11))


def test_counts_as_large_as_a_user_can_ask_fit(tmp_path):
    parts = writer(tmp_path)
    big = rows(1)[0]
    big["max_tokens"] = 3_000_000_000  # beyond int32
    parts.add([big])
    parts.close()
    assert load_requests(tmp_path)["max_tokens"].tolist() == [3_000_000_000]


def test_killed_run_reads_from_its_parts_and_merge_keeps_every_row(tmp_path):
    parts = writer(tmp_path)
    for k in range(3):
        parts.add(rows(4, 10 * k))
        parts.flush()
    assert not (tmp_path / layout.REQUESTS).exists()
    assert len(load_requests(tmp_path)) == 12  # no merge yet: the parts are read
    assert read_table(tmp_path, layout.REQUESTS, layout.REQUEST_PARTS, ["request_id"]).num_columns == 1
    parts.close()
    assert (tmp_path / layout.REQUESTS).exists() and not (tmp_path / layout.REQUEST_PARTS).exists()
    assert len(load_requests(tmp_path)) == 12


def test_rows_that_can_never_be_written_are_counted_lost(tmp_path, monkeypatch):
    import locust_llm.rundir.parts as module

    parts = writer(tmp_path)
    parts.add(rows(2))
    assert parts.flush()
    monkeypatch.setattr(module, "write_parquet", lambda path, table: (_ for _ in ()).throw(OSError(28, "full")))
    parts.add(rows(3, 5))
    assert not parts.flush() and parts.pending == 3 and parts.write_failures == 1
    parts.close()
    assert parts.rows_lost == 3 and parts.rows_written == 2
    assert len(load_requests(tmp_path)) == 2


def test_atomic_write_leaves_the_old_file_when_writing_fails(tmp_path):
    target = tmp_path / "summary.json"
    layout.write_json(target, {"a": 1})

    def broken(tmp):
        tmp.write_text("half")
        raise RuntimeError("crash mid-write")

    with pytest.raises(RuntimeError):
        layout.atomic_write(target, broken)
    assert layout.read_json(target) == {"a": 1}
    assert not list(tmp_path.glob("*.tmp"))


def test_schema_is_the_record_fields():
    assert REQUESTS_SCHEMA.names == list(RequestRecord.__dataclass_fields__)
    assert REQUESTS_SCHEMA.field("chunk_offsets").type == pa.list_(pa.float32())
    assert REQUESTS_SCHEMA.field("max_tokens").type == pa.int64()

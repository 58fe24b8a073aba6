"""The per-chunk lists of a run, read back from Parquet row groups a step at a time, against the same rows as
pandas reads them whole (hand-made lists: empty, null, one chunk, many; with and without draft counts)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from locust_llm.analysis import metrics
from locust_llm.analysis.metrics import Chunks
from locust_llm.analysis.stats import binned_rates, rate_samples
from locust_llm.records import REQUESTS_SCHEMA
from locust_llm.rundir.load import ChunkLists

ROWS = 23


def _lists(rng: np.random.Generator) -> dict[str, list]:
    offsets, tokens, drafted, accepted = [], [], [], []
    for row in range(ROWS):
        n = int(rng.integers(0, 6)) if row % 7 else 0
        offsets.append(None if row == 4 else np.cumsum(rng.uniform(0.01, 0.2, n)).astype(np.float32).tolist())
        tokens.append(None if row == 4 else rng.integers(0, 4, n).tolist())
        # draft counts for some requests only, one of them not covering every chunk (not used)
        covered = row % 3 == 0 and row != 4
        drafted.append(list(range(n)) if covered else ([1] if row == 5 and n > 1 else None))
        accepted.append(list(range(n)) if covered else ([1] if row == 5 and n > 1 else None))
    return {"chunk_offsets": offsets, "chunk_tokens": tokens, "chunk_drafted": drafted, "chunk_accepted": accepted}


@pytest.fixture()
def written(tmp_path):
    rng = np.random.default_rng(3)
    lists = _lists(rng)
    columns = {
        "t_send": pa.array(1_700_000_000.0 + np.arange(ROWS) * 0.5),
        **{name: pa.array(values, REQUESTS_SCHEMA.field(name).type) for name, values in lists.items()},
    }
    table = pa.Table.from_arrays(
        [columns.get(f.name, pa.nulls(ROWS, f.type)) for f in REQUESTS_SCHEMA], schema=REQUESTS_SCHEMA
    )
    path = tmp_path / "requests.parquet"
    pq.write_table(table, path, row_group_size=5)  # five blocks: rows are picked across them
    return path, table.to_pandas()


@pytest.mark.parametrize("positions", [[0, 1, 2, 3, 4, 5, 6], [4, 9, 10, 14, 22], list(range(ROWS)), []])
def test_rows_read_from_row_groups_are_the_rows_pandas_reads_whole(written, positions):
    path, frame = written
    rows = frame.iloc[positions]
    from_blocks = Chunks.of(rows, ChunkLists.of_files([path]))
    whole = Chunks.of(rows)  # the frame's own list columns
    assert np.array_equal(from_blocks.lengths, whole.lengths)
    assert np.array_equal(from_blocks.offset, whole.offset) and np.array_equal(from_blocks.tokens, whole.tokens)
    # and against the lists themselves, written out by hand (a null list has no chunks)
    expected = [list(v) if v is not None else [] for v in rows["chunk_offsets"]]
    assert from_blocks.lengths.tolist() == [len(v) for v in expected]
    assert from_blocks.offset.tolist() == [x for v in expected for x in v]
    # draft counts where a request's list covers all its chunks, -1 elsewhere; none when no request has them
    have = [d is not None and len(d) > 0 for d in rows["chunk_drafted"]]
    drafted = [
        list(d) if d is not None and len(d) == len(o) else [-1] * len(o)
        for d, o in zip(rows["chunk_drafted"], expected, strict=True)
    ]
    flat = [x for v in drafted for x in v] if any(have) else None
    for chunks in (from_blocks, whole):
        assert (chunks.drafted.tolist() if chunks.drafted is not None else None) == flat


def test_arrivals_in_slices_are_the_arrivals_and_give_the_same_rates(written, monkeypatch):
    path, frame = written
    chunks = Chunks.of(frame, ChunkLists.of_files([path]))
    t_send = frame["t_send"].to_numpy(dtype=float)
    monkeypatch.setattr(metrics, "SLICE_CHUNKS", 4)  # many slices, each of whole requests
    slices = list(chunks.arrivals_in_slices(t_send))
    assert len(slices) > 5
    assert np.array_equal(np.concatenate([t for t, _ in slices]), chunks.arrivals(t_send))
    assert np.array_equal(np.concatenate([c for _, c in slices]), chunks.tokens)
    start, end = t_send[0], t_send[-1]
    by_slices = binned_rates(chunks.arrivals_in_slices(t_send), start, end, 1.0)
    assert np.array_equal(by_slices, rate_samples(chunks.arrivals(t_send), chunks.tokens, start, end, 1.0))
    # the hand count: tokens arriving in the window over its length
    inside = pd.Series(chunks.arrivals(t_send)).between(start, end, inclusive="left").to_numpy()
    assert by_slices.mean() == pytest.approx(chunks.tokens[inside].sum() / (end - start))

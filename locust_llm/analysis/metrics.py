"""Per-request and per-chunk metrics (docs/metrics.md, "Metric definitions"), vectorised over a frame. Pure.

Two forms of every latency: over successful requests (``ttft_ms``, ...), and over all requests
(``ttft_all_ms``, ...), where a failed request counts at the time it failed (``t_done``: a timeout at its
deadline, a request that never got a first token has TTFT = its elapsed time) and a request that was never
sent (dropped at the in-flight cap) counts as a first-token timeout. The ``*_sched_*`` forms (open loop) run
from the intended send time instead of the actual one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
import pyarrow as pa

from ..rundir.load import ChunkLists, flat_rows

__all__ = ["APPROXIMATE_SOURCES", "Chunks", "chunk_split", "request_metrics"]

# Per-chunk splits that are not exact (the total may still be): ITL from them is marked approximate.
APPROXIMATE_SOURCES = ("usage+text_share", "usage_below_events", "unknown")


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    """A column of times or durations; runs recorded before it existed have NaN."""
    return frame[name] if name in frame else pd.Series(np.nan, index=frame.index)


def request_metrics(frame: pd.DataFrame, first_token_timeout_s: float = np.nan) -> pd.DataFrame:
    """One row per request with its latency and speed figures (NaN where undefined)."""
    ok = frame["error_class"].isna()
    n = frame["output_tokens"].astype(float)
    t_send, t_first, t_end, t_intended = frame["t_send"], frame["t_first"], frame["t_end"], frame["t_intended"]
    t_done = _column(frame, "t_done").fillna(t_end)
    decode_s = t_end - t_first
    out = pd.DataFrame(index=frame.index)
    out["ttft_ms"] = ((t_first - t_send) * 1000).where(ok)
    out["ttft_sched_ms"] = ((t_first - t_intended) * 1000).where(ok)
    out["e2e_ms"] = ((t_end - t_send) * 1000).where(ok)
    out["e2e_sched_ms"] = ((t_end - t_intended) * 1000).where(ok)
    multi = ok & (n >= 2) & (decode_s > 0)
    out["tpot_ms"] = (decode_s / (n - 1) * 1000).where(multi)
    out["decode_tps"] = ((n - 1) / decode_s).where(multi)
    out["e2e_tps"] = (n / (t_end - t_send)).where(ok & (n >= 1))
    # The client's lateness: from the intended time, or from the slot an arrival held at max_inflight waited for
    # (that wait is the cap's, not the client's; latencies from the intended time include it).
    t_slot = _column(frame, "t_slot")
    out["schedule_lag_ms"] = (t_send - np.fmax(t_intended, t_slot)) * 1000
    out["held_ms"] = (t_slot - t_intended) * 1000

    # All requests: a failure counts at the time it failed; one never sent, as a first-token timeout.
    failed = ~ok
    never_sent = t_send.isna()
    deadline_ms = first_token_timeout_s * 1000
    first = t_first.where(t_first.notna(), t_done)  # no first token: the whole wait counts
    out["ttft_all_ms"] = out["ttft_ms"].where(ok, (first - t_send) * 1000).where(~never_sent, deadline_ms)
    out["e2e_all_ms"] = out["e2e_ms"].where(ok, (t_done - t_send) * 1000).where(~never_sent, deadline_ms)
    lag_ms = ((t_send - t_intended) * 1000).where(~never_sent, 0.0)
    out["ttft_sched_all_ms"] = out["ttft_all_ms"] + lag_ms
    out["e2e_sched_all_ms"] = out["e2e_all_ms"] + lag_ms
    cut = failed & (n >= 2) & ((t_done - t_first) > 0)  # failed after two tokens: their pace until it failed
    out["tpot_all_ms"] = out["tpot_ms"].where(~cut, (t_done - t_first) / (n - 1) * 1000)
    # The server's own split of a request (llama.cpp timings); what it does not account for happened outside
    # its compute: waiting for a slot, the network, the client.
    prefill, decode = _column(frame, "server_prefill_ms"), _column(frame, "server_decode_ms")
    out["server_prefill_ms"] = prefill.where(ok)
    out["server_decode_ms"] = decode.where(ok)
    # The server's own decode rate of the request (llama.cpp's predicted_per_second: its tokens over its generation
    # time), beside the client's decode_tps as an independent check of it.
    out["server_decode_tps"] = (n / decode * 1000).where(ok & (decode > 0))
    out["outside_ms"] = (out["e2e_ms"] - prefill - decode).where(ok)
    # What the response said about drafting (llama.cpp timings), kept per request so acceptance can be
    # resampled by request (``analysis.acceptance``).
    out["output_tokens"] = n.where(ok)
    out["draft_n"] = _column(frame, "draft_n").where(ok)
    out["draft_accepted"] = _column(frame, "draft_accepted").where(ok)
    return out


def chunk_split(rows: pd.DataFrame, chunks: Chunks) -> pd.DataFrame:
    """Per request of ``rows`` (the rows ``chunks`` was built from): its token-carrying chunks and the first
    chunk's tokens; NaN where the per-chunk split is approximate."""
    count = chunks.lengths.astype(float)
    some = chunks.lengths > 0
    first = np.full(len(rows), np.nan)
    first[some] = chunks.tokens[(np.cumsum(chunks.lengths) - chunks.lengths)[some]]
    exact = (
        ~rows["token_source"].isin(APPROXIMATE_SOURCES).to_numpy()
        if "token_source" in rows
        else np.ones(len(rows), dtype=bool)
    )
    count[~exact | (count == 0)] = np.nan
    first[~exact] = np.nan
    return pd.DataFrame({"chunks": count, "first_chunk_tokens": first}, index=rows.index)


DRAFT_LISTS = ("chunk_drafted", "chunk_accepted")
SLICE_CHUNKS = 2_000_000
LIST_TYPES = {"chunk_offsets": pa.float32(), "chunk_tokens": pa.int32()} | dict.fromkeys(DRAFT_LISTS, pa.int32())


def _aligned(lists: list[tuple[np.ndarray, np.ndarray]], lengths: np.ndarray) -> tuple:
    """Per-chunk values of list columns (``(items per request, items flat)``) that hold one item per chunk where a
    request has them (else none): flat arrays aligned with the chunks, -1 where a request has none;
    ``(None, None)`` when no request has any."""
    if len(lists) != len(DRAFT_LISTS):
        return None, None
    out = []
    for have, flat in lists:
        if not have.any():
            return None, None
        whole = have == lengths  # a request's list covers every chunk of it, or it is not used
        values = np.full(int(lengths.sum()), -1, dtype=np.int64)
        values[np.repeat(whole, lengths)] = flat[np.repeat(whole, have)]
        out.append(values)
    return tuple(out)


@dataclass
class Chunks:
    """Every token-carrying chunk of a set of requests, flat, request after request: how many each request has,
    when each arrived, how many tokens it carried."""

    lengths: np.ndarray  # chunks per request, in the frame's row order
    offset: np.ndarray  # seconds after the request's t_send
    tokens: np.ndarray
    # The request's cumulative drafted and accepted tokens at each chunk (llama.cpp ``timings_per_token``); -1
    # where the request has none; None when no request of the frame has them.
    drafted: np.ndarray | None = None
    accepted: np.ndarray | None = None

    @classmethod
    def of(cls, frame: pd.DataFrame, lists: ChunkLists | None = None) -> Chunks:
        """The chunks of ``frame``'s rows: from ``lists`` (indexed by the frame's index) when given, else from
        the frame's own list columns. Flattened in Arrow and NumPy, never a Python loop per request."""
        if lists is not None:
            positions = frame.index.to_numpy(dtype=np.int64)
            if positions.size > 1 and np.any(np.diff(positions) < 0):
                raise ValueError("the frame's rows must keep the order of the run's requests")
            columns = lists.select(positions)
        else:
            every = np.ones(len(frame), dtype=bool)
            columns = {
                name: flat_rows(pa.array(frame[name].tolist(), pa.list_(kind)), every)
                for name, kind in LIST_TYPES.items()
                if name in frame
            }
        lengths, offsets = columns["chunk_offsets"]
        # float32 offsets (a microsecond at ten seconds) and int32 counts: a night of chunks fits in memory
        tokens = columns["chunk_tokens"][1].astype(np.int32, copy=False)
        drafts = [columns[name] for name in DRAFT_LISTS if name in columns]
        return cls(lengths, offsets.astype(np.float32, copy=False), tokens, *_aligned(drafts, lengths))

    @cached_property
    def request(self) -> np.ndarray:
        """Each chunk's request, as a row position in the frame."""
        return np.repeat(np.arange(self.lengths.size, dtype=np.int32), self.lengths)

    def arrivals(self, t_send: np.ndarray) -> np.ndarray:
        """Absolute arrival time of every chunk (``t_send``: one per request)."""
        arrivals = np.repeat(np.asarray(t_send, dtype=float), self.lengths)
        arrivals += self.offset
        return arrivals

    def arrivals_in_slices(self, t_send: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(arrival time, tokens)`` of every chunk, whole requests at a time, about ``SLICE_CHUNKS`` chunks a
        slice: tens of millions of chunks never need one array of arrival times (``t_send``: one per request;
        NaN keeps a request's chunks out of every window)."""
        t_send = np.asarray(t_send, dtype=float)
        ends = np.cumsum(self.lengths)
        request = chunk = 0
        while request < self.lengths.size:
            after = max(int(np.searchsorted(ends, chunk + SLICE_CHUNKS, side="right")), request + 1)
            stop = int(ends[after - 1])
            arrivals = np.repeat(t_send[request:after], self.lengths[request:after])
            arrivals += self.offset[chunk:stop]
            yield arrivals, self.tokens[chunk:stop]
            request, chunk = after, stop

    def gaps(self) -> tuple[np.ndarray, np.ndarray]:
        """``(gap_s, tokens)`` of every chunk after a request's first (its gap to the one before)."""
        later = np.ones(self.offset.size, dtype=bool)
        later[(np.cumsum(self.lengths) - self.lengths)[self.lengths > 0]] = False
        return np.diff(self.offset)[later[1:]], self.tokens[later]

    def itl_ms(self) -> tuple[np.ndarray, np.ndarray | None]:
        """Inter-token latency as ``(value, weight)``: each chunk gap split evenly over the chunk's tokens, each
        of which carries it; first-chunk tokens have no gap (TTFT covers them). The weight is None when every
        chunk carries one token (each value counts once)."""
        gap, tokens = self.gaps()
        carries = tokens > 0
        if not carries.all():
            gap, tokens = gap[carries], tokens[carries]
        weights = None if (tokens == 1).all() else tokens
        del tokens
        itl = gap.astype(np.float64)
        del gap
        itl *= 1000.0
        if weights is not None:
            itl /= weights
        return itl, weights

    def icl_ms(self) -> np.ndarray:
        """Inter-chunk latency: the gaps themselves."""
        icl = self.gaps()[0].astype(np.float64)
        icl *= 1000.0
        return icl

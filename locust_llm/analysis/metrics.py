"""Per-request and per-chunk metrics (docs/metrics.md, "Metric definitions"), vectorised over a frame. Pure.

Two forms of every latency: over successful requests (``ttft_ms``, ...), and over all requests
(``ttft_all_ms``, ...), where a failed request counts at the time it failed (``t_done``: a timeout at its
deadline, a request that never got a first token has TTFT = its elapsed time) and a request that was never
sent (dropped at the in-flight cap) counts as a first-token timeout. The ``*_sched_*`` forms (open loop) run
from the intended send time instead of the actual one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..rundir.load import ChunkLists

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
    count = np.bincount(chunks.request, minlength=len(rows)).astype(float)
    starts = (
        np.flatnonzero(np.r_[True, chunks.request[1:] != chunks.request[:-1]])
        if chunks.request.size
        else np.empty(0, dtype=int)
    )
    first = np.full(len(rows), np.nan)
    first[chunks.request[starts]] = chunks.tokens[starts]
    exact = (
        ~rows["token_source"].isin(APPROXIMATE_SOURCES).to_numpy()
        if "token_source" in rows
        else np.ones(len(rows), dtype=bool)
    )
    count[~exact | (count == 0)] = np.nan
    first[~exact] = np.nan
    return pd.DataFrame({"chunks": count, "first_chunk_tokens": first}, index=rows.index)


DRAFT_LISTS = ("chunk_drafted", "chunk_accepted")


def _aligned(lists: list, lengths: np.ndarray, request: np.ndarray) -> tuple:
    """Per-chunk values of list columns that hold one item per chunk where a request has them (else none): flat
    arrays aligned with the chunks, -1 where a request has none; ``(None, None)`` when no request has any."""
    if len(lists) != len(DRAFT_LISTS):
        return None, None
    out = []
    for column in lists:
        have = pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False)
        if not have.any():
            return None, None
        whole = have == lengths  # a request's list covers every chunk of it, or it is not used
        values = np.full(request.size, -1, dtype=np.int64)
        flat = pc.list_flatten(column).to_numpy(zero_copy_only=False)
        keep = np.repeat(whole[have > 0], have[have > 0])
        values[whole[request]] = flat[keep]
        out.append(values)
    return tuple(out)


@dataclass
class Chunks:
    """Every token-carrying chunk of a set of requests, flat: which request, when, how many tokens."""

    request: np.ndarray  # row position in the frame
    offset: np.ndarray  # seconds after the request's t_send
    tokens: np.ndarray
    # The request's cumulative drafted and accepted tokens at each chunk (llama.cpp ``timings_per_token``); -1
    # where the request has none; None when no request of the frame has them.
    drafted: np.ndarray | None = None
    accepted: np.ndarray | None = None

    @classmethod
    def of(cls, frame: pd.DataFrame, lists: ChunkLists | None = None) -> Chunks:
        """The chunks of ``frame``'s rows: from ``lists`` (indexed by the frame's index) when given, else from
        the frame's own list columns. Flattened in Arrow, never a Python loop per request."""
        if lists is not None:
            positions = frame.index.to_numpy(dtype=np.int64)
            if positions.size > 1 and np.any(np.diff(positions) < 0):
                raise ValueError("the frame's rows must keep the order of the run's requests")
            rows = lists.take(positions)
            offsets, tokens = rows.column("chunk_offsets"), rows.column("chunk_tokens")
            drafts = [rows.column(n) for n in DRAFT_LISTS if n in rows.column_names]
        else:
            offsets = pa.chunked_array([pa.array(frame["chunk_offsets"].tolist(), pa.list_(pa.float32()))])
            tokens = pa.chunked_array([pa.array(frame["chunk_tokens"].tolist(), pa.list_(pa.int32()))])
            drafts = [
                pa.chunked_array([pa.array(frame[n].tolist(), pa.list_(pa.int32()))]) for n in DRAFT_LISTS if n in frame
            ]
        lengths = pc.fill_null(pc.list_value_length(offsets), 0).to_numpy(zero_copy_only=False)
        # float32 offsets (a microsecond at ten seconds) and int32 counts: a night of chunks fits in memory
        flat = pc.list_flatten(offsets).to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
        counts = pc.list_flatten(tokens).to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
        request = np.repeat(np.arange(len(frame), dtype=np.int32), lengths)
        return cls(request, flat, counts, *_aligned(drafts, lengths, request))

    def arrivals(self, t_send: np.ndarray) -> np.ndarray:
        """Absolute arrival time of every chunk."""
        arrivals = np.asarray(t_send, dtype=float)[self.request]
        arrivals += self.offset
        return arrivals

    def gaps(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(gap_s, tokens, request)`` of every chunk after a request's first (its gap to the one before)."""
        same = self.request[1:] == self.request[:-1]
        return (self.offset[1:] - self.offset[:-1])[same], self.tokens[1:][same], self.request[1:][same]

    def itl_ms(self) -> tuple[np.ndarray, np.ndarray]:
        """Inter-token latency as ``(value, weight)``: each chunk gap split evenly over the chunk's tokens, each
        of which carries it; first-chunk tokens have no gap (TTFT covers them)."""
        gap, tokens, _ = self.gaps()
        carries = tokens > 0
        return gap[carries].astype(np.float64) * 1000.0 / tokens[carries], tokens[carries]

    def icl_ms(self) -> np.ndarray:
        """Inter-chunk latency: the gaps themselves."""
        return self.gaps()[0].astype(np.float64) * 1000.0

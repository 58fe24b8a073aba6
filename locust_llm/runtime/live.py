"""Running figures per variant and level for the web UI, fed by the record batches as they arrive.

Tokens are binned by the tenth of a second they arrived (``t_send`` + chunk offset), as the analysis counts aggregate
throughput; latencies are those of steady-window requests, TTFT from the intended send time in open loop (the
summary's headline: a late send is the client's queue). Bounded: the last ``KEEP`` values per figure and
level, the last ``RECENT_S`` seconds of the per-request series; the final numbers always come from the run
directory, never from here.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..analysis.cycles import Batches, batch_ratio, step_batches
from ..analysis.stats import summarize
from ..analysis.validity import CPU_PERCENT_MAX, LOOP_LAG_MS_MAX
from ..records import Phase, now

__all__ = ["LiveStats"]

KEEP = 5000
RATE_WINDOW_S = 10.0
RECENT_S = 60.0
TICKS_PER_S = 10  # arrival bins: fine enough that a window edge misplaces at most 0.05 s of tokens
# What a closed-loop step's request cycles are rebuilt from (``analysis.cycles.step_batches``), one tuple per request.
CYCLE_COLUMNS = ("worker", "user", "turn", "mode", "t_send", "t_done", "t_end", "error_class", "output_tokens")
N_BOOT = 400  # a live interval needs to be drawn every second, not to be the report's
MAX_DENSE_TICKS = 1_000_000  # tick bins a batch's token count may allocate (8 MB) before it sorts instead


@dataclass
class LevelFigures:
    requests: int = 0
    errors: int = 0
    drafted: int = 0
    accepted: int = 0
    ttft_ms: deque = field(default_factory=lambda: deque(maxlen=KEEP))  # open loop: from the intended send
    tpot_ms: deque = field(default_factory=lambda: deque(maxlen=KEEP))
    sched: bool = False  # the level's requests had an intended send time (open loop)
    tokens_by_tick: Counter = field(default_factory=Counter)  # int(arrival * TICKS_PER_S) -> tokens


class LiveStats:
    def __init__(self) -> None:
        self.levels: dict[tuple[str, float], LevelFigures] = {}
        self.client: dict[int, dict] = {}
        self.recent: deque = deque(maxlen=KEEP)  # (t_first, variant, TTFT(_sched) ms, tokens per chunk) per request
        self._done: dict[tuple, tuple] = {}  # (variant, level) -> (what it was computed from, point)
        # (variant, step) -> its closed-loop requests as CYCLE_COLUMNS, kept from ``collect`` to ``forget`` (while the
        # step is measured: records that arrive later, a tokenizer's deferred splits, are not held for the whole run).
        self.cycles: dict[tuple[str, int], list[tuple]] = {}

    def add(
        self,
        records: list[dict],
        client_samples: list[dict],
        clock_offsets: dict[str, float] | None = None,
    ) -> None:
        """``clock_offsets``: worker index (as text) -> its clock minus the master's, taken off its stamps."""
        for r in records:
            shift = (clock_offsets or {}).get(str(r.get("worker", 0)), 0.0)
            intended = r.get("t_intended")
            intended = math.nan if intended is None else intended
            if shift:
                r = {**r, **{k: r[k] - shift for k in ("t_send", "t_first", "t_end", "t_done") if k in r}}
                intended -= shift
            kept = self.cycles.get((r["variant"], r.get("step", -1)))
            if kept is not None and r.get("user", -1) >= 0 and r.get("mode") == "closed":
                kept.append(tuple(r.get(c) for c in CYCLE_COLUMNS))
            key = (r["variant"], r["level"])
            figures = self.levels.get(key) or self.levels.setdefault(key, LevelFigures())
            figures.requests += 1
            figures.sched |= not math.isnan(intended)
            if r["error_class"] is not None:
                figures.errors += 1
                continue
            self._count_tokens(figures.tokens_by_tick, r)
            t_send, t_first, t_end, n = r["t_send"], r["t_first"], r["t_end"], r["output_tokens"]
            anchor = t_send if math.isnan(intended) else intended
            chunks = len(r.get("chunk_tokens") or ())
            if not math.isnan(t_first):
                self.recent.append((t_first, r["variant"], (t_first - anchor) * 1000, n / chunks if chunks else None))
            if r.get("draft_n"):
                figures.drafted += r["draft_n"]
                figures.accepted += r["draft_accepted"] or 0
            if r["phase"] != Phase.STEADY:
                continue
            if not math.isnan(t_first):
                figures.ttft_ms.append((t_first - anchor) * 1000)
            if n > 1 and t_end > t_first:
                figures.tpot_ms.append((t_end - t_first) / (n - 1) * 1000)
        for sample in client_samples:
            self.client[sample["worker"]] = sample

    def _add_cycles(self, table: pa.Table, shift: np.ndarray) -> None:
        if not self.cycles:
            return
        closed = pc.and_(pc.equal(table.column("mode"), "closed"), pc.greater_equal(table.column("user"), 0))
        closed = closed.to_numpy(zero_copy_only=False)
        if not closed.any():
            return
        rows = table.filter(pa.array(closed))
        shift = shift[closed]
        times = {name: (rows.column(name).to_numpy() - shift).tolist() for name in ("t_send", "t_done", "t_end")}
        columns = [times[name] if name in times else rows.column(name).to_pylist() for name in CYCLE_COLUMNS]
        keys = zip(rows.column("variant").to_pylist(), rows.column("step").to_pylist(), strict=True)
        for key, values in zip(keys, zip(*columns, strict=True), strict=True):
            kept = self.cycles.get(key)
            if kept is not None:
                kept.append(values)

    def step_batches(self, variant: str, step: int, start: float, end: float) -> Batches:
        """The throughput batches of a closed-loop step's window ``[start, end)`` from the requests received so far
        (the analysis's own ``step_batches``); none when the step has no closed-loop requests yet."""
        rows = self.cycles.get((variant, step))
        if not rows:
            return Batches(np.empty(0), np.empty(0), "none")
        return step_batches(pd.DataFrame(rows, columns=list(CYCLE_COLUMNS)), start, end)

    def collect(self, variant: str, step: int) -> None:
        """Keep the step's closed-loop requests as they arrive (its steady window begins)."""
        self.cycles.setdefault((variant, step), [])

    def forget(self, variant: str, step: int) -> None:
        """A step's requests are no longer needed (its window is closed and its batches kept)."""
        self.cycles.pop((variant, step), None)

    @staticmethod
    def _count_tokens(bins: Counter, r: dict) -> None:
        offsets, tokens = r.get("chunk_offsets") or (), r.get("chunk_tokens") or ()
        if len(offsets) == len(tokens) and len(tokens):
            for offset, n in zip(offsets, tokens, strict=False):
                if n:
                    bins[int((r["t_send"] + offset) * TICKS_PER_S)] += n
        elif r["output_tokens"] and not math.isnan(r["t_end"]):
            bins[int(r["t_end"] * TICKS_PER_S)] += r["output_tokens"]

    def add_table(self, table: pa.Table, clock_offsets: dict[str, float] | None = None) -> None:
        """``add`` for records already in Arrow (a column batch): the same figures, with numpy doing the work per
        token that ``add`` does in Python (``tests/unit/runtime/test_columns.py`` holds the two to each other)."""
        if not table.num_rows:
            return
        table = table.combine_chunks()
        variants = table.column("variant").to_pylist()
        keys = list(zip(variants, table.column("level").to_pylist(), strict=False))
        index: dict[tuple, int] = {}
        group = np.fromiter((index.setdefault(k, len(index)) for k in keys), np.int64, len(keys))
        shift = np.zeros(len(keys))
        if clock_offsets:
            workers = table.column("worker").to_numpy()
            for worker in np.unique(workers).tolist():
                shift[workers == worker] = clock_offsets.get(str(worker), 0.0)
        t_send, t_first, t_end, intended = (
            table.column(name).to_numpy() - shift for name in ("t_send", "t_first", "t_end", "t_intended")
        )
        anchor = np.where(np.isnan(intended), t_send, intended)  # open loop: TTFT from the intended send
        n = table.column("output_tokens").to_numpy()
        ok = table.column("error_class").is_null().to_numpy(zero_copy_only=False)
        steady = pc.equal(table.column("phase"), Phase.STEADY).to_numpy(zero_copy_only=False)
        drafted = pc.fill_null(table.column("draft_n"), 0).to_numpy()
        accepted = pc.fill_null(table.column("draft_accepted"), 0).to_numpy()
        chunks = pc.list_value_length(table.column("chunk_tokens")).fill_null(0).to_numpy()
        groups, ticks, tokens = self._chunk_ticks(table, group, ok, t_send, t_end, n, chunks)
        self._add_cycles(table, shift)

        has_first = ok & ~np.isnan(t_first)
        idx = np.flatnonzero(has_first)
        per_chunk = [k / c if c else None for k, c in zip(n[idx].tolist(), chunks[idx].tolist(), strict=False)]
        self.recent.extend(
            zip(
                t_first[idx].tolist(),
                [variants[i] for i in idx],
                ((t_first[idx] - anchor[idx]) * 1000).tolist(),
                per_chunk,
                strict=False,
            )
        )
        ttft = has_first & steady
        tpot = ok & steady & (n > 1) & (t_end > t_first)
        levels = []
        for key, g in index.items():
            figures = self.levels.setdefault(key, LevelFigures())
            levels.append(figures)
            mine = group == g
            figures.requests += int(mine.sum())
            figures.sched |= bool((mine & ~np.isnan(intended)).any())
            figures.errors += int((mine & ~ok).sum())
            with_drafts = mine & ok & (drafted != 0)
            figures.drafted += int(drafted[with_drafts].sum())
            figures.accepted += int(accepted[with_drafts].sum())
            figures.ttft_ms.extend(((t_first - anchor)[mine & ttft] * 1000).tolist())
            figures.tpot_ms.extend(((t_end - t_first)[mine & tpot] / (n[mine & tpot] - 1) * 1000).tolist())
        for g, tick, count in _sum_by_tick(groups, ticks, tokens, len(levels)):
            levels[g].tokens_by_tick[tick] += int(count)

    @staticmethod
    def _chunk_ticks(
        table: pa.Table,
        group: np.ndarray,
        ok: np.ndarray,
        t_send: np.ndarray,
        t_end: np.ndarray,
        n: np.ndarray,
        chunks: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Group, arrival tick and tokens of every counted chunk, as ``_count_tokens`` counts them: a chunk's own
        arrival when the record's offsets and counts pair up, else all its tokens at ``t_end``. Repeats and
        selections only where needed: a batch's chunks are many, each pass over them costs."""
        offsets, counts = table.column("chunk_offsets"), table.column("chunk_tokens")
        n_offsets = pc.list_value_length(offsets).fill_null(0).to_numpy()
        paired = ok & (n_offsets == chunks) & (chunks > 0)
        arrival = pc.list_flatten(offsets).to_numpy()
        tokens = pc.list_flatten(counts).to_numpy().astype(np.int64)
        if not paired.all():
            arrival, tokens = arrival[np.repeat(paired, n_offsets)], tokens[np.repeat(paired, chunks)]
        per_record = chunks[paired]
        ticks = (np.repeat(t_send[paired], per_record) + arrival) * TICKS_PER_S
        groups = np.repeat(group[paired], per_record)
        at_end = ok & ~paired & (n != 0) & ~np.isnan(t_end)
        if at_end.any():
            ticks = np.concatenate([ticks, t_end[at_end] * TICKS_PER_S])
            tokens = np.concatenate([tokens, n[at_end]])
            groups = np.concatenate([groups, group[at_end]])
        keep = (tokens != 0) & np.isfinite(ticks)
        if not keep.all():
            groups, ticks, tokens = groups[keep], ticks[keep], tokens[keep]
        return groups, ticks.astype(np.int64), tokens  # astype truncates toward zero, as int() does

    def token_rates(self, variant: str, level: float, start: float, end: float) -> np.ndarray:
        """Output tokens per one-second bin of ``[start, end)`` (what the steadiness check reads)."""
        figures = self.levels.get((variant, level))
        bins = int(end - start)
        if figures is None or bins < 1:
            return np.empty(0)
        rates = np.zeros(bins)
        for tick, n in figures.tokens_by_tick.items():
            i = math.floor((tick + 0.5) / TICKS_PER_S - start)
            if 0 <= i < bins:
                rates[i] += n
        return rates

    def client_ok(self) -> bool:
        return all(
            s["cpu_percent"] <= CPU_PERCENT_MAX and s["loop_lag_ms_max"] <= LOOP_LAG_MS_MAX
            for s in self.client.values()
        )

    def rows(self) -> list[dict]:
        """One row per variant and level for the LLM tab's table (and ``/llm/rows``)."""
        last = int(now() * TICKS_PER_S)
        client = "ok" if self.client_ok() else "overloaded"
        out = []
        for (variant, level), f in self.levels.items():
            recent = sum(n for tick, n in f.tokens_by_tick.items() if tick >= last - RATE_WINDOW_S * TICKS_PER_S)
            out.append(
                {
                    "variant": variant,
                    "level": level,
                    "requests": f.requests,
                    "errors": f.errors,
                    "ttft_p50_ms": _pct(f.ttft_ms, 50),
                    "ttft_from": "intended send (sched)" if f.sched else "send",
                    "tpot_p50_ms": _pct(f.tpot_ms, 50),
                    "tpot_p95_ms": _pct(f.tpot_ms, 95),
                    "output_tps": round(recent / RATE_WINDOW_S, 1),
                    "acceptance": round(f.accepted / f.drafted, 3) if f.drafted else "",
                    "client": client,
                }
            )
        return out

    def point(
        self, variant: str, level: float, windows: list[tuple[float, float]], done: bool, batches: list[Batches]
    ) -> dict:
        """A level's point on the live chart: aggregate tok/s over its steady windows and TPOT P50/P95, with
        95% intervals once its steps are done (throughput's over its steps' request-cycle ``batches``, as the
        analysis draws it)."""
        figures = self.levels.get((variant, level)) or LevelFigures()
        key = (variant, level, tuple(windows), figures.requests, len(batches))
        cached = self._done.get((variant, level))
        if done and cached and cached[0] == key:
            return cached[1]  # its intervals cost a bootstrap: once per new record, not once per poll
        rates = np.concatenate([self.token_rates(variant, level, a, b) for a, b in windows] or [np.empty(0)])
        tpot = summarize(np.fromiter(figures.tpot_ms, float), n_boot=N_BOOT) if done else None
        point = {
            "variant": variant,
            "level": level,
            "done": done,
            "tps": round(float(rates.mean()), 2) if rates.size else None,
            "tps_ci": _interval(batches) if done else None,
            "tpot_p50": _pct(figures.tpot_ms, 50) or None,
            "tpot_p95": _pct(figures.tpot_ms, 95) or None,
            "tpot_p50_ci": tpot["ci95"]["p50"] if tpot else None,
            "tpot_p95_ci": tpot["ci95"]["p95"] if tpot else None,
        }
        if done:
            self._done[(variant, level)] = (key, point)
        return point

    def recent_series(self) -> list[dict]:
        """The last ``RECENT_S`` seconds of requests: when the first token came, TTFT, tokens per chunk."""
        cutoff = now() - RECENT_S
        return [
            {
                "t": round(t, 3),
                "variant": v,
                "ttft_ms": round(ttft, 2),
                "tokens_per_chunk": round(tpc, 2) if tpc is not None else None,
            }
            for t, v, ttft, tpc in self.recent
            if t >= cutoff
        ]


def _sum_by_tick(groups: np.ndarray, ticks: np.ndarray, tokens: np.ndarray, n_groups: int):
    """(group, tick, tokens) for every group and tick with chunks: counted over the batch's span of ticks in one
    pass, or sorted when that span is too wide to count densely (a record from long ago)."""
    if not ticks.size:
        return []
    low = int(ticks.min())
    span = int(ticks.max()) - low + 1
    keys = groups * span + (ticks - low)
    if span * n_groups <= MAX_DENSE_TICKS:
        found = np.flatnonzero(np.bincount(keys))
        sums = np.bincount(keys, weights=tokens)[found]
    else:
        found, where = np.unique(keys, return_inverse=True)
        sums = np.bincount(where, weights=tokens)
    return zip((found // span).tolist(), (found % span + low).tolist(), sums.tolist(), strict=False)


def _interval(batches: list[Batches]) -> list[float] | None:
    ci = batch_ratio(Batches.joined(batches)).ci95 if batches else None
    return [round(ci[0], 2), round(ci[1], 2)] if ci is not None else None


def _pct(values: deque, q: float):
    return round(float(np.percentile(np.fromiter(values, float), q)), 2) if values else ""

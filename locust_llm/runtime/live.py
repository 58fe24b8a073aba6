"""Running figures per variant and level for the web UI's LLM tab, fed by the record batches as they arrive.

Bounded: the last ``KEEP`` values per figure and level; the final numbers always come from the run
directory, never from here.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ..analysis.validity import CPU_PERCENT_MAX, LOOP_LAG_MS_MAX
from ..records import now

KEEP = 5000
RATE_WINDOW_S = 10.0


@dataclass
class LevelFigures:
    requests: int = 0
    errors: int = 0
    drafted: int = 0
    accepted: int = 0
    ttft_ms: deque = field(default_factory=lambda: deque(maxlen=KEEP))
    tpot_ms: deque = field(default_factory=lambda: deque(maxlen=KEEP))
    token_times: deque = field(default_factory=lambda: deque(maxlen=KEEP))  # (t_end, tokens)


class LiveStats:
    def __init__(self) -> None:
        self.levels: dict[tuple[str, float], LevelFigures] = {}
        self.client: dict[int, dict] = {}

    def add(self, records: list[dict], client_samples: list[dict]) -> None:
        for r in records:
            figures = self.levels.setdefault((r["variant"], r["level"]), LevelFigures())
            figures.requests += 1
            if r["error_class"] is not None:
                figures.errors += 1
                continue
            t_send, t_first, t_end, n = r["t_send"], r["t_first"], r["t_end"], r["output_tokens"]
            if not math.isnan(t_first):
                figures.ttft_ms.append((t_first - t_send) * 1000)
            if n > 1 and t_end > t_first:
                figures.tpot_ms.append((t_end - t_first) / (n - 1) * 1000)
            figures.token_times.append((t_end, n))
            if r.get("draft_n"):
                figures.drafted += r["draft_n"]
                figures.accepted += r["draft_accepted"] or 0
        for sample in client_samples:
            self.client[sample["worker"]] = sample

    def token_rates(self, variant: str, level: float, start: float, end: float) -> np.ndarray:
        """Completed output tokens per one-second bin of ``[start, end)`` (what the steadiness check reads)."""
        figures = self.levels.get((variant, level))
        bins = int(end - start)
        if figures is None or bins < 1:
            return np.empty(0)
        rates = np.zeros(bins)
        for t, n in figures.token_times:
            if start <= t < start + bins:
                rates[int(t - start)] += n
        return rates

    def rows(self) -> list[dict]:
        cutoff = now() - RATE_WINDOW_S
        client_ok = all(s["cpu_percent"] <= CPU_PERCENT_MAX and s["loop_lag_ms_max"] <= LOOP_LAG_MS_MAX
                        for s in self.client.values())
        out = []
        for (variant, level), f in self.levels.items():
            recent = sum(n for t, n in f.token_times if t >= cutoff)
            out.append({
                "variant": variant, "level": level, "requests": f.requests, "errors": f.errors,
                "ttft_p50_ms": _pct(f.ttft_ms, 50), "tpot_p50_ms": _pct(f.tpot_ms, 50),
                "tpot_p95_ms": _pct(f.tpot_ms, 95), "output_tps": round(recent / RATE_WINDOW_S, 1),
                "acceptance": round(f.accepted / f.drafted, 3) if f.drafted else "",
                "client": "ok" if client_ok else "overloaded"})
        return out


def _pct(values: deque, q: float):
    return round(float(np.percentile(np.fromiter(values, float), q)), 2) if values else ""

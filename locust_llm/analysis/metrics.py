"""Per-request metrics (README, "Metric definitions"). Pure functions."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

__all__ = ["inter_chunk_ms", "per_token_itl_ms", "request_metrics"]


def request_metrics(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per request with its latency and speed figures (NaN where undefined, e.g. failures)."""
    ok = frame["error_class"].isna()
    n = frame["output_tokens"].astype(float)
    decode_s = frame["t_end"] - frame["t_first"]
    out = pd.DataFrame(index=frame.index)
    out["ttft_ms"] = ((frame["t_first"] - frame["t_send"]) * 1000).where(ok)
    out["ttft_sched_ms"] = ((frame["t_first"] - frame["t_intended"]) * 1000).where(ok)
    out["e2e_ms"] = ((frame["t_end"] - frame["t_send"]) * 1000).where(ok)
    out["e2e_sched_ms"] = ((frame["t_end"] - frame["t_intended"]) * 1000).where(ok)
    multi = ok & (n >= 2) & (decode_s > 0)
    out["tpot_ms"] = (decode_s / (n - 1) * 1000).where(multi)
    out["decode_tps"] = ((n - 1) / decode_s).where(multi)
    out["e2e_tps"] = (n / (frame["t_end"] - frame["t_send"])).where(ok & (n >= 1))
    out["schedule_lag_ms"] = (frame["t_send"] - frame["t_intended"]) * 1000
    return out


def per_token_itl_ms(offsets: Iterable, tokens: Iterable) -> list[float]:
    """Inter-token latency: each chunk gap split evenly over the tokens that chunk carried.

    Tokens that arrive with the first chunk have no gap before them (TTFT covers them).
    """
    offsets, tokens = list(offsets), list(tokens)
    values: list[float] = []
    for j in range(1, len(offsets)):
        k = int(tokens[j])
        if k > 0:
            values.extend([(offsets[j] - offsets[j - 1]) * 1000.0 / k] * k)
    return values


def inter_chunk_ms(offsets: Iterable) -> list[float]:
    offsets = list(offsets)
    return [(offsets[j] - offsets[j - 1]) * 1000.0 for j in range(1, len(offsets))]

"""A replayed trace (``load.trace``) in a step's figures: how many of the window's records were replayed, skipped,
dropped or not sent, and how far each send landed from the trace's own time. Pure.

The level of a trace step is the trace's mean rate at the step's speed, so the speed is the level over the
rate at speed 1 (``env.json`` ``workload.trace.rate_rps``). Every phase of the step counts: the replay is the
whole step, its warm-up included. Latency from the trace's intended time is the step's ``ttft_sched_ms`` and
``e2e_sched_ms`` (the steady window).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..fmt import num
from ..rundir.env import RunEnv
from .stats import percentile_of

__all__ = [
    "trace_step",
]


def trace_step(rows: pd.DataFrame, level: float, env: RunEnv) -> dict | None:
    """The replay figures of one step (``rows``: the variant's requests of that step, every phase); None when the
    run replayed no trace."""
    trace = env.workload.trace if env.workload is not None else None
    if trace is None or not trace.rate_rps:
        return None
    sent = rows["t_send"].notna()
    dropped = int((rows["error_class"] == "dropped_inflight_cap").sum())
    replayed, records, over = int(sent.sum()), int(trace.records or 0), int(trace.over_context or 0)
    error_ms = ((rows.loc[sent, "t_send"] - rows.loc[sent, "t_intended"]) * 1000).to_numpy(dtype=float)
    finite = error_ms[np.isfinite(error_ms)]
    figures: dict[str, Any] = {
        "speed": level / trace.rate_rps,
        "records": records,
        "over_context": over,
        "replayed": replayed,
        "dropped": dropped,
        "not_sent": max(records - over - replayed - dropped, 0),
        "arrival_error_p50_ms": percentile_of(finite, 50),
        "arrival_error_p99_ms": percentile_of(finite, 99),
        "arrival_error_max_ms": float(finite.max()) if finite.size else None,
    }
    figures["text"] = (
        f"the trace at {num(figures['speed'])}x: {replayed} of {records} records replayed"
        + (f", {over} skipped (over the server's context)" if over else "")
        + (f", {dropped} dropped at the in-flight cap" if dropped else "")
        + (f", {figures['not_sent']} not sent (the step ended first)" if figures["not_sent"] else "")
        + (
            f"; sent {num(figures['arrival_error_p50_ms'])} ms (P50) and {num(figures['arrival_error_p99_ms'])} ms "
            "(P99) after the trace's time"
            if finite.size
            else ""
        )
    )
    return figures

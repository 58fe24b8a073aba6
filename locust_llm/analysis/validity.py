"""Was the client the bottleneck of a step? Rules over the client's own samples and the step's figures. Pure.

A step is invalid when any of these holds (thresholds below, also in the README):
* a load process averaged more than ``CPU_PERCENT_MAX`` of one core over the steady window (gevent runs on
  one core, so a busy process stamps tokens late);
* the 95th percentile of the per-second worst event-loop lag exceeded ``LOOP_LAG_MS_MAX``;
* open loop: the 99th percentile of schedule lag (send time minus intended time) exceeded
  ``SCHEDULE_LAG_MS_MAX``, arrivals were dropped at the in-flight cap, or fewer than
  ``ACHIEVED_FRACTION_MIN`` of the scheduled arrivals were sent.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

__all__ = ["client_validity"]

CPU_PERCENT_MAX = 90.0
LOOP_LAG_MS_MAX = 20.0
SCHEDULE_LAG_MS_MAX = 20.0
ACHIEVED_FRACTION_MIN = 0.95


def client_validity(client: pd.DataFrame, step: dict, start: float, end: float) -> dict:
    reasons: list[str] = []
    details: dict = {}
    window = (
        client[(client["t"] >= start) & (client["t"] <= end)]
        if len(client) and math.isfinite(start)
        else pd.DataFrame()
    )
    if len(window):
        cpu = window.groupby("worker")["cpu_percent"].mean()
        details["cpu_percent_max"] = float(cpu.max())
        details["loop_lag_ms_p95"] = float(np.percentile(window["loop_lag_ms_max"], 95))
        if details["cpu_percent_max"] > CPU_PERCENT_MAX:
            reasons.append(f"client CPU {details['cpu_percent_max']:.0f}% of a core (limit {CPU_PERCENT_MAX:.0f}%)")
        if details["loop_lag_ms_p95"] > LOOP_LAG_MS_MAX:
            reasons.append(f"event-loop lag P95 {details['loop_lag_ms_p95']:.1f} ms (limit {LOOP_LAG_MS_MAX:.0f} ms)")
    if step.get("mode") == "open":
        lag = (step.get("schedule_lag_ms") or {}).get("p99")
        details["schedule_lag_ms_p99"] = lag
        if lag is not None and lag > SCHEDULE_LAG_MS_MAX:
            reasons.append(f"requests sent late: schedule lag P99 {lag:.1f} ms (limit {SCHEDULE_LAG_MS_MAX:.0f} ms)")
        dropped = (step.get("errors_by_class") or {}).get("dropped_inflight_cap", 0)
        if dropped:
            reasons.append(f"{dropped} arrivals dropped at the in-flight cap")
        scheduled, achieved = step.get("scheduled_rate"), step.get("achieved_rate")
        if scheduled and achieved is not None and achieved < ACHIEVED_FRACTION_MIN * scheduled:
            reasons.append(f"sent {achieved:.2f} req/s of {scheduled:.2f} scheduled")
    if not len(window) and step.get("mode") != "open":
        return {"client_valid": None, "client_validity": {**details, "reasons": ["no client samples in the window"]}}
    return {"client_valid": not reasons, "client_validity": {**details, "reasons": reasons}}

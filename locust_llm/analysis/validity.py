"""What the load generator could have done to a step's figures, figure by figure. Pure.

A client stall of L ms delays every stamp taken during it by up to L ms: it can spoil a TTFT P99 of 30 ms and cannot
spoil a 20 s window's output tok/s. So each figure carries its own bound (docs/verdicts-and-gates.md, "Client
validity"):

* **Latency figures.** Each load process samples its event loop ten times a second (``runtime.clientmon``); the
  worst lag of the second in which a request's first or last chunk was stamped bounds how late that stamp is, and
  in an open loop the request's schedule lag (send minus intended time) is the client's own lateness too. So the
  client-free value of each request lies in ``[x - lag, x]`` (TTFT, E2E; from the intended send: ``x - lag - schedule
  lag``), TPOT within ``lag / (tokens - 1)`` either way; a percentile of the client-free values lies between the same
  percentile of the shifted values (a percentile never falls when a value rises). ``bounds`` holds, per figure and
  statistic, how far below and above the figure the client-free value can lie, as fractions of the figure.
* **Throughput.** Closed loop: the share of the users' time spent outside a request (the in-flight count short of the
  users, the waits the scenario asks for aside: its think time, and a conversation's think time between turns) plus
  the expected stall before each request's last stamp (the mean loop lag of its second) is the share of each request
  cycle the users waited on the client; the server could have delivered up to ``output tok/s / (1 - share)``. Open
  loop: the offered rate sets throughput; arrivals dropped at the in-flight cap or not sent spoil it. A process at
  the end of its core spoils everything.

The rules:

* a step is **client-invalid** (its verdict figures left out) when a load process averaged more than
  ``CPU_PERCENT_MAX`` of one core; in a closed loop when the client's share of the request cycle exceeded
  ``CLIENT_SHARE_MAX`` (unless most requests failed); in an open loop when arrivals were dropped at the in-flight
  cap or fewer than ``ACHIEVED_FRACTION_MIN`` of the scheduled ones were sent;
* a latency figure is **distorted** when the client could account for more than ``CLIENT_SHARE_MAX`` of it; the
  strict limits the latency figures had before (the P95 of the per-second worst loop lag above ``LOOP_LAG_MS_MAX``,
  an open loop's schedule lag P99 above ``SCHEDULE_LAG_MS_MAX``) are said in ``latency_reasons`` and no longer make
  the step invalid on their own;
* a comparison (``analysis.comparison``) widens each speed-up's interval by both sides' bounds; a level whose verdict
  would change within them is client-invalid, any other keeps its verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .stats import occupancy_samples

__all__ = [
    "CLIENT_SHARE_MAX",
    "Requests",
    "Think",
    "FIGURE_STATS",
    "client_validity",
    "figure_bound",
    "intended_waits_s",
    "in_flight_spans",
    "request_shifts",
    "widened",
]

CPU_PERCENT_MAX = 90.0
LOOP_LAG_MS_MAX = 20.0
SCHEDULE_LAG_MS_MAX = 20.0
ACHIEVED_FRACTION_MIN = 0.95
CLIENT_SHARE_MAX = 0.05
FIGURE_STATS = ("p50", "p95", "p99", "mean")
LATENCY_FIGURES = ("ttft_ms", "tpot_ms", "e2e_ms", "decode_tps")
OPEN_LATENCY_FIGURES = ("ttft_sched_ms", "e2e_sched_ms", "e2e_sched_all_ms")


def _stamp_lag(client: pd.DataFrame, rows: pd.DataFrame, column: str, lag: str) -> np.ndarray:
    """Per row, ``lag`` (ms) of its load process's client sample that covers the time in ``column`` (a sample at t
    covers the second before it); the window's worst where no sample covers it, NaN where the time is NaN."""
    times = rows[column].to_numpy(dtype=float)
    out = np.full(times.size, np.nan)
    known = np.isfinite(times)
    if not known.any():
        return out
    left = pd.DataFrame({"t": times[known], "worker": rows["worker"].to_numpy()[known], "row": np.flatnonzero(known)})
    right = client[["t", "worker", lag]].dropna().sort_values("t")
    right = right.astype({"worker": left["worker"].dtype})
    merged = pd.merge_asof(
        left.sort_values("t"),
        right,
        on="t",
        by="worker",
        direction="forward",
        # pandas-stubs type no float tolerance; pandas takes one on a float key.
        tolerance=1.5,  # type: ignore[arg-type]
        allow_exact_matches=True,
    )
    worst = float(right[lag].max()) if len(right) else 0.0
    out[merged["row"].to_numpy()] = merged[lag].fillna(worst).to_numpy()
    return out


def request_shifts(client: pd.DataFrame, rows: pd.DataFrame, derived: pd.DataFrame) -> dict[str, tuple]:
    """Per latency figure, per request: ``(down, up)`` such that its client-free value lies in ``[x - down, x + up]``
    (``derived``'s columns, ``analysis.metrics``; ``rows`` the same requests' stamps)."""
    first = _stamp_lag(client, rows, "t_first", "loop_lag_ms_max")
    end = _stamp_lag(client, rows, "t_end", "loop_lag_ms_max")
    done = _stamp_lag(client, rows, "t_done", "loop_lag_ms_max") if "t_done" in rows else end
    late = np.clip(((rows["t_send"] - rows["t_intended"]) * 1000.0).to_numpy(dtype=float), 0.0, None)
    late = np.nan_to_num(late)
    zero = np.zeros(len(rows))
    tokens = rows["output_tokens"].to_numpy(dtype=float)
    per_gap = np.where(tokens >= 2, 1.0 / np.maximum(tokens - 1.0, 1.0), np.nan)
    tpot = derived["tpot_ms"].to_numpy(dtype=float)
    tpot_down, tpot_up = end * per_gap, first * per_gap
    with np.errstate(divide="ignore", invalid="ignore"):
        # decode tok/s = 1000 / TPOT: TPOT's interval, inverted
        decode = derived["decode_tps"].to_numpy(dtype=float)
        decode_low = 1000.0 / (tpot + tpot_up)
        decode_high = np.where(tpot - tpot_down > 0, 1000.0 / (tpot - tpot_down), np.inf)
    last = np.where(np.isfinite(end), end, done)
    return {
        "ttft_ms": (first, zero),
        "e2e_ms": (end, zero),
        "tpot_ms": (tpot_down, tpot_up),
        "decode_tps": (decode - decode_low, decode_high - decode),
        "ttft_sched_ms": (first + late, zero),
        "e2e_sched_ms": (end + late, zero),
        "e2e_sched_all_ms": (np.nan_to_num(last, nan=0.0) + late, zero),
    }


def _stat(values: np.ndarray, stat: str) -> float:
    return float(np.mean(values)) if stat == "mean" else float(np.percentile(values, float(stat[1:])))


def figure_bound(values, down, up) -> dict | None:
    """How far the client-free figure can lie below and above the measured one, per statistic, as fractions of the
    figure: ``{"p50": [below, above], ..., "worst": largest fraction}``; None without finite values."""
    x, down, up = (np.asarray(a, dtype=float) for a in (values, down, up))
    keep = np.isfinite(x) & ~np.isnan(down) & ~np.isnan(up)
    x, down, up = x[keep], down[keep], up[keep]
    if not x.size:
        return None
    out: dict = {}
    for stat in FIGURE_STATS:
        value = _stat(x, stat)
        if not value:
            out[stat] = [0.0, 0.0]
            continue
        with np.errstate(invalid="ignore"):
            below = (value - _stat(x - down, stat)) / abs(value)
            above = (_stat(x + up, stat) - value) / abs(value)
        out[stat] = [max(below, 0.0), max(above, 0.0) if math.isfinite(above) else math.inf]
    out["worst"] = max(max(pair) for key, pair in out.items() if key in FIGURE_STATS)
    return out


def in_flight_spans(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """When each request was in flight: from its connection's start (or its send; setting up a connection is the
    network's and the server's time, not the client's) to the client's end of it."""
    begin = rows["t_connect"].fillna(rows["t_send"]) if "t_connect" in rows else rows["t_send"]
    finish = rows["t_done"].fillna(rows["t_end"]) if "t_done" in rows else rows["t_end"]
    return begin.to_numpy(dtype=float), finish.to_numpy(dtype=float)


def intended_waits_s(rows: pd.DataFrame, start: float, end: float, think: Think) -> float:
    """Seconds of ``[start, end)`` the users spent in the waits the scenario asks for: after each of the variant's
    ``rows``, the wait before the user's next request (``think.turn_s`` after an answered turn that is not its
    conversation's last, ``think.request_s`` otherwise), each clipped to the window."""
    if not len(rows) or not (think.request_s or think.turn_s):
        return 0.0
    _, done = in_flight_spans(rows)
    if "turn" in rows:
        mid = (rows["error_class"].isna() & (rows["turn"] > 0) & (rows["turn"] < rows["turns"])).to_numpy()
    else:
        mid = np.zeros(len(rows), dtype=bool)
    wait = np.where(mid, think.turn_s, think.request_s)
    return float(np.nansum(np.clip(np.minimum(done + wait, end) - np.maximum(done, start), 0.0, None)))


def _client_share(client: pd.DataFrame, rows: pd.DataFrame, step: dict, start: float, end: float, waited_s: float):
    """Closed loop: the share of the users' time in the window spent waiting on the client, or None."""
    users = step.get("users")
    if not users or not len(rows) or not end > start:
        return None
    window = end - start
    occupancy = occupancy_samples(*in_flight_spans(rows), start, end, bin_s=window)
    idle = 1.0 - float(occupancy.mean()) / users - waited_s / (users * window)
    ending = rows[rows["t_done"].between(start, end)] if "t_done" in rows else rows.iloc[0:0]
    stall_s = np.nansum(_stamp_lag(client, ending, "t_done", "loop_lag_ms_mean")) / 1000.0 if len(client) else 0.0
    return max(idle, 0.0) + stall_s / (users * window)


@dataclass(frozen=True)
class Think:
    """The waits the scenario asks for, which are the users' own and not the client's: ``request_s`` before each
    request (``load.think_time_s``; in a conversation, before its first turn), ``turn_s`` before each later turn of
    a conversation (``load.conversation.think_s``)."""

    request_s: float = 0.0
    turn_s: float = 0.0


@dataclass
class Requests:
    """A step's requests as the rules read them: those sent in its window (``rows``) with their metrics
    (``derived``, ``analysis.metrics``), every request of the variant in flight during the window (``overlapping``),
    how many of a set of metrics meet every SLO (``good``; goodput), and the seconds of the window the users spent
    in the waits the scenario asks for (``waited_s``, ``intended_waits_s``)."""

    rows: pd.DataFrame
    derived: pd.DataFrame
    overlapping: pd.DataFrame
    good: Callable[[pd.DataFrame], int] | None = None
    waited_s: float = 0.0


def client_validity(
    client: pd.DataFrame, step: dict, start: float, end: float, requests: Requests | None = None
) -> dict:
    """``client_valid`` (the step's verdict figures could not be the client's) and ``client_validity`` with the
    figures behind it, from the load processes' samples (``client``) and the step's ``requests``."""
    throughput: list[str] = []
    latency: list[str] = []
    details: dict = {"bounds": {}}
    window = (
        client[(client["t"] >= start) & (client["t"] <= end)]
        if len(client) and math.isfinite(start)
        else pd.DataFrame()
    )
    open_loop = step.get("mode") == "open"
    if len(window):
        cpu = window.groupby("worker")["cpu_percent"].mean()
        details["cpu_percent_max"] = float(cpu.max())
        details["loop_lag_ms_p95"] = float(np.percentile(window["loop_lag_ms_max"], 95))
        details["loop_lag_ms_max"] = float(window["loop_lag_ms_max"].max())
        if details["cpu_percent_max"] > CPU_PERCENT_MAX:
            throughput.append(
                f"client CPU {details['cpu_percent_max']:.0f}% of a core (limit {CPU_PERCENT_MAX:.0f}%): it could "
                "not keep up"
            )
        if details["loop_lag_ms_p95"] > LOOP_LAG_MS_MAX:
            latency.append(f"event-loop lag P95 {details['loop_lag_ms_p95']:.1f} ms (limit {LOOP_LAG_MS_MAX:.0f} ms)")
        if not open_loop and requests is not None:
            share = _client_share(client, requests.overlapping, step, start, end, requests.waited_s)
            details["client_share"] = share
            # Requests that fail at once make the client's own fraction of a millisecond a large share of a short
            # cycle: when most failed, the error rate says what went wrong, not the client.
            mostly_failed = (step.get("error_rate") or 0.0) > 0.5
            if share is not None and share > CLIENT_SHARE_MAX and not mostly_failed:
                throughput.append(
                    f"the users spent {share:.1%} of each request cycle waiting on the client "
                    f"(limit {CLIENT_SHARE_MAX:.0%})"
                )
    if open_loop:
        lag = (step.get("schedule_lag_ms") or {}).get("p99")
        details["schedule_lag_ms_p99"] = lag
        if lag is not None and lag > SCHEDULE_LAG_MS_MAX:
            latency.append(f"requests sent late: schedule lag P99 {lag:.1f} ms (limit {SCHEDULE_LAG_MS_MAX:.0f} ms)")
        dropped = (step.get("errors_by_class") or {}).get("dropped_inflight_cap", 0)
        if dropped:
            throughput.append(f"{dropped} arrivals dropped at the in-flight cap")
        scheduled, achieved = step.get("scheduled_rate"), step.get("achieved_rate")
        if scheduled and achieved is not None and achieved < ACHIEVED_FRACTION_MIN * scheduled:
            throughput.append(f"sent {achieved:.2f} req/s of {scheduled:.2f} scheduled")
    if len(window) and requests is not None and len(requests.rows):
        derived = requests.derived
        shifts = request_shifts(client, requests.rows, derived)
        names = LATENCY_FIGURES + (OPEN_LATENCY_FIGURES if open_loop else ())
        for name in names:
            bound = figure_bound(derived[name], *shifts[name])
            if bound is not None:
                details["bounds"][name] = {**bound, "distorted": bound["worst"] > CLIENT_SHARE_MAX}
        goodput = _goodput_bound(requests, shifts)
        if goodput is not None:
            details["bounds"]["goodput_rps"] = goodput
        distorted = [name for name, bound in details["bounds"].items() if bound["distorted"]]
        if distorted:
            latency.append(f"the client could account for more than {CLIENT_SHARE_MAX:.0%} of {', '.join(distorted)}")
    share = details.get("client_share")
    if share is not None:
        details["bounds"]["output_tps"] = _upward(share / (1.0 - share) if share < 1 else math.inf)
    details["latency_valid"] = not latency if len(window) or open_loop else None
    details["latency_reasons"] = latency
    details["reasons"] = throughput
    if not len(window) and not open_loop:
        return {"client_valid": None, "client_validity": {**details, "reasons": ["no client samples in the window"]}}
    return {"client_valid": not throughput, "client_validity": details}


def _upward(fraction: float) -> dict:
    """A figure the client can only have lowered, by up to ``fraction`` of it."""
    return {
        **{stat: [0.0, fraction] for stat in FIGURE_STATS},
        "worst": fraction,
        "distorted": fraction > CLIENT_SHARE_MAX,
    }


def _goodput_bound(requests: Requests, shifts: dict[str, tuple]) -> dict | None:
    """Goodput the client could have cost: requests over an SLO that meet it once their latencies lose their client
    bounds count as good at most."""
    if requests.good is None:
        return None
    good = requests.good(requests.derived)
    if not good:
        return None
    shifted = requests.derived.copy()
    for column in ("ttft_ms", "ttft_sched_ms", "e2e_ms", "e2e_sched_ms", "tpot_ms"):  # what the SLOs read
        shifted[column] = shifted[column] - shifts[column][0]
    return _upward((requests.good(shifted) - good) / good)


def widened(ratio: dict, variant: list[float] | None, baseline: list[float] | None, higher_is_better: bool) -> dict:
    """A speed-up's interval widened by how far the client could have moved each side's figure (``[below, above]``
    fractions, ``figure_bound``): the interval the client-free speed-up lies in, with the same confidence.
    ``{"client_ci95": [lo, hi] or None, ...}`` (None: no interval, or nothing to widen)."""
    ci = ratio.get("ci95")
    if not ci or ci[0] is None or ci[1] is None or (not variant and not baseline):
        return {"client_ci95": None}
    v_below, v_above = variant or (0.0, 0.0)
    b_below, b_above = baseline or (0.0, 0.0)
    if higher_is_better:  # variant / baseline
        lo = ci[0] * (1.0 - v_below) / (1.0 + b_above)
        hi = ci[1] * (1.0 + v_above) / (1.0 - b_below) if b_below < 1 else math.inf
    else:  # baseline / variant
        lo = ci[0] * (1.0 - b_below) / (1.0 + v_above)
        hi = ci[1] * (1.0 + b_above) / (1.0 - v_below) if v_below < 1 else math.inf
    return {"client_ci95": [max(lo, 0.0), hi]}

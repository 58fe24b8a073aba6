"""A step's output throughput and its interval: a ratio of batch totals over request cycles or send-time batches. Pure.

Closed loop. Each user sends, waits for the answer (and its think time or back-off), and sends again: a *cycle*
runs from one send to the same user's next send and earns the request's output tokens (0 when it failed). The
step's throughput is a renewal-reward ratio: the tokens of the cycles that start in the steady window over the
time those cycles took, per user (``users * sum(tokens) / sum(durations)``). A cycle with no next send in the step
(the user was stopped, or the step ended) lasts until its request was done. A conversation (``turn`` > 1 after its
first turn) is one cycle: all its turns' tokens, from its first send to the user's next conversation.

Open loop, and runs that recorded no user (``user`` column absent or -1): the requests sent in the window, all
their tokens, over the window's length. A request counts in the step that sent it, by the same rule in
``output_tokens``: the two figures agree (``output_tokens / covered_s == output_tps``).

Interval. The window is cut into ``k`` consecutive time batches by send time (5 to 10; closed loop: at least 2
cycles per user each; open loop and time batches: at least ``max(2 s, 2 x P95 E2E)`` each), each with its tokens
``R_j`` and time ``T_j`` (its cycles' durations over users, or its length). The ratio ``sum(R) / sum(T)`` has the
delta-method variance ``k / (k - 1) * sum((R_j - value T_j)^2) / sum(T)^2``; the interval is drawn on the log scale
(``value * exp(+-t_{k-1} se / value)``), so it is never negative; a count's Poisson spread (``1 / sqrt(tokens)`` on
the log scale) is its floor, so it never has zero width. Batches of several cycles each are nearly
independent, where 1-second bins of one or two cycles measure where a cycle falls, not the server. With fewer than
5 batches there is no interval: "too short: no interval" (``note``). That interval is the window's: a server whose
speed wanders on a scale of seconds (AR(1), phi 0.8, 12%) makes a 30 s window's figure miss its long-run throughput
more often than 5% (80.2% coverage, benchmarks/step_intervals.py), which a comparison of two windows must allow for.

Speed-up. Variant and baseline are measured at different times, so the server's wander between their blocks is
noise the ratio carries. Consecutive batches of a wandering server are correlated, which the batch variance does
not see: the lag-1 autocorrelation of the batches' rates, pooled over the level's blocks (each about its own mean)
and corrected for a short series' downward bias (``E[r] = rho - (1 + 3 rho) / n``), inflates each pair's variance
by ``(1 + rho) / (1 - rho)`` and divides its degrees of freedom by the same factor (the batches' effective number).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .rates import pool_log_ratios
from .stats import t_quantile

__all__ = [
    "MIN_BATCHES",
    "MIN_CYCLES_PER_USER",
    "Batches",
    "Throughput",
    "batch_lag1",
    "batch_ratio",
    "block_throughput_ratio",
    "step_batches",
]

MIN_BATCHES = 5
MAX_BATCHES = 10
CYCLES_PER_USER_BATCH = 2
MIN_BATCH_S = 2.0
# The lag-1 estimate from ~10 batches a block has a standard error near 0.3: above 0.7 it is mostly its own noise,
# and the degrees of freedom it would leave (under 2 a pair) widen intervals to nothing (A/A, phi 0.8: allowing 0.9
# left the false exclusions as they were and made the widest interval 79x wide; benchmarks/step_intervals.py).
MAX_LAG1 = 0.7
TOO_SHORT = "too short: no interval"
MIN_CYCLES_PER_USER = MIN_BATCHES * CYCLES_PER_USER_BATCH  # a closed-loop step's least for an interval


@dataclass(frozen=True)
class Batches:
    """Consecutive time batches of a window: output tokens and seconds each; ``method``: ``cycles`` or ``time``."""

    tokens: np.ndarray
    seconds: np.ndarray
    method: str
    cycles: int = 0  # requests (cycles) counted
    users: int = 0  # closed loop: users with a cycle in the window

    @classmethod
    def joined(cls, parts: list[Batches]) -> Batches:
        """Several blocks of one level as one set of batches (a level's blocks measure the same quantity)."""
        if not parts:
            return cls(np.empty(0), np.empty(0), "none")
        return cls(
            np.concatenate([p.tokens for p in parts]),
            np.concatenate([p.seconds for p in parts]),
            parts[0].method if len({p.method for p in parts}) == 1 else "mixed",
            sum(p.cycles for p in parts),
            max(p.users for p in parts),
        )


@dataclass(frozen=True)
class Throughput:
    value: float | None
    ci95: list[float] | None
    se_log: float | None  # standard error of log(value): what comparisons of two throughputs combine
    df: int  # degrees of freedom of that error (batches - 1)
    batches: int
    covered_s: float  # the seconds the value divides by
    method: str
    note: str | None  # why there is no interval


def batch_ratio(batches: Batches, alpha: float = 0.05) -> Throughput:
    """``sum(tokens) / sum(seconds)`` with its log-scale delta-method interval from the batch totals."""
    r, t = batches.tokens, batches.seconds
    k = int(r.size)
    total_t = float(t.sum()) if k else 0.0
    if k == 0 or total_t <= 0:
        return Throughput(None, None, None, 0, k, total_t, batches.method, "no requests in the window")
    value = float(r.sum()) / total_t
    if k < MIN_BATCHES:
        return Throughput(value, None, None, 0, k, total_t, batches.method, TOO_SHORT)
    if value <= 0:
        return Throughput(value, None, None, k - 1, k, total_t, batches.method, "no output tokens: no interval")
    residuals = r - value * t
    variance = k / (k - 1) * float(residuals @ residuals) / total_t**2
    # A count's Poisson spread is the floor (1 / sqrt(tokens) on the log scale): no interval has zero width.
    se_log = max(math.sqrt(variance) / value, 1.0 / math.sqrt(float(r.sum())))
    half = t_quantile(1.0 - alpha / 2.0, k - 1) * se_log
    ci = [value * math.exp(-half), value * math.exp(half)]
    return Throughput(value, ci, se_log, k - 1, k, total_t, batches.method, None)


def _rewards(rows: pd.DataFrame) -> np.ndarray:
    """Output tokens of each request; 0 for a failure (a suspect count included): a failed cycle earns nothing."""
    return np.where(rows["error_class"].isna(), rows["output_tokens"].to_numpy(dtype=float), 0.0)


def _slices(times: np.ndarray, start: float, end: float, k: int) -> np.ndarray:
    return np.minimum(((times - start) / ((end - start) / k)).astype(np.int64), k - 1)


def step_batches(step_rows: pd.DataFrame, start: float, end: float, p95_e2e_s: float | None = None) -> Batches:
    """The batches of one step's steady window ``[start, end)``. ``step_rows``: every request the step sent, any
    phase (a cycle's end is the same user's next send, perhaps after the window). By cycles when the rows carry
    users, else by send-time batches (``p95_e2e_s`` sets their least length)."""
    if not (math.isfinite(start) and math.isfinite(end)) or end <= start:
        return Batches(np.empty(0), np.empty(0), "none")
    sent = step_rows[step_rows["t_send"].notna()]
    if "user" in sent and len(sent) and (sent["user"] >= 0).all() and (sent["mode"] == "closed").all():
        return _cycle_batches(sent, start, end)
    inside = sent[(sent["t_send"] >= start) & (sent["t_send"] < end)]
    least = max(MIN_BATCH_S, 2.0 * p95_e2e_s) if p95_e2e_s is not None and math.isfinite(p95_e2e_s) else MIN_BATCH_S
    k = max(1, min(MAX_BATCHES, int((end - start) // least)))
    index = _slices(inside["t_send"].to_numpy(dtype=float), start, end, k)
    tokens = np.bincount(index, weights=_rewards(inside), minlength=k)
    return Batches(tokens, np.full(k, (end - start) / k), "time", int(len(inside)))


def _cycle_batches(sent: pd.DataFrame, start: float, end: float) -> Batches:
    ordered = sent.sort_values(["worker", "user", "t_send"], kind="stable")
    user = ordered["worker"].to_numpy(dtype=np.int64) * (1 << 32) + ordered["user"].to_numpy(dtype=np.int64)
    # A conversation's turns are one cycle: its first send to the user's next conversation's first send.
    opens = ordered["turn"].to_numpy() <= 1 if "turn" in ordered else np.ones(len(ordered), dtype=bool)
    opens |= np.append(True, user[1:] != user[:-1])
    cycle = np.cumsum(opens) - 1
    rewards = np.bincount(cycle, weights=_rewards(ordered))
    send = ordered["t_send"].to_numpy(dtype=float)[opens]
    owner = user[opens]
    done = np.maximum.reduceat(ordered["t_done"].fillna(ordered["t_end"]).to_numpy(dtype=float), np.flatnonzero(opens))
    same_user = np.append(owner[1:] == owner[:-1], False)
    following = np.append(send[1:], np.nan)
    duration = np.where(same_user, following - send, done - send)
    keep = (send >= start) & (send < end) & np.isfinite(duration)
    rewards, duration, send = rewards[keep], duration[keep], send[keep]
    users = int(np.unique(owner[keep]).size)
    if not users:
        return Batches(np.empty(0), np.empty(0), "cycles")
    k = max(1, min(MAX_BATCHES, int(send.size / users // CYCLES_PER_USER_BATCH)))
    index = _slices(send, start, end, k)
    tokens = np.bincount(index, weights=rewards, minlength=k)
    seconds = np.bincount(index, weights=duration, minlength=k) / users
    return Batches(tokens, seconds, "cycles", int(np.count_nonzero(keep)), users)


def batch_lag1(parts: list[Batches]) -> float:
    """Lag-1 autocorrelation of consecutive batches' rates, pooled over ``parts`` (each about its own mean), corrected
    for the downward bias of short series and held in ``[0, MAX_LAG1]`` (0: too few batches to tell)."""
    products = squares = 0.0
    series = 0
    points = 0
    for part in parts:
        if part.tokens.size < 3 or not (part.seconds > 0).all():
            continue
        rates = part.tokens / part.seconds
        centred = rates - rates.mean()
        products += float(centred[1:] @ centred[:-1])
        squares += float(centred @ centred)
        series += 1
        points += centred.size
    if not series or squares <= 0:
        return 0.0
    n = points / series
    if n <= 3:
        return 0.0
    r = products / squares
    # Marriott-Pope: a series of n points about its own mean gives E[r] = rho - (1 + 3 rho) / n; solved for rho.
    return min(max((r * n + 1.0) / (n - 3.0), 0.0), MAX_LAG1)


def block_throughput_ratio(
    variant: dict[int, Batches], baseline: dict[int, Batches], alpha: float = 0.05
) -> dict[str, object]:
    """Throughput speed-up, variant / baseline, as ``rates.block_ratio_ci`` gives it (``value``, ``ci95``,
    ``blocks``, ``blocks_agree``, ``block_values``, ``q``): block ``r`` of each side paired (the same step number; else
    each side's blocks joined), each pair's log ratio with the variance of the two sides' log throughputs (inflated
    by the batches' autocorrelation, ``batch_lag1``; module docstring), pooled with Cochran's Q for agreement.
    Blocks without an interval (fewer than 5 batches) are left out of the pairs; without any pair ``value`` is the
    ratio of all blocks joined, with no interval."""
    keys = sorted(set(variant) & set(baseline))
    pairs = (
        [(variant[k], baseline[k]) for k in keys]
        if keys
        else [(Batches.joined(list(variant.values())), Batches.joined(list(baseline.values())))]
    )
    rho = batch_lag1([part for pair in pairs for part in pair])
    inflation = (1.0 + rho) / (1.0 - rho)
    logs = []
    for v, b in pairs:
        fv, fb = batch_ratio(v, alpha), batch_ratio(b, alpha)
        if fv.se_log is not None and fb.se_log is not None and fv.value and fb.value:
            variance = (fv.se_log**2 + fb.se_log**2) * inflation
            logs.append((math.log(fv.value / fb.value), variance, min(fv.df, fb.df) / inflation))
    whole_v = batch_ratio(Batches.joined([v for v, _ in pairs]), alpha).value
    whole_b = batch_ratio(Batches.joined([b for _, b in pairs]), alpha).value
    out: dict[str, object] = {"value": None, "ci95": None, "blocks": 0, "blocks_agree": None, "block_values": []}
    if whole_v is not None and whole_b:
        out["value"] = whole_v / whole_b
    out.update(pool_log_ratios(logs, alpha))
    return out

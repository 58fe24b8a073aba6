"""Closed-loop request cycles against a simulated server with a fixed number of slots: known throughput by design.

``users`` users send back to back (plus ``think_s``); the server serves at most ``slots`` requests at once, the rest
wait in arrival order; each request takes ``prefill_s`` (no token) then ``tokens`` tokens at a per-token time drawn
uniformly from ``tpot_s``. The true throughput is ``min(users, slots) * tokens / E[service]`` when users never think
(``slots`` >= ``users``: each user's cycle is one service), which the tests compare the estimate with.
"""

import heapq

import numpy as np
import pandas as pd


def true_throughput(users: int, slots: int, tokens: int, prefill_s: float, tpot_s: tuple[float, float]) -> float:
    mean_service = prefill_s + tokens * (tpot_s[0] + tpot_s[1]) / 2.0
    return min(users, slots) * tokens / mean_service


def closed_loop(
    rng,
    users: int,
    slots: int,
    window_s: float,
    tokens: int = 32,
    prefill_s: float = 0.1,
    tpot_s: tuple[float, float] = (0.01, 0.03),
    warmup_s: float = 5.0,
    slowdown=None,
    t0: float = 0.0,
) -> tuple[pd.DataFrame, float, float]:
    """The step's requests (``worker``, ``user``, ``mode``, ``t_send``, ``t_done``, ``t_end``, ``output_tokens``,
    ``error_class``) and its steady window ``(start, end)``; users keep sending past the window's end. ``slowdown``:
    a function of time by which a request begun then takes longer (1: as drawn); ``t0``: when the step starts."""
    start, end = t0 + warmup_s, t0 + warmup_s + window_s
    free = [0.0] * max(slots, 1)  # when each slot is next free
    heapq.heapify(free)
    pending = [(t0 + 0.001 * u, u) for u in range(users)]
    heapq.heapify(pending)
    rows = []
    while pending:
        send, user = heapq.heappop(pending)
        if send > end + 30.0:
            continue
        begin = max(send, heapq.heappop(free))
        factor = slowdown(begin) if slowdown is not None else 1.0
        done = begin + (prefill_s + tokens * rng.uniform(*tpot_s)) * factor
        heapq.heappush(free, done)
        rows.append((0, user, "closed", send, done, done, tokens, None))
        heapq.heappush(pending, (done, user))
    columns = ["worker", "user", "mode", "t_send", "t_done", "t_end", "output_tokens", "error_class"]
    return pd.DataFrame(rows, columns=columns), start, end


def ar1(rng, n: int, phi: float, sigma: float) -> np.ndarray:
    """A stationary AR(1) series of relative deviations: lag-1 correlation ``phi``, marginal spread ``sigma``."""
    e = rng.normal(0.0, sigma * np.sqrt(1.0 - phi**2), n)
    x = np.empty(n)
    x[0] = rng.normal(0.0, sigma)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + e[i]
    return x

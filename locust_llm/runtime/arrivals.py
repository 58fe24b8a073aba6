"""Open-loop arrival times: an absolute clock per step, so responses never change when requests are sent. Pure.

Both clocks answer ``arrival()`` with ``(number, t)``: the request's number when the clock decides it (a trace's
record), else None (the dispatcher numbers its arrivals), and the absolute time it is due; None when no arrival is
left in the step.
"""

from __future__ import annotations

import random

from ..workload.replay import TracePrompts

__all__ = ["ArrivalClock", "TraceClock"]


class ArrivalClock:
    """Absolute arrival times for one step: t0 + cumulative gaps, seeded per (seed, worker, step)."""

    def __init__(self, rate: float, t0: float, seed: tuple, kind: str, burstiness: float):
        self.rate, self.t_next, self.kind, self.burstiness = rate, t0, kind, burstiness
        self.rng = random.Random(repr(seed))

    def gap(self) -> float:
        if self.kind == "constant":
            return 1.0 / self.rate
        if self.kind == "gamma":
            # Shape k = burstiness, mean 1/rate: k < 1 is burstier than Poisson, k > 1 smoother.
            return self.rng.gammavariate(self.burstiness, 1.0 / (self.rate * self.burstiness))
        return self.rng.expovariate(self.rate)

    def next(self) -> float:
        self.t_next += self.gap()
        return self.t_next

    def arrival(self) -> tuple[None, float]:
        return None, self.next()


class TraceClock:
    """One process's share of a trace's records, at their own times: record i (counted in the replayed window) goes
    to process ``i mod processes``, due at ``t0 + t_i / speed``; records that do not fit the server are skipped
    (``TracePrompts.fits``), never sent."""

    def __init__(self, prompts: TracePrompts, t0: float, speed: float, process: int, processes: int):
        records = prompts.trace.records
        self.t0, self.speed = t0, speed
        self.times = [r.t_s for r in records]
        self.pending = iter([i for i in range(process, len(records), processes) if prompts.fits(i)])

    def arrival(self) -> tuple[int, float] | None:
        index = next(self.pending, None)
        return None if index is None else (index, self.t0 + self.times[index] / self.speed)

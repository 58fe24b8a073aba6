"""Open-loop arrival times: an absolute clock per step, so responses never change when requests are sent. Pure."""

from __future__ import annotations

import random

__all__ = ["ArrivalClock"]


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

"""The load generator watching itself: CPU and event-loop lag of this process, sampled once a second.

A client that cannot keep up makes the server look slow; these samples let the analysis mark such
steps invalid instead of publishing their numbers as the server's.
"""

from __future__ import annotations

import time

import gevent
import psutil

from ..records import now

__all__ = ["ClientMonitor"]

PROBE_SLEEP_S = 0.1


class ClientMonitor:
    def __init__(self, worker: int):
        self.worker = worker
        self.samples: list[dict] = []
        self.process = psutil.Process()
        self.process.cpu_percent()  # the first call only primes the counter
        self._lag_ms: list[float] = []
        self._greenlets: list[gevent.Greenlet] = []

    def start(self) -> None:
        if not self._greenlets:
            self._greenlets = [gevent.spawn(self._probe_loop), gevent.spawn(self._sample_loop)]

    def _probe_loop(self) -> None:
        # How late a short sleep wakes up is how late every stream's timestamps are.
        while True:
            start = time.perf_counter()
            gevent.sleep(PROBE_SLEEP_S)
            self._lag_ms.append(max(time.perf_counter() - start - PROBE_SLEEP_S, 0.0) * 1000.0)

    def _sample_loop(self) -> None:
        while True:
            gevent.sleep(1.0)
            lags, self._lag_ms = self._lag_ms, []
            self.samples.append(
                {
                    "t": now(),
                    "worker": self.worker,
                    "cpu_percent": self.process.cpu_percent(),
                    "loop_lag_ms_max": max(lags, default=0.0),
                    "loop_lag_ms_mean": sum(lags) / len(lags) if lags else 0.0,
                }
            )

    def drain(self) -> list[dict]:
        samples, self.samples = self.samples, []
        return samples

    def stop(self) -> None:
        gevent.killall(self._greenlets)
        self._greenlets = []

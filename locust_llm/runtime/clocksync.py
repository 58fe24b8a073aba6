"""Each worker's clock against the master's, measured NTP-style over Locust's own messages.

Every process stamps with its own clock (``records.now``). Latencies are safe (one process stamps both ends),
but step windows are the master's, and a worker whose clock is off mislabels the requests at each window edge.
So the master sends each worker a ping with its time ``t0``; the worker answers with its times of receipt
``t1`` and reply ``t2``; the master receives at ``t3``:

    offset = ((t1 - t0) + (t2 - t3)) / 2      (worker clock minus master clock)
    round trip = (t3 - t0) - (t2 - t1)

The offset is exact when both legs take equally long; otherwise it is off by at most half the round trip, the
uncertainty recorded with it. The run directory's loader maps worker stamps onto the master's clock
(``rundir.clocks``); the workers learn their offset with each step message, so open-loop arrival clocks start together.
"""

from __future__ import annotations

import logging

import gevent
from locust.runners import MasterRunner

from ..records import now
from ..rundir import RunDir, layout, write_json
from ..rundir.clocks import UNCERTAINTY_MAX_S, ClockSample, estimate, track
from ..rundir.env import ClocksEnv
from ..rundir.events import ClockUncertain

log = logging.getLogger(__name__)

__all__ = ["CLOCK_PING", "CLOCK_PONG", "ClockSync", "answer_ping", "write_clocks"]

CLOCK_PING = "llm_clock_ping"
CLOCK_PONG = "llm_clock_pong"
INTERVAL_S = 5.0
BURST = 3  # pings per round: the one with the shortest round trip says most
LIVE_WINDOW_S = 60.0


def answer_ping(environment, msg, **_kw) -> None:
    """Worker side: stamp receipt and reply at once (nothing else may run between the two stamps)."""
    t1 = now()
    runner = environment.runner
    data = {**msg.data, "t1": t1, "worker": max(getattr(runner, "worker_index", 0), 0)}
    data["t2"] = now()
    runner.send_message(CLOCK_PONG, data)


class ClockSync:
    """Master side: pings every worker at connect and every ``INTERVAL_S``; keeps every sample."""

    def __init__(self, runner: MasterRunner):
        self.runner = runner
        self.samples: list[ClockSample] = []
        self._next_id = 0
        self._offsets: dict[str, float] = {}
        self._offsets_at = 0
        self._loop = gevent.spawn(self._ping_forever)

    def on_pong(self, environment, msg, **_kw) -> None:
        t3 = now()
        data = msg.data
        self.samples.append(
            ClockSample(worker=int(data["worker"]), t=t3, t0=data["t0"], t1=data["t1"], t2=data["t2"], t3=t3)
        )

    def ping(self) -> None:
        for client in list(self.runner.clients.values()):
            for _ in range(BURST):
                self._next_id += 1
                self.runner.send_message(CLOCK_PING, {"id": self._next_id, "t0": now()}, client_id=client.id)
                gevent.sleep(0.01)  # one at a time on the wire: a queued ping would read as a long round trip

    def _ping_forever(self) -> None:
        while True:
            try:
                self.ping()
            except Exception:  # noqa: BLE001  (a worker that just left; the next round tries again)
                log.debug("clock ping failed", exc_info=True)
            gevent.sleep(INTERVAL_S)

    def offsets(self) -> dict[str, float]:
        """The current estimate per worker index (as text: message keys), worker clock minus master clock, s:
        from the last ``LIVE_WINDOW_S`` of exchanges, recomputed when new ones arrived."""
        if self._offsets_at != len(self.samples):
            recent = [s for s in self.samples if s.t >= now() - LIVE_WINDOW_S]
            self._offsets = {str(w): est["offset_s"] for w, est in estimate(recent).items()}
            self._offsets_at = len(self.samples)
        return self._offsets

    def stop(self) -> None:
        self._loop.kill()


def write_clocks(run: RunDir, samples: list[ClockSample], since: float) -> None:
    """``clocks.json`` (the exchanges the analysis aligns by), the estimates in env.json, and a run event for a
    worker whose offset is less certain than ``UNCERTAINTY_MAX_S`` (its requests near window edges may be
    mislabelled). Exchanges from shortly before the run count: the clocks were the same."""
    recent = [s for s in samples if s.t >= since - 2 * INTERVAL_S]
    if not recent:
        return
    estimates = estimate(recent)
    kept = [s for worker in estimates for s in track([r for r in recent if r.worker == worker])]
    write_json(
        run.file(layout.CLOCKS),
        {"bound_s": UNCERTAINTY_MAX_S, "workers": estimates, "samples": [s.to_dict() for s in kept]},
    )
    run.env.clocks = ClocksEnv(bound_s=UNCERTAINTY_MAX_S, workers=estimates)
    run.write_env()
    noted = {e.worker for e in run.events if isinstance(e, ClockUncertain)}
    for worker, est in estimates.items():
        if est["uncertainty_s"] > UNCERTAINTY_MAX_S and worker not in noted:
            run.note(
                ClockUncertain(
                    worker=worker,
                    offset_s=est["offset_s"],
                    uncertainty_s=est["uncertainty_s"],
                    bound_s=UNCERTAINTY_MAX_S,
                )
            )

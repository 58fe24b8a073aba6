"""The master's load processes over a run: one that stops heartbeating is lost, one that connects has joined.

Locust marks a worker missing after a few silent heartbeats and hands its users to the others; it tells no one
else. ``WorkerWatch.check()`` (every shape tick) turns that into what the run needs to say: which worker, when,
in which step, and how many records it had sent.
"""

from __future__ import annotations

from dataclasses import dataclass

from locust.runners import STATE_MISSING, MasterRunner

__all__ = ["WorkerChange", "WorkerWatch"]


@dataclass(frozen=True)
class WorkerChange:
    client_id: str
    index: int


class WorkerWatch:
    def __init__(self, runner) -> None:
        self.runner = runner if isinstance(runner, MasterRunner) else None
        self.known: dict[str, int] = {}
        if self.runner is not None:
            self.check()  # the workers already there when the run starts have not joined it

    def check(self, missing_only: bool = False) -> tuple[list[WorkerChange], list[WorkerChange]]:
        """Workers lost and workers joined since the last check. ``missing_only``: a worker counts as lost only if
        Locust marked it missing (at the end of a run, workers that quit have left on purpose)."""
        if self.runner is None:
            return [], []
        clients = list(self.runner.clients.values())
        present = {c.id for c in clients if c.state != STATE_MISSING}
        if missing_only:
            present |= set(self.known) - {c.id for c in clients}
        lost = [WorkerChange(cid, index) for cid, index in self.known.items() if cid not in present]
        joined = [WorkerChange(cid, self.runner.get_worker_index(cid)) for cid in present if cid not in self.known]
        for change in lost:
            del self.known[change.client_id]
        for change in joined:
            self.known[change.client_id] = change.index
        return lost, joined

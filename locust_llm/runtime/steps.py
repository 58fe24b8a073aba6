"""The ladder step every process is in: set by the master's shape, broadcast to workers."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import gevent.event

from ..records import Phase, now

__all__ = ["STEP_MESSAGE", "StepBoard", "StepState", "step_key"]

STEP_MESSAGE = "llm_step"


@dataclass(frozen=True)
class StepState:
    run_id: str = ""
    variant: str = ""
    step: int = -1
    level: float = math.nan
    phase: str = Phase.IDLE
    mode: str = "closed"
    base_url: str = ""
    model: str = ""
    workers: int = 1
    seed: int = 0
    nonce: int = 0  # the run's prompt nonce (``Prefixer``): every process builds its markers with it
    t_start: float = math.nan  # when the master started the step (open loop: every process's arrival clock)
    context: int = 0  # prompt length of a context-axis step (0: the ladder's own workload)
    # A scale-out step's servers: requests go to them round-robin (empty: every request goes to base_url).
    base_urls: tuple = ()
    # Worker index -> its clock minus the master's (``clocksync``): a worker turns the master's t_start into its own.
    clock_offsets: dict = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.phase in (Phase.WARMUP, Phase.STEADY) and bool(self.base_url)

    def to_dict(self) -> dict:
        return asdict(self)


def step_key(state: StepState) -> tuple:
    return state.run_id, state.variant, state.step


class StepBoard:
    """This process's view of the current step; ``changed`` wakes waiting dispatchers."""

    def __init__(self) -> None:
        self.state = StepState()
        self.changed = gevent.event.Event()
        self.started_at = 0.0  # records.now() when this process received the step

    def update(self, state: StepState, received_at: float) -> None:
        if state == self.state:
            return  # the shape repeats its state every tick for late joiners; nothing changed
        new_step = (state.run_id, state.variant, state.step) != (self.state.run_id, self.state.variant, self.state.step)
        self.state = state
        if new_step:
            self.started_at = received_at
        # Waiters hold the old event; setting it for good wakes every one of them exactly once.
        woken, self.changed = self.changed, gevent.event.Event()
        woken.set()

    def wait_until(self, key: tuple, t: float) -> bool:
        """Sleep until ``t`` (``records.now()`` seconds) unless step ``key`` ends first; True when it still runs."""
        while (delay := t - now()) > 0:
            changed = self.changed  # each update replaces the event: wait on the current one
            if changed.wait(timeout=delay) and step_key(self.state) != key:
                return False
        return step_key(self.state) == key and self.state.active

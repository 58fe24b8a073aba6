"""One row of ``steps.json``'s ``steps``, typed: what the runtime writes for each step and the analysis reads.

The runtime builds the rows (``runtime.experiment.measure``, ``runtime.soak.window``; the scale-out sets its
fields through ``measure``, ``runtime.probes`` its injected faults, ``watch_workers`` the load processes it lost)
and ``RunDir`` writes them (``StepRow.written``); ``rundir.load`` reads them back and the analysis reads their
attributes. The schema is published as ``docs/steps.schema.json`` (``locust-llm schema steps``); the tests hold
the files of the previous release to it. Fields that came later are optional, so an older run directory fits.
Times are seconds on the master's clock (epoch); NaN where the step has not reached that point.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import PrivateAttr

from .base import RunFileModel

__all__ = ["InjectedFault", "StepRow", "steps_schema"]


class InjectedFault(RunFileModel):
    """A fault injected into the server during the step (``probes.faults``)."""

    kind: Literal["pause", "restart"]
    """``pause``: the server's process group stopped (SIGSTOP) and continued; ``restart``: stopped and started."""
    t_start: float
    """When the fault began (s, master clock)."""
    t_end: float
    """When the server was running again (s, master clock)."""
    pause_s: float | None = None
    """A pause's planned length (s); absent for a restart."""


class StepRow(RunFileModel):
    """One step: a variant held at one level for a warm-up and a steady window (a soak window, a scale-out step)."""

    variant: str
    """The variant (server configuration) measured."""
    step: int
    """Step number; the same number in every variant is the same block of the plan (a soak window's index)."""
    window: int | None = None
    """A soak window's index (the same as ``step``); absent outside a soak."""
    level: int | float
    """The load held: concurrent streams (closed loop) or requests/s (open loop); all servers together. An integer
    or not as the plan gave it (kept as written)."""
    mode: Literal["closed", "open"]
    """Closed loop (a fixed number of streams) or open loop (requests sent at planned times)."""
    users: int | None = None
    """Locust users that ran the step (closed loop: the level)."""
    context: int | None = None
    """Prompt tokens of a context-axis step; null or absent: the ladder's own workload."""
    t_start: float
    """When the step began (its warm-up)."""
    t_steady: float
    """When its steady window began; NaN when it never did (the run stopped during the warm-up, or is warming up)."""
    t_end: float
    """When it ended; NaN while it runs, or when the run was killed before it ended."""
    servers: int | None = None
    """A scale-out step: how many servers took its requests, round-robin; absent otherwise."""
    server_level: float | None = None
    """A scale-out step: the level per server (``level / servers``)."""
    pair: int | None = None
    """A scale-out step: which one-server/N-server pair of steps it belongs to."""
    faults: list[InjectedFault] | None = None
    """Faults injected into the server during the step; absent when none was."""
    workers_lost: list[int] | None = None
    """Load processes (worker indices) lost during the step: the level was not held; absent when none was."""
    extended_s: float | None = None
    """Seconds the steady window was extended (still drifting, too few requests); absent when the run stopped
    before the steady window ended."""

    # Set by the loader, never in the file: the run left the step open and the loader ended it at the last record.
    _closed_at_last_record: bool = PrivateAttr(default=False)
    # Fields first set after the row was made, in the order they were set (a worker lost during an extension comes
    # after ``extended_s``): the file keeps the order in which the step went, as it did when rows were dicts.
    _set_later: list[str] = PrivateAttr(default_factory=list)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in StepRow.model_fields and name not in self.model_fields_set:
            self._set_later.append(name)
        super().__setattr__(name, value)

    def written(self) -> dict[str, Any]:
        """The row as ``steps.json`` holds it: the fields it was made with, then those set later, in that order."""
        data = self.model_dump(exclude_unset=True)
        order = [name for name in data if name not in self._set_later] + self._set_later
        return {name: data[name] for name in order}

    @property
    def closed_at_last_record(self) -> bool:
        return self._closed_at_last_record

    def close_at(self, t_end: float) -> None:
        """End a step the run left open (``rundir.load.close_open_steps``)."""
        self.t_end = t_end
        self._closed_at_last_record = True


def steps_schema() -> dict:
    """The JSON Schema of one row of ``steps.json``'s ``steps`` (written to ``docs/steps.schema.json``)."""
    return StepRow.model_json_schema()

"""What a program of the master may do: the interface the ladder, the interleaved blocks, the soak, the scale-out
and the probes and faults are written against.

A program is a generator the load shape advances once per tick (``Tick``: Locust's users, spawn rate, user
classes). It measures steps, holds and drains them, tells the workers the phase, and brings servers up and down,
through ``Conductor`` only; ``runtime.experiment.Experiment`` implements it. Two narrower views come with it: the run
directory as the programs write it (``RunFiles``) and the variants' servers (``ServerControl``). Typed, so that
mypy holds every program to these operations and nothing else of the experiment.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from ..analysis.cycles import Batches
from ..rundir.env import RunEnv
from ..rundir.events import Event
from ..rundir.steps import StepRow
from ..servers import ServerProcess
from .plan import Block, Plan
from .session import ActiveServer
from .steps import StepState

__all__ = ["Conductor", "Probing", "RunFiles", "ServerControl", "Tick"]

Tick = tuple[int, float, list[type]]  # what a load shape's tick returns: users, spawn rate, user classes


class RunFiles(Protocol):
    """The run directory as the programs write it (``rundir.RunDir``)."""

    env: RunEnv
    steps: list[StepRow]

    def write_env(self) -> None: ...

    def write_steps(self) -> None: ...

    def note(self, event: Event) -> None: ...

    def file(self, name: str) -> Path: ...


class ServerControl(Protocol):
    """The variants' servers: started, made the active one, primed, stopped (``runtime.session.ServerSession``)."""

    @property
    def server(self) -> ActiveServer | None: ...

    @property
    def servers(self) -> dict[str, ActiveServer]: ...

    @property
    def replicas(self) -> list[ServerProcess]: ...

    def start(self, variant: str, port: int | None = None) -> ActiveServer: ...

    def activate(self, variant: str) -> ActiveServer: ...

    def alive(self) -> bool: ...

    def prime(self, base_urls: list[str]) -> None: ...

    def stop(self, variant: str | None = None) -> None: ...

    def start_replicas(self, variant: str, servers: int, urls: list[str]) -> list[str]: ...

    def replicas_alive(self) -> bool: ...

    def stop_replicas(self) -> None: ...


class Probing(Protocol):
    """The probe suite after a variant's ladder (``runtime.probes.Faults``)."""

    def probe(self, variant: str) -> Iterator[Tick]: ...

    def probe_all(self) -> Iterator[Tick]: ...


class Conductor(Protocol):
    """The operations of the master's programs (``runtime.experiment.Experiment``)."""

    interrupted: bool  # a program that cannot go on sets it: the run ends and writes its report

    @property
    def plan(self) -> Plan: ...

    @property
    def run(self) -> RunFiles: ...

    @property
    def session(self) -> ServerControl: ...

    @property
    def faults(self) -> Probing: ...

    @property
    def state(self) -> StepState:
        """The step and phase the workers were told last."""
        ...

    @property
    def finished(self) -> bool: ...

    @property
    def too_long(self) -> set[int]:
        """Context lengths a server cannot hold: never measured."""
        ...

    def blocks(self) -> list[Block]:
        """Every block of a variant's run, in step order."""
        ...

    def bring_up(self, variant: str, check: bool = True) -> bool:
        """Start the variant's server (and ask it the consistency prompts); False when it would not start."""
        ...

    def users_for(self, level: float) -> int: ...

    def tick(self, users: int) -> Tick:
        """The tick that holds ``users`` users."""
        ...

    def idle_tick(self) -> Tick:
        """The tick of no users."""
        ...

    def measure(self, variant: str, block: Block, urls: list[str] | None = None) -> Iterator[Tick]:
        """One step: warm-up, steady window, extensions; its ``steps.json`` row."""
        ...

    def hold(self, until: float, tick: Tick) -> Iterator[Tick]:
        """The load as it is until ``until`` (or the server dies, or the run is interrupted)."""
        ...

    def drain(self) -> Iterator[Tick]:
        """Zero users, until every stream in flight has ended and its record arrived."""
        ...

    def broadcast(
        self,
        variant: str,
        step: int,
        level: float,
        phase: str,
        t_start: float = math.nan,
        context: int = 0,
        base_urls: tuple[str, ...] = (),
    ) -> None:
        """Tell the workers the step and its phase."""
        ...

    def send_state(self) -> None:
        """The current step again (a worker that joined late learns it)."""
        ...

    def warn(self, kind: str, text: str, key: object = None) -> None:
        """A warning for the web UI as it happens."""
        ...

    @property
    def throughput(self) -> dict[tuple[str, int], Batches]:
        """(variant, step) -> the step's throughput batches when its window closed (live figures)."""
        ...

    def checkpoint(self) -> None:
        """Everything a report needs on disk now: step rows, host and client samples, telemetry parts."""
        ...

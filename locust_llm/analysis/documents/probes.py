"""The documents of the probes experiment: each probe's figures, the steps around an injected fault."""

from __future__ import annotations

from ...rundir.probes import ProbeResult
from .base import Doc

__all__ = ["FaultFigures", "ProbeRow", "ProbeSummary", "StepLatency"]


class StepLatency(Doc):
    step: int
    """Step number."""
    level: float
    """Load level."""
    status: str
    """The step's status."""
    requests: int = 0
    """Requests sent in its steady window."""
    errors: int = 0
    """Of which failed."""
    ttft_p99_ms: float | None = None
    """P99 TTFT over every request, failures at the time they failed (open loop: from the intended send time)."""
    e2e_p99_ms: float | None = None
    """P99 E2E over every request, the same way."""


class FaultFigures(Doc):
    """What the requests around one fault saw."""

    step: StepLatency | None = None
    """The step the fault was injected in (null: not found among the summary's steps)."""
    in_flight: int = 0
    """Requests of the variant in flight during the fault (sent before it ended, done after it began), and those
    refused while it lasted."""
    in_flight_failed: int = 0
    """Of which failed."""
    in_flight_e2e_max_ms: float | None = None
    """The longest of them, send to done."""
    in_flight_ttft_max_ms: float | None = None
    """Their longest time to first token (null: none got one)."""
    neighbours: list[StepLatency] = []
    """The variant's steps just before and after it."""


class ProbeRow(ProbeResult):
    figures: FaultFigures | None = None
    """A fault's surroundings (null for a probe)."""


class ProbeSummary(Doc):
    """The probe suite and the faults: one row each, in the order they ran."""

    rows: list[ProbeRow] = []
    """Every probe and fault, per variant."""
    counts: dict[str, int] = {}
    """Rows per verdict."""
    failed: list[str] = []
    """Variants whose server crashed or stopped answering during a probe or fault (the run fails: exit 6)."""
    text: str = ""
    """One sentence."""

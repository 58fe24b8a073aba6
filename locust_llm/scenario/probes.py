"""Abnormal inputs and faults: the scenario's ``probes:`` section and one probe's record (a row of
``probes.json``). Pure: no I/O; the runtime sends the probes (``client.probes``, ``runtime.probes``), the analysis
presents them (``analysis.probes``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .base import Strict

__all__ = ["FAULTS", "MAX_BURST", "ProbeResult", "ProbesSpec", "VERDICTS"]

FAULTS = ("pause", "restart")
MAX_BURST = 1024
# ok: answered as expected and kept answering; unexpected: answered, but not as expected; server-failed: crashed or
# stopped answering within ``recover_s``; not-run: the probe could not be made (no context size, not launched, ...).
VERDICTS = ("ok", "unexpected", "server-failed", "not-run")


class ProbesSpec(Strict):
    """``probes:``: the probe suite after each variant's ladder, and faults injected while the ladder holds a level."""

    enabled: bool = False  # the probe suite (``--probes`` turns it on)
    faults: list[Literal["pause", "restart"]] = []  # one per step at ``fault_level``, in this order
    pause_s: float = Field(default=5.0, gt=0, le=3600)  # SIGSTOP .. SIGCONT
    fault_level: float | None = Field(default=None, gt=0)  # default: the highest ladder level
    burst: int | None = Field(default=None, ge=1, le=MAX_BURST)  # default: 2 x the highest ladder level
    recover_s: float = Field(default=30.0, gt=0, le=3600)  # a server silent for longer after a probe has failed
    timeout_s: float = Field(default=120.0, gt=0, le=3600)  # one probe request, in all

    @field_validator("faults")
    @classmethod
    def _distinct(cls, faults: list[str]) -> list[str]:
        if len(set(faults)) != len(faults):
            raise ValueError("each fault at most once: pause, restart")
        return faults


class ProbeResult(BaseModel):
    """One probe (or fault) against one variant's server: what was sent, what came back, and whether the server
    kept answering."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    variant: str
    """The variant whose server was probed."""
    probe: str
    """Probe name (``empty_prompt``, ``prompt_over_context``, ..., ``pause``, ``restart``)."""
    kind: Literal["probe", "fault"] = "probe"
    """``probe``: a request after the ladder; ``fault``: injected while the ladder held a level."""
    sent: str
    """What was sent, summarised (no prompt text, no secret)."""
    expected: str
    """The behaviour that counts as ok."""
    status: int | None = None
    """HTTP status of the answer (null: none came)."""
    answer: str | None = None
    """The answer, summarised (tokens, finish reason, statuses of a burst)."""
    error: str | None = None
    """The server's error message or the client's error, cut (server text: escape before display)."""
    latency_ms: float | None = None
    """From sending to the end of the answer."""
    recovered: bool | None = None
    """The server answered a one-token completion again within ``recover_s`` and a launched one still ran
    (null: not checked, the probe was not run)."""
    recover_ms: float | None = None
    """From the end of the probe (SIGCONT, the restart's stop) until that completion answered."""
    verdict: Literal["ok", "unexpected", "server-failed", "not-run"]
    """ok, unexpected (answered but not as expected), server-failed (crashed or stopped answering), not-run."""
    note: str | None = None
    """Why the verdict is not ok, or what else was seen."""
    t_start: float | None = None
    """Run clock (epoch seconds) when the probe began."""
    t_end: float | None = None
    """Run clock when the probe's answer (or the fault) ended."""
    step: int | None = None
    """Fault: the ladder step it was injected in."""
    level: float | None = None
    """Fault: that step's level."""

"""Abnormal inputs and faults: the scenario's ``probes:`` section. Pure: no I/O; the runtime sends the probes
(``client.probes``, ``runtime.probes``) and records each in ``probes.json`` (``rundir.probes``), the analysis presents
them (``analysis.probes``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from .base import Strict

__all__ = ["FAULTS", "MAX_BURST", "ProbesSpec"]

FAULTS = ("pause", "restart")
MAX_BURST = 1024


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

"""``probes.json``, typed: one ``ProbeResult`` per probe sent after a variant's ladder or fault injected while it
held a level.

The client builds a probe's result (``client.probes``), the runtime a fault's and rewrites the file after each
(``runtime.probes``); ``rundir.load`` reads it back and the analysis presents it (``analysis.probes``). The schema is
published as ``docs/probes.schema.json`` (``locust-llm schema probes``).
"""

from __future__ import annotations

from typing import Literal

from .base import RunFileModel

__all__ = ["VERDICTS", "ProbeResult", "ProbesFile", "probes_schema"]

# ok: answered as expected and kept answering; unexpected: answered, but not as expected; server-failed: crashed or
# stopped answering within ``recover_s``; not-run: the probe could not be made (no context size, not launched, ...).
VERDICTS = ("ok", "unexpected", "server-failed", "not-run")


class ProbeResult(RunFileModel):
    """One probe (or fault) against one variant's server: what was sent, what came back, and whether the server
    kept answering."""

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


class ProbesFile(RunFileModel):
    """``probes.json``: every probe and fault of the run, in the order they ended."""

    probes: list[ProbeResult] = []
    """One row per probe or fault."""


def probes_schema() -> dict:
    """The JSON Schema of ``probes.json`` (written to ``docs/probes.schema.json``)."""
    return ProbesFile.model_json_schema()

"""``telemetry.json``, typed: how the server's telemetry was polled (each server attached, its sources and how
often they answered), its gaps and its notes.

The telemetry poller (``telemetry.poller``) builds a ``TelemetryMeta`` and writes it (``written``: the fields it
was given, in the model's order, which is the order of the dicts of before); ``rundir.load`` reads it back
(``read_typed``: an absent file is an empty ``TelemetryMeta``; one that does not fit names the file and the
field) and the analysis reads its attributes. Fields the runtime always writes are optional here, so a run directory
made by hand or by an older release (only ``gaps`` and ``notes``) still loads. The schema is published as
``docs/telemetry.schema.json`` (``locust-llm schema telemetry``).
"""

from __future__ import annotations

from .base import RunFileModel

__all__ = ["SourceRecord", "TelemetryAttachment", "TelemetryGap", "TelemetryMeta", "TelemetryNote", "telemetry_schema"]


class SourceRecord(RunFileModel):
    """One source polled for a server, and how often it answered."""

    source: str
    """``scrape``, ``prometheus``, ``dcgm``, ``nvml`` or ``process``."""
    url: str | None = None
    """What was scraped or queried (scrape, dcgm, prometheus)."""
    map: str | None = None
    """The metric map that named its metrics (scrape, dcgm)."""
    queries: list[str] | None = None
    """The instant queries sent (prometheus)."""
    pid: int | None = None
    """The server process read (process)."""
    devices: int | None = None
    """GPUs read (nvml)."""
    polls: int
    """Polls made."""
    failures: int
    """Polls that failed."""
    samples: int | None = None
    """Rows its answers recorded (runs before this field: unknown). A source that answered without one sample
    found nothing it reads."""


class TelemetryAttachment(RunFileModel):
    """One server polled, from its attach to its detach."""

    variant: str
    """The variant whose server it was."""
    engine: str
    """The engine whose metric names were mapped (``external``: not launched by locust-llm)."""
    base_url: str | None = None
    """The server's base URL (always written; optional for a file made by hand: the analysis does not read it)."""
    server_pid: int | None = None
    """Its process id; null when locust-llm did not launch it."""
    prometheus_url: str | None = None
    """The Prometheus queried for it; null: none."""
    t_attach: float | None = None
    """When polling began (s, run clock; always written, as ``base_url``)."""
    t_detach: float | None = None
    """When it ended; null while it runs."""
    sources: list[SourceRecord] = []
    """The sources polled."""
    errors: list[str] = []
    """Sources that could not be set up, and why."""


class TelemetryGap(RunFileModel):
    """A source that stopped answering: from its last good sample to its next one (or the detach)."""

    variant: str
    """The variant whose server it was."""
    source: str
    """The source that failed."""
    start: float
    """The last good sample before the gap (s, run clock; the attach when there was none)."""
    first_failure: float | None = None
    """The first failed poll (s, run clock)."""
    end: float | None = None
    """The next good sample, or the detach (s, run clock); null while the gap lasts."""
    failures: int = 0
    """Failed polls in the gap."""
    error: str
    """The first error."""
    recovered: bool | None = None
    """Whether the source answered again; null while the gap lasts."""
    last_error: str | None = None
    """The latest error."""


class TelemetryNote(RunFileModel):
    """Something about the telemetry said once (no GPU: the process's CPU and memory instead)."""

    kind: str
    """What it is about (``no_gpu``)."""
    t: float
    """When (s, run clock)."""
    message: str
    """In words."""


class TelemetryMeta(RunFileModel):
    """``telemetry.json``."""

    interval_s: float | None = None
    """The poll interval (s)."""
    timeout_s: float | None = None
    """One poll's timeout (s)."""
    gpu: str | None = None
    """The GPUs found, or why there is no GPU telemetry."""
    gpu_available: bool | None = None
    """Whether NVML found a GPU."""
    attachments: list[TelemetryAttachment] = []
    """Every server polled, in order."""
    gaps: list[TelemetryGap] = []
    """Every gap of every source."""
    notes: list[TelemetryNote] = []
    """Notes on the telemetry."""
    rows_written: int | None = None
    """Telemetry rows written."""
    rows_lost: int | None = None
    """Rows that could not be written."""


def telemetry_schema() -> dict:
    """The JSON Schema of ``telemetry.json`` (written to ``docs/telemetry.schema.json``)."""
    return TelemetryMeta.model_json_schema()

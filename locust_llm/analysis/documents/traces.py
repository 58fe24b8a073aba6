"""The document of a replayed trace's step: its arrivals and lengths against the trace's."""

from __future__ import annotations

from .base import Doc

__all__ = ["TraceStep"]


class TraceStep(Doc):
    """One step's replay of the trace window."""

    speed: float
    """Playback speed: the trace's times divided by it."""
    records: int
    """Records in the trace window."""
    over_context: int
    """Records whose prompt and output do not fit the server's context: skipped, never sent."""
    replayed: int
    """Records sent."""
    dropped: int
    """Records dropped at the in-flight cap (failures, counted in the step's errors when in its steady window)."""
    not_sent: int
    """Records neither sent, dropped nor skipped: the step ended (or was stopped) before they were due."""
    arrival_error_p50_ms: float | None = None
    """P50 of send time minus the trace's intended time (the step start plus the record's time / speed), ms."""
    arrival_error_p99_ms: float | None = None
    """P99 of the same, ms."""
    arrival_error_max_ms: float | None = None
    """Largest, ms."""
    text: str
    """The replay in words."""

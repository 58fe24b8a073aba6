"""The server's side of ``summary.json``: figures from the server's own metrics, typed (see ``documents``)."""

from __future__ import annotations

from .base import Doc, Interval

__all__ = [
    "AcceptancePoint",
    "CacheFigure",
    "Gap",
    "MemoryTrend",
    "ServerAcceptance",
    "ServerStep",
    "Stat",
    "TelemetryState",
]


class Stat(Doc):
    """Mean, max and min of a gauge's samples inside a window."""

    mean: float | None = None
    """Mean of the samples."""
    max: float | None = None
    """Largest sample."""
    min: float | None = None
    """Smallest sample."""
    n: int = 0
    """Number of samples."""


class MissingFigure(Doc):
    figure: str | None = None
    """Which figure."""
    reason: str | None = None
    """Why it is missing."""


class PartialFigure(Doc):
    metric: str
    """Canonical metric name."""
    coverage: float
    """Fraction of the window not inside a telemetry gap."""


class Gap(Doc):
    source: str | None = None
    """Telemetry source that failed."""
    start: float | None = None
    """Last good sample before the gap (run clock)."""
    end: float | None = None
    """First good sample after it, or the detach time."""
    recovered: bool | None = None
    """Whether the source answered again."""
    error: str | None = None
    """The first error seen."""


class ServerAcceptance(Doc):
    """Acceptance from the server's own metrics over the steady window."""

    source: str = "server"
    """Always ``server``."""
    method: str = ""
    """``counter deltas`` or ``interval gauges (mean over the window)`` (SGLang)."""
    accepted_tokens: float | None = None
    """Δ accepted draft tokens."""
    draft_tokens: float | None = None
    """Δ draft tokens."""
    drafts: float | None = None
    """Δ drafts (verification steps with draft tokens)."""
    rate: float | None = None
    """Δaccepted / Δdraft_tokens."""
    mean_length: float | None = None
    """1 + Δaccepted / Δdrafts."""
    per_position: list[float] | None = None
    """Δaccepted at position i / Δdrafts."""
    positions: list[str] | None = None
    """The position labels of ``per_position``."""
    mean_draft_length: float | None = None
    """Δdraft_tokens / Δdrafts."""
    t_from: float | None = None
    """Time of the sample used at the window start."""
    t_to: float | None = None
    """Time of the sample used at the window end."""
    note: str | None = None
    """How to read gauge-based figures."""
    mean_length_gauge: Stat | None = None
    """SGLang: mean of the accept-length gauge in the window."""
    accept_rate_gauge: Stat | None = None
    """SGLang: mean of the accept-rate gauge in the window."""
    mean_length_counters: float | None = None
    """SGLang: Δgeneration_tokens / Δspec_verify_calls."""
    mean_length_counters_note: str | None = None
    """How ``mean_length_counters`` is computed."""


class CacheFigure(Doc):
    """The share of a window's prompt tokens served from the server's prompt cache, from one source."""

    cached_fraction: float
    """Cached prompt tokens / prompt tokens."""
    cached_tokens: float
    """Cached prompt tokens."""
    prompt_tokens: float
    """Prompt tokens, cached ones included."""
    source: str
    """How it is computed (the fields or counters read)."""
    requests_reporting: int | None = None
    """Per-request figure: the requests it sums."""
    span: list[float] | None = None
    """Server counters: the times of the samples used at the window's edges (each within a poll interval or two of
    its edge), so the figure covers this span, not exactly the window."""


class ServerLatency(Doc):
    mean: float
    """Δsum / Δcount of the server's histogram, ms."""
    n: int
    """Δcount."""
    note: str | None = None
    """How the engine defines it."""


class GpuFigures(Doc):
    source: str
    """Telemetry source (nvml, dcgm, scrape, prometheus)."""
    devices: int = 0
    """GPUs seen."""
    util: Stat | None = None
    """Utilisation, ratio 0-1."""
    mem_used_mib: Stat | None = None
    """Memory used, MiB (summed over GPUs)."""
    mem_peak_mib: float | None = None
    """Peak memory used, MiB."""
    power_w: Stat | None = None
    """Power, W (summed)."""
    sm_clock_mhz: Stat | None = None
    """SM clock, MHz."""
    temp_c: Stat | None = None
    """Temperature, degrees C (hottest GPU)."""
    mem_copy_util: Stat | None = None
    """Memory copy utilisation, ratio."""
    gr_engine_active: Stat | None = None
    """DCGM graphics engine active, ratio."""
    sm_active: Stat | None = None
    """DCGM SM active, ratio."""
    tensor_active: Stat | None = None
    """DCGM tensor pipe active, ratio."""
    dram_active: Stat | None = None
    """DCGM DRAM active, ratio."""


class ProcessFigures(Doc):
    source: str = "process"
    """Always ``process``."""
    cpu_cores: Stat | None = None
    """CPU time of the server process tree per wall second."""
    rss_mib: Stat | None = None
    """Resident memory of the server process tree, MiB."""


class ServerStep(Doc):
    """The server's view of one step's steady window (``analysis.server_metrics``)."""

    step: int | None = None
    """Step index."""
    level: float | None = None
    """Load level."""
    window: list[float | None] = []
    """The steady window ``[t_steady, t_end]``."""
    source: str = "server"
    """Always ``server``."""
    sources: list[str] = []
    """Telemetry sources that supplied figures."""
    acceptance: ServerAcceptance | None = None
    """Draft acceptance."""
    requests_running: Stat | None = None
    """Requests running on the server."""
    requests_waiting: Stat | None = None
    """Requests queued on the server."""
    kv_cache_usage: Stat | None = None
    """KV-cache use, ratio."""
    busy_slots_per_decode: Stat | None = None
    """llama.cpp: busy slots per decode call."""
    preemptions: float | None = None
    """Δ preemptions."""
    generation_tokens: float | None = None
    """Δ generated tokens (the server's counter)."""
    prompt_cache: CacheFigure | None = None
    """The prompt cache's share of the window's prompt tokens, from the server's counters."""
    server_latency: dict[str, ServerLatency] = {}
    """The server's own latency histograms (ttft_ms, itl_ms, tpot_ms, e2e_ms, queue_ms, prefill_ms, decode_ms)."""
    gpu: GpuFigures | None = None
    """GPU figures."""
    process: ProcessFigures | None = None
    """Server process figures (the hardware figure without a GPU)."""
    gaps: list[Gap] = []
    """Telemetry gaps overlapping the window."""
    missing: list[MissingFigure] = []
    """Figures that could not be computed, with the reason."""
    partial: list[PartialFigure] = []
    """Figures computed over a window a gap overlaps."""


class AcceptancePoint(Doc):
    step: int | None = None
    """Step index."""
    level: float | None = None
    """Load level."""
    rate: float | None = None
    """Server acceptance rate."""
    mean_length: float | None = None
    """Server mean acceptance length."""
    requests_running: float | None = None
    """Mean requests running on the server."""


class MemoryTrend(Doc):
    metric: str
    """``gpu_mem_used_mib`` or ``process_rss_mib``."""
    unit: str
    """MiB/min."""
    source: str
    """Telemetry source."""
    slope: float | None = None
    """Growth, MiB/min."""
    ci95: Interval = None
    """t-based 95% interval of the slope."""
    growing: bool | None = None
    """True when the interval lies above 0."""
    start_mib: float
    """First sample."""
    end_mib: float
    """Last sample."""
    peak_mib: float
    """Largest sample."""
    n: int
    """Samples."""
    window_s: float
    """Time span."""


class TelemetryState(Doc):
    engine: str | None = None
    """Engine whose metric names were mapped."""
    sources: list[str] = []
    """Sources that answered."""
    gaps: list[Gap] = []
    """Gaps over the variant's whole run."""
    missing: str | None = None
    """Why there is no telemetry at all for the variant."""

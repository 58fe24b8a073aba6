"""The soak's part of ``summary.json`` (``soak``), typed like the rest (``documents``): per-window figures, trends
per hour with their 95% CIs, GPU clocks and temperature, and the soak's gate checks."""

from __future__ import annotations

from .base import Doc, Interval

__all__ = ["SoakCheck", "SoakGpu", "SoakSummary", "SoakTrend", "SoakWindow"]


class SoakWindow(Doc):
    """One window of the soak: a step of ``steps.json`` (its figures in full are in ``variants``)."""

    window: int
    """Window index, from 0."""
    step: int
    """The step it is in ``steps.json`` and ``variants``."""
    start_s: float | None = None
    """Start of the window's measurement, seconds after the first window's."""
    end_s: float | None = None
    """End of the window, seconds after the first window's start."""
    window_s: float | None = None
    """Length, s."""
    status: str = "clean"
    """The step's status (a contended or worker-lost window is left out of the trends)."""
    complete: bool = True
    """False when the run left the window open (still running, or killed): it ends at the last record, and
    requests still in flight then are missing, so it is shown but left out of the trends."""
    in_trend: bool = True
    """Whether the trends use this window (not contended, not worker-lost, complete, at least half as long as
    planned)."""
    requests: int = 0
    """Requests sent in the window, failed ones included."""
    errors: int = 0
    """Failed requests among them."""
    error_rate: float | None = None
    """errors / requests."""
    timeouts: int = 0
    """Failed requests whose class is a timeout (connect, first token, idle, total)."""
    timeout_rate: float | None = None
    """timeouts / requests."""
    ttft_p50_ms: float | None = None
    """TTFT P50 over all requests (open loop: from the intended send), as the SLO gates count it."""
    ttft_p99_ms: float | None = None
    """TTFT P99, the same way."""
    cached_fraction: float | None = None
    """Share of the window's prompt tokens the server took from its prompt cache (null: not measured)."""
    tpot_p50_ms: float | None = None
    """TPOT P50 over all requests."""
    tpot_p99_ms: float | None = None
    """TPOT P99 over all requests."""
    output_tps: float | None = None
    """Aggregate output tok/s: tokens arriving in the window / its length."""
    rss_mib: float | None = None
    """Server process tree's resident memory, mean over the window, MiB (null: not measured)."""
    gpu_mem_mib: float | None = None
    """GPU memory used, mean over the window, MiB (null: no GPU telemetry)."""
    kv_cache_usage: float | None = None
    """Server KV-cache use, mean over the window, ratio 0-1 (null: not exported)."""
    sm_clock_mhz: float | None = None
    """GPU SM clock, mean over the window, MHz."""
    sm_clock_min_mhz: float | None = None
    """Lowest SM clock sample in the window, MHz."""
    temp_max_c: float | None = None
    """Highest GPU temperature sample in the window, degrees C."""


class SoakTrend(Doc):
    """A linear trend of one figure over the soak's windows: OLS on the window values against time, with a
    t-based 95% CI (Student's t, n - 2 degrees of freedom)."""

    figure: str
    """The window field fitted (``ttft_p99_ms``, ``output_tps``, ``rss_mib``, ...)."""
    label: str
    """The figure in words."""
    unit: str
    """Its unit."""
    worse: str
    """``up`` when a rise is the bad direction (latency, memory), ``down`` when a fall is (throughput)."""
    n: int = 0
    """Windows fitted."""
    slope_per_hour: float | None = None
    """Change per hour, in the figure's unit."""
    ci95: Interval = None
    """95% CI of the slope per hour (null with fewer than 3 windows)."""
    reference: float | None = None
    """The figure's level at the first fitted window, from the fit (the base of the percentages)."""
    pct_per_hour: float | None = None
    """slope_per_hour / reference, percent per hour."""
    pct_ci95: Interval = None
    """The CI as percent of the reference per hour."""
    from_h: float | None = None
    """Midpoint of the first fitted window, hours after the first window's start."""
    to_h: float | None = None
    """Midpoint of the last fitted window, hours."""


class SoakGpu(Doc):
    """GPU clocks and temperature over the soak, where telemetry has them."""

    sm_clock_min_mhz: float | None = None
    """Lowest SM clock sample, MHz."""
    sm_clock_max_mhz: float | None = None
    """Highest SM clock sample, MHz."""
    temp_min_c: float | None = None
    """Lowest temperature sample (hottest GPU), degrees C."""
    temp_max_c: float | None = None
    """Highest temperature sample, degrees C."""
    clock_drop_pct: float | None = None
    """How far the slowest window's mean SM clock lies below the fastest window's, percent."""
    throttling: bool | None = None
    """True when that drop exceeds the threshold in ``note`` (null: no clock telemetry)."""
    note: str = ""
    """How throttling is judged."""


class SoakCheck(Doc):
    """One soak gate: holds, fails (exit 3), or could not be judged (said, and it holds)."""

    gate: str
    """``soak_drift`` (per figure), ``soak_error_rate`` or ``soak_memory_growth`` (per memory figure)."""
    figure: str
    """The figure judged."""
    value: float | None = None
    """Drift in percent per hour, the soak's error rate, or memory growth in MiB per hour."""
    ci95: Interval = None
    """The value's 95% CI (trends only)."""
    limit: float
    """The gate's limit."""
    judged: bool = True
    """False when too little was measured to judge (a trend needs 3 windows; memory needs telemetry)."""
    ok: bool
    """Whether the gate holds."""
    text: str
    """The check in words (a failed one is the verdict's reason)."""


class SoakSummary(Doc):
    """``summary.json`` ``soak``: one level of one variant held for a duration, in windows."""

    variant: str
    """The variant soaked."""
    level: float
    """Users (closed loop) or offered req/s (open loop)."""
    mode: str
    """``closed`` or ``open``."""
    duration_s: float
    """Planned duration of the measured windows, s."""
    window_s: float
    """Planned length of each window, s."""
    windows_planned: int
    """How many windows the duration was split into."""
    measured_s: float = 0.0
    """Sum of the windows measured, s."""
    complete: bool = False
    """Every planned window measured and closed by the run itself."""
    requests: int = 0
    """Requests in the windows the trends use, failed ones included."""
    errors: int = 0
    """Failed requests among them."""
    error_rate: float | None = None
    """errors / requests: what the soak's error gate judges."""
    timeouts: int = 0
    """Timeouts among the errors."""
    timeout_rate: float | None = None
    """timeouts / requests."""
    windows: list[SoakWindow] = []
    """Every window, in order."""
    trends: list[SoakTrend] = []
    """Per figure: slope per hour with its CI."""
    gpu: SoakGpu | None = None
    """GPU clocks and temperature (null: no GPU telemetry)."""
    checks: list[SoakCheck] = []
    """The soak's gates."""
    method: str = ""
    """How the trends and gates are computed, in words."""
    notes: list[str] = []
    """What could not be measured, and why."""

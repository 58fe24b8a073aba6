"""``summary.json`` and ``verdict.json``, typed (``compare.json`` is ``regression``).

Every field carries its meaning (the attribute docstring is the field's description in the exported JSON
Schema, ``docs/summary.schema.json``). The analysis builds plain dicts and validates them here, so a key that
is not declared is an error at once, not a silent drift between the writer and its readers. Unmeasured
figures are ``None`` (JSON ``null``), never zero.
"""

from __future__ import annotations

from typing import Any

from pydantic import field_serializer

from ...rundir.events import Event, RunEvent
from .base import Doc, Interval
from .conversations import ConversationSummary, StepConversations, TurnFigures
from .cost import CostSummary
from .detected import Detected
from .images import ImageOverhead
from .probes import ProbeSummary
from .prompt_cache import LevelCache, PromptCache
from .quality import Agreement, GreedyCheck, QualitySummary
from .scale_out import ScaleOutSummary
from .server import AcceptancePoint, MemoryTrend, ServerAcceptance, ServerStep, TelemetryState
from .soak import SoakSummary
from .speedup import ContextLevel, LevelBreakdown, Ratio, SweepSchedule
from .splits import CategoryComparison, PositionBin, PositionsSummary
from .traces import TraceStep

__all__ = ["Distribution", "StepFigures", "Summary", "Verdict", "summary_schema"]


class DistributionCI(Doc):
    p50: Interval = None
    """95% bootstrap interval of the P50."""
    p95: Interval = None
    """95% bootstrap interval of the P95."""
    p99: Interval = None
    """95% bootstrap interval of the P99."""
    mean: Interval = None
    """95% bootstrap interval of the mean."""


class Distribution(Doc):
    """Percentiles (numpy linear) and mean of the finite values, with bootstrap 95% intervals."""

    p50: float | None = None
    """50th percentile."""
    p95: float | None = None
    """95th percentile."""
    p99: float | None = None
    """99th percentile."""
    mean: float | None = None
    """Arithmetic mean."""
    n: int = 0
    """Number of values the figures rest on."""
    ci95: DistributionCI = DistributionCI()
    """Percentile-bootstrap 95% intervals of each figure (null with fewer than 2 values)."""


class Drift(Doc):
    """Least-squares drift of a metric over the steady window (``analysis.steady.drift``)."""

    slope: float | None = None
    """Slope in metric units per second."""
    ci95: Interval = None
    """t-based 95% interval of the slope."""
    relative_slope_per_min: float | None = None
    """Slope as a fraction of the mean per minute."""
    steady: bool | None = None
    """True when ``status`` is steady, False when unsteady, null when too noisy (or too few points)."""
    status: str | None = None
    """steady: ``drift_ci90`` inside +-10% (two one-sided tests at 5%); unsteady: otherwise, when ``drift_ci95``
    excludes 0; too noisy: neither (the window cannot tell); null: too few points."""
    n: int = 0
    """Number of points fitted."""
    window_s: float = 0.0
    """Time span of the points."""
    mean: float | None = None
    """Mean of the metric."""
    drift_fraction: float | None = None
    """Fitted change across the window relative to the mean."""
    drift_ci95: Interval = None
    """95% interval of the signed fitted change across the window relative to the mean."""
    drift_ci90: Interval = None
    """90% interval of the same: inside +-10% is the equivalence test's "steady"."""
    rho: float | None = None
    """Bias-corrected lag-1 autocorrelation of the fit's residuals; the slope's variance is inflated by
    (1 + rho) / (1 - rho) and its t quantile has n (1 - rho) / (1 + rho) - 2 degrees of freedom."""


class StepThroughput(Doc):
    """How a step's ``output_tps`` was estimated (``analysis.cycles``)."""

    method: str
    """cycles (closed loop: request cycles per user), time (send-time batches) or none."""
    batches: int = 0
    """Time batches the interval rests on (at least 5 for an interval)."""
    cycles: int = 0
    """Requests (request cycles) counted."""
    users: int = 0
    """Closed loop: users with a cycle in the window."""
    covered_s: float = 0.0
    """Seconds ``output_tps`` divides by: the cycles' time per user, or the window: ``output_tokens / covered_s``
    is ``output_tps``."""
    note: str | None = None
    """Why there is no interval (``too short: no interval``)."""


class Steadiness(Doc):
    throughput: Drift | None = None
    """Drift of output tok/s (closed loop: decides the step's steadiness), over the request-cycle batches of
    ``throughput`` when there are at least 5 (independent points), else over one-second bins (AR(1)-aware)."""
    tpot: Drift | None = None
    """Drift of TPOT per request, by send time (shown, never decides)."""
    latency: Drift | None = None
    """Open loop: drift of E2E from the intended send per request, by send time (decides, with ``in_flight``)."""
    in_flight: Drift | None = None
    """Open loop: drift of the requests in flight, mean per one-second bin: a server falling behind piles them up
    (decides, with ``latency``)."""


class FigureBound(Doc):
    """How far the figure without the load generator's delays can lie from the measured one, as fractions of the
    measured figure: ``[below, above]`` per statistic (``analysis.validity``; null above: unbounded)."""

    p50: list[float | None] = []
    """The P50's ``[below, above]``."""
    p95: list[float | None] = []
    """The P95's ``[below, above]``."""
    p99: list[float | None] = []
    """The P99's ``[below, above]``."""
    mean: list[float | None] = []
    """The mean's ``[below, above]``."""
    worst: float | None = None
    """The largest of these fractions (null: unbounded)."""
    distorted: bool = False
    """True when the client could account for more than 5% of the figure (``validity.CLIENT_SHARE_MAX``)."""


class ClientValidity(Doc):
    """The load generator's own health in the step's window, and what it could have done to each figure
    (``analysis.validity``)."""

    cpu_percent_max: float | None = None
    """Highest per-process mean CPU, % of one core."""
    loop_lag_ms_p95: float | None = None
    """P95 of the per-second worst event-loop lag, ms."""
    loop_lag_ms_max: float | None = None
    """The worst event-loop lag of any second of the window, ms: no stamp was late by more."""
    client_share: float | None = None
    """Closed loop: the share of the users' time in the window spent waiting on the client (outside a request,
    think time aside, plus the expected stall before each request's last stamp); the server could have delivered up
    to output tok/s / (1 - share)."""
    schedule_lag_ms_p99: float | None = None
    """Open loop: P99 of send time minus intended time, ms."""
    reasons: list[str] = []
    """Why the step is client-invalid: what spoils its throughput (empty when valid)."""
    latency_valid: bool | None = None
    """False when a latency figure may be distorted by the client or a strict lag limit was exceeded (the figures
    stay, marked; the step's throughput verdict does not depend on it)."""
    latency_reasons: list[str] = []
    """What may have distorted the latency figures: the strict limits (loop lag P95 20 ms, schedule lag P99 20 ms)
    and the figures the client could account for more than 5% of."""
    bounds: dict[str, FigureBound] = {}
    """Per figure (ttft_ms, tpot_ms, e2e_ms, decode_tps; open loop also ttft_sched_ms, e2e_sched_ms,
    e2e_sched_all_ms; closed loop output_tps), how far the client could have moved it."""


class ClientAcceptance(Doc):
    rate: float | None = None
    """Accepted / drafted tokens summed over the step's requests."""
    draft_tokens: int = 0
    """Draft tokens the server reported in the responses."""
    accepted_tokens: int = 0
    """Accepted draft tokens the server reported in the responses."""
    source: str = ""
    """Where the figure comes from."""


class SourcedValue(Doc):
    value: float | None = None
    """The figure."""
    source: str = ""
    """Where it comes from."""


class StepAcceptance(Doc):
    server: ServerAcceptance | None = None
    """From the server's counters."""
    client: ClientAcceptance | None = None
    """From the per-request timings the client received."""
    tokens_per_chunk: SourcedValue | None = None
    """Tokens per token-carrying chunk."""


class CrossCheckAcceptance(Doc):
    server: float
    """Server-side rate."""
    client: float
    """Client-side rate."""
    difference: float
    """Client minus server."""


class CrossCheckLatency(Doc):
    server_mean: float
    """The server histogram's mean, ms."""
    client_mean: float
    """The client's mean, ms."""
    ratio: float
    """Client / server."""
    flag: bool
    """True when they differ by more than 25%."""


class ServerVsClient(Doc):
    acceptance_rate: CrossCheckAcceptance | None = None
    """Acceptance rate from both sides."""
    ttft_ms: CrossCheckLatency | None = None
    """TTFT from both sides."""
    tpot_ms: CrossCheckLatency | None = None
    """TPOT from both sides."""


class TopProcess(Doc):
    pid: int | None = None
    """Process id."""
    name: str = ""
    """Process name."""
    cores: float | None = None
    """Mean CPU cores it used over the window."""


class HostLoad(Doc):
    """What else the machine did during the steady window (``host.parquet``, sampled every second)."""

    samples: int = 0
    """Host samples (about one per second) that fell in the window."""
    foreign_cores: float = 0.0
    """Mean CPU cores busy outside the server's processes, the load generator and our own Prometheus."""
    steal_cores: float = 0.0
    """Mean CPU cores the hypervisor took away (``/proc/stat`` steal)."""
    own_cores: float = 0.0
    """Mean CPU cores of the run's own processes (server, load generator, Prometheus)."""
    foreign_gpu_processes: int = 0
    """Most GPU processes seen at once that were not the server's."""
    top_foreign: list[TopProcess] = []
    """The foreign processes that used most CPU."""


class StepReasoning(Doc):
    """The step's reasoning streams (``analysis.reasoning``), over its successful requests."""

    requests: int = 0
    """Successful requests of the step."""
    reasoning_requests: int = 0
    """Those that streamed reasoning."""
    no_answer: int = 0
    """Requests that reasoned and gave no answer (the output ended while thinking, e.g. cut by max_tokens); they
    count in ``ttfot_all_ms`` at the time they ended."""
    no_answer_share: float | None = None
    """no_answer / requests."""
    reasoning_share: float | None = None
    """Reasoning tokens / output tokens."""
    reasoning_tokens: Distribution | None = None
    """Reasoning tokens per request that reasoned (the server's ``completion_tokens_details.reasoning_tokens`` when
    given, else counted from the reasoning chunks)."""
    answer_tokens: Distribution | None = None
    """Answer tokens per request that reasoned."""
    reasoning_tps: Distribution | None = None
    """Decode tok/s over the reasoning: (reasoning tokens - 1) / (last reasoning chunk - first chunk)."""
    answer_tps: Distribution | None = None
    """Decode tok/s over the answer: (answer tokens - 1) / (t_end - t_first_output)."""


class StepFigures(Doc):
    """One ladder step of one variant: requests sent in its steady window, tokens arriving in it."""

    step: int
    """Step index within the variant's ladder (repeats included)."""
    level: float
    """Users (closed loop) or offered req/s (open loop)."""
    mode: str
    """``closed`` or ``open``."""
    context: int | None = None
    """Prompt tokens of a context-axis step (null: a step of the ladder's own workload)."""
    users: int | None = None
    """Locust users the shape ran (open loop: dispatchers)."""
    window_s: float | None = None
    """Length of the steady window, s."""
    requests: int = 0
    """Requests sent in the steady window, failed ones included."""
    errors: int = 0
    """Failed requests among them."""
    error_rate: float | None = None
    """errors / requests."""
    errors_by_class: dict[str, int] = {}
    """Failed requests per error class."""
    output_tokens: int = 0
    """Output tokens of the successful requests."""
    good_output_tokens: int = 0
    """Output tokens of the requests in ``output_tokens`` that met every per-request SLO (effective tokens)."""
    output_tps: float | None = None
    """Aggregate output tok/s: closed loop, the output tokens of the request cycles that start in the window over
    their time per user (renewal reward); open loop and runs without users, the output tokens of the requests
    sent in the window over its length (``throughput``; ``analysis.cycles``)."""
    output_tps_ci95: Interval = None
    """95% interval of ``output_tps`` from 5 to 10 time batches (log-scale delta method); null when fewer fit
    (``throughput.note``)."""
    throughput: StepThroughput | None = None
    """How ``output_tps`` was estimated."""
    request_rate: float | None = None
    """Requests sent per second of the window."""
    goodput_rps: float | None = None
    """Requests per second that succeeded and met every SLO set."""
    ttft_ms: Distribution | None = None
    """Time to first token from the actual send, successful requests."""
    ttft_all_ms: Distribution | None = None
    """TTFT over all requests: a failure counts at the time it failed, one never sent as a first-token timeout."""
    ttfot_ms: Distribution | None = None
    """Time to first output token: the first answer token after any reasoning (equals TTFT without reasoning),
    successful requests that gave an answer."""
    ttfot_all_ms: Distribution | None = None
    """TTFOT over all requests: a request with no answer (failed, or thinking until it ended) counts at the time it
    ended, one never sent as a first-token timeout (what the ``ttfot_p99_ms`` gate reads)."""
    ttfot_sched_ms: Distribution | None = None
    """Open loop: TTFOT from the intended send."""
    ttfot_sched_all_ms: Distribution | None = None
    """Open loop: TTFOT from the intended send over all requests."""
    reasoning: StepReasoning | None = None
    """Reasoning streams: tokens, speeds over each part, requests without an answer (null: no request reasoned)."""
    decode_by_position: list[PositionBin] | None = None
    """Decode tok/s by position in the output, per ``load.positions.bin_tokens`` tokens (null: no request completed
    a bin)."""
    ttft_sched_all_ms: Distribution | None = None
    """Open loop: TTFT from the intended send over all requests (what the gates use there)."""
    tpot_all_ms: Distribution | None = None
    """TPOT over all requests: a request that failed after two tokens counts with its pace until it failed."""
    e2e_all_ms: Distribution | None = None
    """E2E over all requests: a failure counts at the time it failed."""
    e2e_sched_all_ms: Distribution | None = None
    """Open loop: E2E from the intended send over all requests."""
    ttft_sched_ms: Distribution | None = None
    """Open loop: time to first token from the intended send."""
    tpot_ms: Distribution | None = None
    """Time per output token after the first."""
    e2e_ms: Distribution | None = None
    """Send to last token."""
    e2e_sched_ms: Distribution | None = None
    """Open loop: intended send to last token."""
    decode_tps: Distribution | None = None
    """Per request: (tokens - 1) / (t_end - t_first)."""
    e2e_tps: Distribution | None = None
    """Per request: tokens / (t_end - t_send)."""
    schedule_lag_ms: Distribution | None = None
    """Open loop: actual minus intended send time (for an arrival held at ``max_inflight``: minus the time its slot
    freed, the client's own lateness)."""
    itl_ms: Distribution | None = None
    """Inter-token latency per token (chunk gaps split over their tokens)."""
    icl_ms: Distribution | None = None
    """Inter-chunk latency: the chunk gaps themselves."""
    itl_approximate: float | None = None
    """Share of successful requests whose per-chunk token split is approximate (only a final total, or no count):
    ITL leans on it; TTFT, TPOT and E2E do not."""
    token_sources: dict[str, int] = {}
    """Requests per token-count source."""
    offered_rate: float | None = None
    """Open loop: the level."""
    scheduled_rate: float | None = None
    """Open loop: arrivals scheduled in the window per second."""
    achieved_rate: float | None = None
    """Open loop: requests actually sent per second."""
    held: int | None = None
    """Open loop: arrivals that found ``max_inflight`` requests in flight and waited for a slot (``load.at_max_inflight:
    hold``); their latencies from the intended send time include the wait."""
    held_ms: Distribution | None = None
    """Open loop: how long the held arrivals waited for their slot."""
    acceptance_client: ClientAcceptance | None = None
    """Acceptance from the per-request timings."""
    tokens_per_chunk: SourcedValue | None = None
    """Tokens per token-carrying chunk."""
    steady: bool | None = None
    """The deciding checks steady within the window (false: one drifted; null: too noisy to tell, or too few
    points)."""
    steady_check: Steadiness = Steadiness()
    """The drift fits behind ``steady``."""
    client_valid: bool | None = None
    """False when the load generator may have been the bottleneck."""
    client_validity: ClientValidity = ClientValidity()
    """The figures behind ``client_valid``."""
    prompt_cache: PromptCache | None = None
    """How much of the window's prompts the server took from its prompt cache (null: a run analysed before it was
    recorded)."""
    server: ServerStep | None = None
    """The server's own figures for the window."""
    acceptance: StepAcceptance | None = None
    """Acceptance from both sources side by side."""
    server_vs_client: ServerVsClient | None = None
    """The server's and the client's figures compared."""
    suspect_usage: int = 0
    """Requests whose server token counts disagree with the request or its text (``suspect_usage``: above
    ``max_tokens``, or far from a tokenizer's count of the streamed text); any makes the step ``suspect-usage``."""
    failed_fast: int = 0
    """Requests refused (no connection, a failed TLS handshake) or failed within 10 ms of their start (a reset, an
    error status), before any token; more than half make the step ``failed-fast``: the server refused or failed
    fast."""
    extended_s: float = 0.0
    """Seconds the steady window was extended (unsteady or too few requests; up to ``load.max_extend_s``)."""
    workers_lost: list[int] = []
    """Load processes lost during the step (it is then ``worker-lost``: the level was not held)."""
    faults: list[dict[str, Any]] = []
    """Faults injected in the steady window (``probes.faults``: kind, t_start, t_end); the step is then
    ``fault-injected``."""
    host: HostLoad | None = None
    """Foreign load on the host during the window (null: not monitored)."""
    status: str = "clean"
    """What the step may be used for: clean, or fault-injected / worker-lost / suspect-usage / failed-fast /
    contended / client-invalid / insufficient / unsteady / too-noisy (only clean steps feed speed-ups, crossover,
    recommendation, saturation and knee)."""
    status_reasons: list[str] = []
    """Every reason that applies, the status's first."""
    anomaly: str | None = None
    """Closed loop: set when throughput fell by more than half from the level below."""
    by_turn: list[TurnFigures] | None = None
    """Conversations (``load.conversation``): the steady window's requests per turn (null: no conversations)."""
    conversations: StepConversations | None = None
    """Conversations: what became of those that started in the step (null: no conversations)."""
    trace: TraceStep | None = None
    """Trace replay (``load.trace``): the window's records replayed, skipped and dropped, and the arrival error
    (null: no trace)."""


class Rules(Doc):
    saturation: str
    """The saturation rule in words."""
    knee: str
    """The knee rule in words."""


class Inflection(Doc):
    """Saturation or knee as decided (``analysis.curves``), with how sure it is."""

    level: float | None = None
    """The level (null: not reached within the ladder, or undetermined)."""
    status: str
    """reached, not reached (within the ladder) or undetermined (fewer than two levels with an interval)."""
    text: str
    """The decision in words, with its interval."""
    gains: list[dict[str, Any]] = []
    """Saturation: throughput gains (fraction) from the level to each higher one with 95% intervals, or the last
    segment's when not reached."""
    segments: list[dict[str, Any]] = []
    """Knee: each segment's throughput elasticity with its 95% interval."""


class VariantFigures(Doc):
    steps: list[StepFigures] = []
    """Every step in ladder order."""
    saturation_level: float | None = None
    """First clean level whose throughput gain to every higher clean level has its 95% upper bound below 5%."""
    knee_level: float | None = None
    """Closed loop: first clean level whose next segment's throughput elasticity has its 95% upper bound below 0.5;
    open loop: first level after which P95 TPOT or TTFT grows faster than load."""
    saturation: Inflection | None = None
    """The saturation decision with its uncertainty."""
    knee: Inflection | None = None
    """The knee decision with its uncertainty."""
    knee_by_metric: dict[str, float | None] = {}
    """The knee per latency metric (P95 log-log slope above the mode's threshold; shown, decides in open loop)."""
    rules: Rules | None = None
    """The rules behind saturation and knee."""
    acceptance_vs_load: list[AcceptancePoint] | None = None
    """Server acceptance per step."""
    memory_trend: MemoryTrend | None = None
    """Memory growth over the variant's run."""
    telemetry: TelemetryState = TelemetryState()
    """What the telemetry saw."""


class StepComparison(Doc):
    level: float
    """Load level."""
    status: str = "clean"
    """clean: judged from the clean blocks of both sides; inconclusive: the blocks disagree beyond their noise;
    otherwise the status that kept the level out (contended, client-invalid, insufficient, unsteady)."""
    excluded: list[str] = []
    """Steps of this level left out, with their reasons."""
    pairs_note: str | None = None
    """Set when the verdict rests on fewer block pairs than the level was measured in ("1 of 2 pairs: period effect
    not balanced")."""
    output_tps_speedup: Ratio
    """Aggregate output tok/s, variant / baseline."""
    decode_tps_speedup: Ratio
    """Mean decode tok/s per request, variant / baseline."""
    tpot_p50_speedup: Ratio
    """TPOT P50, baseline / variant."""
    tpot_p95_speedup: Ratio
    """TPOT P95, baseline / variant."""
    ttft_p50_speedup: Ratio | None = None
    """TTFT P50, baseline / variant (open loop: from the intended send time)."""
    ttft_p95_speedup: Ratio
    """TTFT P95, baseline / variant (open loop: from the intended send time)."""
    ttfot_p50_speedup: Ratio | None = None
    """Time to first output token P50, baseline / variant, paired (null: no request reasoned)."""
    ttfot_p95_speedup: Ratio | None = None
    """Time to first output token P95, baseline / variant, paired (null: no request reasoned)."""
    e2e_sched_p95_speedup: Ratio | None = None
    """Open loop: E2E P95 from the intended send time over all requests, baseline / variant (the headline)."""
    goodput_speedup: Ratio | None = None
    """Open loop: goodput, variant / baseline."""
    verdict: str | None = None
    """better, worse or unclear: the level's verdict (null: not judged). Closed loop: the output tok/s speed-up's
    CI. Open loop: better when the paired E2E_sched P95 and TPOT P50 speed-ups are both clearly above 1 and goodput
    is not clearly worse; worse when goodput is clearly worse, or a latency clearly worse and neither clearly
    better; else unclear."""
    verdict_basis: str | None = None
    """The verdict's reason in words (which figures were clearly better or worse)."""
    breakdown: LevelBreakdown | None = None
    """Where the time of a request goes on each side, and in words what the variant changed."""
    prompt_cache: LevelCache | None = None
    """Both sides' cached prompt shares at this level; its ``flag`` marks the latency speed-ups."""
    tokens_per_pass: float | None = None
    """Variant: tokens one target forward pass of a request yields, passes without a draft included: generated /
    (generated - accepted) from the server's counters (without a generated-token counter: 1 + accepted / drafts)."""
    pass_efficiency: float | None = None
    """Measured speed-up / tokens_per_pass: below 1 by what drafting, verification and scheduling cost."""
    pass_gap: str | None = None
    """The same in words."""


class Comparison(Doc):
    """A variant against the baseline, level by level."""

    baseline: str
    """Baseline variant."""
    variant: str
    """Compared variant."""
    metric: str
    """The headline speed-up: ``output_tps`` (closed loop, which alone decides) or ``e2e_sched_p95`` (open loop,
    where the offered rate fixes throughput and each level's ``verdict`` also reads TPOT P50 and goodput); the
    crossover and recommendation follow the levels' verdicts."""
    metric_name: str = ""
    """The headline in words."""
    steps: list[StepComparison] = []
    """Speed-ups per level."""
    crossover_level: float | None = None
    """First level whose verdict is worse (closed loop: the headline speed-up CI lies entirely below 1)."""
    recommendation: str
    """One sentence: where to enable the variant."""


class ContextComparison(Doc):
    """A prompt length measured on its own: per variant and level the figures, and the A/B comparisons."""

    context_tokens: int
    """Prompt tokens of this length."""
    ladder: bool = False
    """True when these are the ladder's own steps (generated prompts of one length), shown as the shortest length."""
    variants: dict[str, list[ContextLevel]] = {}
    """Per variant, its levels at this length in ascending order."""
    comparisons: list[Comparison] = []
    """Each variant against the baseline at this length (the ladder's own comparisons for ``ladder``)."""


class ErrorSample(Doc):
    variant: str
    """Variant."""
    error_class: str
    """Error class."""
    count: int
    """Failed requests of this class (all phases)."""
    steady: int
    """Of which sent in a steady window."""
    levels: list[float] = []
    """Levels where they happened."""
    http_status: list[int] = []
    """HTTP statuses seen (up to 5)."""
    message: str | None = None
    """One error message, cut (server text: escape before display)."""


class Summary(Doc):
    """``summary.json``: every figure of a run, computed from the run directory alone."""

    run_id: str | None = None
    """The run."""
    generated_at: str
    """When this summary was computed."""
    baseline: str | None = None
    """The baseline variant."""
    headline_ttft: str = "ttft"
    """The time to first token the headline reads (the console's and summary.md's tables, the knee): ``ttft``, the
    first token of any kind, or ``ttfot``, the first answer token after any reasoning (``load.reasoning``)."""
    records: int
    """Rows of requests.parquet (every request, failed included)."""
    slo: dict[str, float | None] = {}
    """Per-request SLOs behind goodput."""
    variants: dict[str, VariantFigures] = {}
    """Per variant, in run order."""
    comparisons: list[Comparison] = []
    """Each variant against the baseline."""
    schedules: list[SweepSchedule] = []
    """Sweeps of a speculative setting: per level the best value, and the schedule."""
    contexts: list[ContextComparison] = []
    """The context-length axis: per prompt length, figures and speed-ups per level."""
    categories: list[CategoryComparison] = []
    """Per compared variant, the speed-ups per content category and level (empty: fewer than two categories)."""
    positions: PositionsSummary | None = None
    """Decode speed by position in the output (null: no request completed a bin)."""
    cost: CostSummary | None = None
    """Cost per million tokens and capacity at the scenario's prices (null: the scenario has no ``cost:``)."""
    images: ImageOverhead | None = None
    """What a bucket's images add to TTFT at the same text length (null: no bucket has ``images``)."""
    conversations: ConversationSummary | None = None
    """Conversations by turn: figures and speed-ups per variant, level and turn, diverged histories (null: the
    scenario has no ``load.conversation``)."""
    soak: SoakSummary | None = None
    """A soak's windows, trends and gates (null: not a soak, ``--soak``)."""
    probes: ProbeSummary | None = None
    """The probe suite and injected faults, one row each (null: none, ``--probes`` / ``probes:``)."""
    scale_out: ScaleOutSummary | None = None
    """One server against N after each ladder: the slope of goodput (null: none, ``--scale-out N``)."""
    detected: dict[str, Detected] = {}
    """Per variant, what its numbers rest on: its server, the model and API, how the server counts tokens, whether it
    reports cached prompt tokens, its speculative-decoding figures, its /metrics, and every request the run sent it."""
    checks_skipped: dict[str, str] = {}
    """Checks the run did not make because they could not be judged (``--host`` without ``--scenario``: quality,
    consistency), each with why and how to turn it on."""
    consistency: dict[str, Agreement] = {}
    """Greedy output agreement per variant, on the consistency prompts."""
    baseline_repeat: Agreement | None = None
    """The baseline's consistency answers against its own second answers (null: not asked twice)."""
    greedy: dict[str, GreedyCheck] = {}
    """Per variant, every greedy comparison with the baseline in one check: consistency prompts and quality tasks,
    each divergence named, and its cause told by the baseline's repeat."""
    quality: QualitySummary | None = None
    """The quality check and which variants are eligible (null: the scenario has no ``quality:``)."""
    events: list[RunEvent] = []
    """Run events (server exits, missing records, ...), as steps.json records them (``docs/events.schema.json``)."""
    errors: list[ErrorSample] = []
    """Failed requests grouped by variant and error class."""

    @field_serializer("events")
    def _events_as_written(self, events: list[Event]) -> list[dict[str, Any]]:
        return [event.written() for event in events]  # the fields each was given, in that order: no added nulls


class GateCheck(Doc):
    gate: str
    """Gate name."""
    variant: str
    """Variant."""
    level: float | None = None
    """Level."""
    context: int | None = None
    """Prompt tokens of a context-axis step (null: a step of the ladder's own workload)."""
    value: float | None = None
    """The measured figure (null: not measured, which fails)."""
    limit: float
    """The gate's limit."""
    ok: bool
    """Whether the gate holds."""


class Verdict(Doc):
    """``verdict.json``: the exit code a nightly job gets, and why."""

    exit_code: int
    """0 ok, 2 bad input, 3 SLO gate, 4 regression, 5 invalid run, 6 server failure."""
    reasons: dict[str, list[str]] = {}
    """Reasons per exit code."""
    checks: list[GateCheck] = []
    """Every SLO check made."""


def summary_schema() -> dict:
    """The JSON Schema of ``summary.json`` (written to ``docs/summary.schema.json``)."""
    return Summary.model_json_schema()

"""The documents of the speculative-decoding experiments: speed-ups with their intervals, where the time goes,
draft-length sweeps and their schedule, and figures per context length. Part of ``summary.json``
(``analysis.documents``); split out to keep each module readable.
"""

from __future__ import annotations

from typing import Any

from .base import Doc, Interval

__all__ = ["ContextLevel", "LevelAcceptance", "LevelBreakdown", "Phases", "Ratio", "RequestAcceptance", "SweepSchedule"]


class Ratio(Doc):
    """A speed-up or change: > 1 always favours the variant (or the newer run)."""

    value: float | None = None
    """Point estimate."""
    ci95: Interval = None
    """95% interval; null when a side has fewer than 2 samples. Closed-loop throughput: each block's log throughput
    with its batch error (``analysis.cycles``), blocks paired and pooled; goodput (and runs without users): t interval
    of the log ratio with the seconds' lag-1 autocorrelation accounted for, blocks paired and pooled
    (``analysis.rates``); per-request figures: bootstrap over the request pairs."""
    pairs: int | None = None
    """Requests compared as pairs (the same prompt, and in open loop the same arrival, in both); 0: unpaired."""
    blocks: int | None = None
    """Rates: block pairs (a step of each side with the same step number) the interval pools."""
    blocks_agree: bool | None = None
    """Rates: False when the block pairs disagree beyond their own noise (Cochran's Q): the level is inconclusive."""
    block_values: list[float] = []
    """Rates: the ratio of each block pair."""
    q: float | None = None
    """Rates with two or more block pairs: Cochran's Q of their log ratios (``blocks_agree`` compares it with its
    critical value)."""
    pairs_planned: int | None = None
    """Rates: the block pairs the level was measured in (clean or not); fewer used than planned leaves the period
    effect of an ABBA design unbalanced."""
    client_ci95: list[float | None] | None = None
    """``ci95`` widened by how far the load generator could have moved the figure on either side (its delays, per
    step: ``client_validity.bounds``): where the speed-up without the client's delays lies (an upper end of null:
    unbounded). A level whose verdict changes within it is client-invalid (null: no interval, or nothing known of
    the client)."""


class Phases(Doc):
    """One side's request split into phases, in ms."""

    source: str
    """server per-request timings (llama.cpp) or server histograms (vLLM, SGLang)."""
    statistic: str
    """median (per-request timings) or mean (histogram sum / count over the window)."""
    queue_ms: float | None = None
    """Time waiting in the server's queue, ms (null: per-request timings, which have no queue time, or not
    exported)."""
    prefill_ms: float | None = None
    """Prompt processing time, ms."""
    decode_ms: float | None = None
    """Generation time after the first token, ms."""
    outside_ms: float | None = None
    """Client E2E minus the server's time: network, client, and (llama.cpp) waiting for a slot."""
    e2e_ms: float | None = None
    """Client E2E, same statistic."""
    n: int = 0
    """Requests behind the figures: those with server timings (per-request), or those with a client E2E
    (histograms)."""
    note: str | None = None
    """A caveat on the figures: llama.cpp has no queue time; no server E2E, so no outside_ms; a phase estimated
    from the server's TTFT histogram (SGLang: decode = E2E - TTFT; without its per-stage histogram, prefill = TTFT
    - queue)."""


class LevelBreakdown(Doc):
    baseline: Phases | None = None
    """The baseline's phases at this level (null: neither source measured them)."""
    variant: Phases | None = None
    """The variant's phases at this level (null: neither source measured them)."""
    words: str
    """Which phase changed, and who gains (from TPOT P50 and TTFT P50 speed-ups and the phases)."""


class LevelAcceptance(Doc):
    """The server's acceptance over a level's clean steps, pooled by drafts."""

    rate: float | None = None
    """Accepted / drafted tokens."""
    mean_length: float | None = None
    """1 + accepted / drafts: tokens per target forward pass."""
    per_position: list[float] = []
    """Share of drafts whose token at position i was accepted."""
    drafts: int = 0
    """Drafts (verification steps with draft tokens) the server counted over those steps, summed."""


class RequestAcceptance(Doc):
    """Acceptance from the responses of a level's clean requests, one request as the unit
    (``analysis.acceptance``)."""

    rate: float | None = None
    """Accepted / drafted tokens summed over the requests (llama.cpp's per-request timings; null without them)."""
    rate_ci95: Interval = None
    """95% percentile bootstrap over requests (tokens of one request or draft are not independent, so not a
    binomial interval over tokens); null with fewer than 2 requests."""
    mean_length: float | None = None
    """Tokens per target forward pass after the first token: from the timings sum(n - 1) / sum(n - 1 - accepted),
    else tokens after the first chunk / chunks after the first (engines sending one chunk per step). Counts the
    passes that drafted nothing, unlike the server's 1 + accepted / drafts."""
    mean_length_ci95: Interval = None
    """95% percentile bootstrap over requests."""
    requests: int = 0
    """Requests the figures pool."""
    source: str
    """Per-request timings, or tokens per chunk."""


class SweepCandidate(Doc):
    value: Any
    """The swept setting's value (a draft length, a draft model)."""
    variant: str
    """The expanded variant that ran this value."""
    status: str
    """The comparison's status at this level (clean, inconclusive, ...), or not-eligible when the variant failed
    the quality gate."""
    speedup: Ratio
    """The comparison's headline speed-up, this setting over the baseline: aggregate output tok/s in a closed loop,
    E2E P95 from the intended send time in an open loop."""
    state: str | None = None
    """The level's verdict for this setting (better, worse, unclear; an open loop judges E2E, TPOT and goodput),
    which decides "clearly faster"; null: read from the speed-up's interval."""
    acceptance: LevelAcceptance | None = None
    """The server's acceptance over the variant's clean steps at this level (null: not reported)."""


class SweepLevel(Doc):
    level: float
    """Load level (users, or offered req/s in open loop)."""
    choice: Any
    """Among the settings measured cleanly whose speed-up CI lies wholly above 1, the one with the highest point
    speed-up (not the highest k); "off" when none is, "not judged" when none was measured cleanly."""
    speedup: Ratio | None = None
    """The chosen setting's output tok/s speed-up (null: no setting chosen)."""
    all_slower: bool = False
    """Every setting clearly slower than the baseline (where the sweep stops early)."""
    why: str
    """Why this choice, in words."""
    candidates: list[SweepCandidate] = []
    """Every setting measured at this level, in value order."""


class ScheduleRange(Doc):
    low: float
    """First measured level of the range."""
    high: float
    """Last measured level of the range."""
    choice: Any
    """The setting chosen over the range: a value, "off" or "not judged"."""


class SweepStop(Doc):
    """A ``sweep_stopped`` run event: interleaved runs stop measuring a sweep at higher levels once every setting
    is clearly slower than the baseline at a level (live per-second output tok/s, the analysis's interval)."""

    level: float | None = None
    """The last level measured."""
    context: int | None = None
    """Prompt tokens of a context-axis stop (null: the ladder)."""
    speedups: list[float | None] = []
    """Every setting's live output tok/s speed-up there, in value order."""
    text: str
    """The stop in words."""


class SweepSchedule(Doc):
    """A swept speculative setting: the best value per level, and the schedule."""

    name: str
    """The variant as written in the scenario (before expansion)."""
    setting: str
    """The swept setting (n_max, num_speculative_tokens, a draft model key)."""
    label: str
    """How the schedule names the setting: ``k`` for a draft length, else the setting's key."""
    values: list[Any]
    """The swept values, in the scenario's order."""
    variants: list[str]
    """The variants the sweep expanded into, one per value, in the same order."""
    levels: list[SweepLevel] = []
    """Per compared level, ascending: every setting and the choice."""
    ranges: list[ScheduleRange] = []
    """Consecutive levels with the same choice merged."""
    text: str
    """"concurrency <= 2: k = 6; 4-8: k = 2; >= 16: off"."""
    vllm: dict[str, Any] | None = None
    """The schedule as vLLM's Dynamic SD ``--speculative-config`` keys, with a note on its limits."""
    stopped: list[SweepStop] = []
    """Where the run stopped climbing because every setting was clearly slower (empty: it never did)."""


class ContextLevel(Doc):
    """One variant at one level of a context length (its clean steps pooled)."""

    level: float
    """Load level (users, or offered req/s in open loop)."""
    clean: bool
    """False when no step of this level was measured cleanly (the figures are then empty)."""
    requests: int = 0
    """Requests sent in the steady windows of the clean steps, failed ones included."""
    ttft_p50_ms: float | None = None
    """Median time to first token over the successful ones, ms: from the actual send (closed loop) or from the
    intended send time (open loop, TTFT_sched)."""
    cached_fraction: float | None = None
    """Share of the level's prompt tokens the server took from its prompt cache, its steps pooled (null: not
    measured)."""
    tpot_p50_ms: float | None = None
    """Median time per output token after the first over the successful ones, ms."""
    decode_tps: float | None = None
    """Mean per-request decode tok/s."""
    e2e_tps: float | None = None
    """Mean per-request tok/s over the whole request (prefill included)."""
    output_tps: float | None = None
    """Aggregate output tok/s."""
    acceptance_server: LevelAcceptance | None = None
    """The server's acceptance over the clean steps, pooled by drafts (null: not reported). Point values: the
    counters are window totals, with no per-request split to resample."""
    acceptance_client: RequestAcceptance | None = None
    """Acceptance from the responses, with intervals over requests (null: no clean step, or the responses say
    nothing about drafting and carry no per-chunk token split)."""

"""The documents of the speculative-decoding experiments: speed-ups with their intervals, where the time goes,
draft-length sweeps and their schedule, and figures per context length. Part of ``summary.json``
(``analysis.documents``); split out to keep each module readable.
"""

from __future__ import annotations

from typing import Any

from .server_documents import Doc, Interval

__all__ = ["ContextLevel", "LevelAcceptance", "LevelBreakdown", "Phases", "Ratio", "SweepSchedule"]


class Ratio(Doc):
    """A speed-up or change: > 1 always favours the variant (or the newer run)."""

    value: float | None = None
    """Point estimate."""
    ci95: Interval = None
    """95% interval; null when a side has fewer than 2 samples. Rates (throughput, goodput): t interval of the log
    ratio with the seconds' lag-1 autocorrelation accounted for, blocks paired and pooled (``analysis.rates``);
    per-request figures: bootstrap over the request pairs."""
    pairs: int | None = None
    """Requests compared as pairs (the same prompt, and in open loop the same arrival, in both); 0: unpaired."""
    blocks: int | None = None
    """Rates: block pairs (a step of each side with the same step number) the interval pools."""
    blocks_agree: bool | None = None
    """Rates: False when the block pairs disagree beyond their own noise (Cochran's Q): the level is inconclusive."""
    block_values: list[float] = []
    """Rates: the ratio of each block pair."""


class Phases(Doc):
    """One side's request split into phases, in ms."""

    source: str
    """server per-request timings (llama.cpp) or server histograms (vLLM, SGLang)."""
    statistic: str
    """median (per-request timings) or mean (histogram sum / count over the window)."""
    queue_ms: float | None = None
    prefill_ms: float | None = None
    decode_ms: float | None = None
    outside_ms: float | None = None
    """Client E2E minus the server's time: network, client, and (llama.cpp) waiting for a slot."""
    e2e_ms: float | None = None
    """Client E2E, same statistic."""
    n: int = 0
    note: str | None = None


class LevelBreakdown(Doc):
    baseline: Phases | None = None
    variant: Phases | None = None
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


class SweepCandidate(Doc):
    value: Any
    """The swept setting's value (a draft length, a draft model)."""
    variant: str
    status: str
    speedup: Ratio
    """Output tok/s, this setting / the baseline."""
    acceptance: LevelAcceptance | None = None


class SweepLevel(Doc):
    level: float
    choice: Any
    """The best setting clearly faster than the baseline, "off" when none is, "not judged" when none was
    measured cleanly."""
    speedup: Ratio | None = None
    all_slower: bool = False
    """Every setting clearly slower than the baseline (where the sweep stops early)."""
    why: str
    candidates: list[SweepCandidate] = []


class ScheduleRange(Doc):
    low: float
    """First measured level of the range."""
    high: float
    """Last measured level of the range."""
    choice: Any


class SweepSchedule(Doc):
    """A swept speculative setting: the best value per level, and the schedule."""

    name: str
    """The variant as written in the scenario (before expansion)."""
    setting: str
    """The swept setting (n_max, num_speculative_tokens, a draft model key)."""
    label: str
    values: list[Any]
    variants: list[str]
    levels: list[SweepLevel] = []
    ranges: list[ScheduleRange] = []
    text: str
    """"concurrency <= 2: k = 6; 4-8: k = 2; >= 16: off"."""
    vllm: dict[str, Any] | None = None
    """The schedule as vLLM's Dynamic SD ``--speculative-config`` keys, with a note on its limits."""


class ContextLevel(Doc):
    """One variant at one level of a context length (its clean steps pooled)."""

    level: float
    clean: bool
    """False when no step of this level was measured cleanly (the figures are then empty)."""
    requests: int = 0
    ttft_p50_ms: float | None = None
    tpot_p50_ms: float | None = None
    decode_tps: float | None = None
    """Mean per-request decode tok/s."""
    e2e_tps: float | None = None
    """Mean per-request tok/s over the whole request (prefill included)."""
    output_tps: float | None = None
    """Aggregate output tok/s."""
    acceptance_server: LevelAcceptance | None = None
    acceptance_client: float | None = None
    """Accepted / drafted tokens from the per-request timings."""

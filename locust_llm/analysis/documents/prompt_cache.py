"""The documents of the server's prompt cache: cached tokens per level and the TTFT they save."""

from __future__ import annotations

from .base import Doc
from .server import CacheFigure

__all__ = ["LevelCache", "PromptCache", "TtftSplit"]


class TtftSplit(Doc):
    p50: float | None = None
    """Median, ms."""
    p95: float | None = None
    """95th percentile, ms."""
    mean: float | None = None
    """Mean, ms."""
    n: int = 0
    """Requests."""


class PromptCache(Doc):
    """The prompt cache in a step's steady window."""

    mode: str
    """What the prompts asked of the cache: ``cold`` (every prompt unique), ``replayed`` (the pool's prompts again
    and again: ``load.unique_prefix`` off), ``shared`` (``load.shared_prefix``: hits on purpose), ``conversation``
    (each turn carries its conversation's history: hits on purpose), ``trace`` (a trace whose records share prompt
    blocks: hits on purpose), or ``unknown`` (the run directory does not say)."""
    across_runs: str | None = None
    """``unique``: the run's prompts were its own (a per-run nonce in every marker); ``repeated``: identical bytes
    every run (``load.same_prompts_every_run``, or a run recorded before per-run markers), so an earlier run's cache
    may serve them."""
    cached_fraction: float | None = None
    """Share of the window's prompt tokens the server took from its cache (``requests`` when a request reported it,
    else ``server``); null: not measured."""
    requests_reporting: int = 0
    """Successful steady requests whose response said how many of their prompt tokens were cached."""
    source: str = "not measured"
    """Where ``cached_fraction`` comes from: ``requests``, ``server`` or ``not measured``."""
    requests: CacheFigure | None = None
    """From the per-request counts (``requests.parquet`` ``cached_tokens``)."""
    server: CacheFigure | None = None
    """From the server's cache counters over the window."""
    intended_fraction: float | None = None
    """``shared`` mode: the shared prefix's tokens over the prompt tokens of the window's requests."""
    cached_requests: int | None = None
    """Requests with more than 5% of their prompt tokens from the cache (null: none reported)."""
    repeated_prompts: int | None = None
    """Steady requests whose exact prompt their server had been sent earlier in the run (null: not recorded)."""
    ttft_cached_ms: TtftSplit | None = None
    """TTFT (the mode's headline) of the requests with more than 5% cached: p50, p95, mean, n."""
    ttft_cold_ms: TtftSplit | None = None
    """TTFT of the requests with at most 5% cached: p50, p95, mean, n."""
    flag: str | None = None
    """Why this step's latency may be a cache hit rather than prefill (null: no reason)."""


class LevelCache(Doc):
    """The cached fractions of a compared level, each side's steps pooled."""

    baseline: float | None = None
    """The baseline's cached fraction."""
    variant: float | None = None
    """The variant's cached fraction."""
    difference: float | None = None
    """Variant minus baseline, as a fraction."""
    flag: str | None = None
    """Why the level's latency speed-ups may compare cache hits (null: no reason)."""

"""The documents of what speculative decoding depends on: figures per content category and by position in the
output (``analysis.categories``, ``analysis.positions``). Part of ``summary.json`` (``analysis.documents``).
"""

from __future__ import annotations

from .base import Doc, Interval
from .speedup import Ratio, RequestAcceptance

__all__ = [
    "CategoryComparison",
    "CategoryDifference",
    "CategoryLevel",
    "PositionBin",
    "PositionComparison",
    "PositionCurve",
    "PositionSpeedup",
    "PositionsSummary",
]


class CategoryLevel(Doc):
    """One content category at one level: the variant against the baseline on that category's requests."""

    level: float
    """Load level."""
    category: str
    """The requests' bucket (a workload bucket, or a dataset's ``bucket`` label)."""
    requests: int = 0
    """The variant's clean requests of this category at this level."""
    pairs: int = 0
    """Requests paired with the baseline's (the same prompt in both)."""
    decode_tps_speedup: Ratio
    """Mean decode tok/s per request, variant / baseline, paired by request, bootstrap 95% CI over the pairs."""
    tpot_p50_speedup: Ratio
    """TPOT P50, baseline / variant, paired by request."""
    acceptance: RequestAcceptance | None = None
    """The variant's acceptance on this category's requests, from the responses (null: none reported)."""
    decode_tps: float | None = None
    """The variant's mean decode tok/s per request, client-measured."""
    decode_tps_baseline: float | None = None
    """The baseline's mean decode tok/s per request, client-measured."""
    server_decode_tps: float | None = None
    """The variant's mean decode tok/s per request from the server's own timings (llama.cpp
    ``predicted_per_second``: tokens / ``predicted_ms``); null when the server gives none."""
    server_decode_tps_baseline: float | None = None
    """The baseline's, likewise."""
    server_decode_tps_speedup: Ratio | None = None
    """The same paired speed-up as ``decode_tps_speedup``, from the server's own timings (null: none)."""
    output_share: float | None = None
    """This category's share of the variant's output tokens at this level."""
    output_share_baseline: float | None = None
    """This category's share of the baseline's output tokens at this level."""


class CategoryDifference(Doc):
    level: float
    """Load level."""
    highest: str
    """The category with the highest decode speed-up."""
    lowest: str
    """The category with the lowest decode speed-up."""
    differ: bool
    """True when their 95% intervals do not overlap."""


class CategoryComparison(Doc):
    """A variant against the baseline, split by content category."""

    baseline: str
    """Baseline variant."""
    variant: str
    """Compared variant."""
    basis: str
    """What the per-category speed-up is of."""
    categories: list[str] = []
    """The categories, sorted."""
    levels: list[CategoryLevel] = []
    """Every category at every level judged (clean or inconclusive)."""
    recommendations: dict[str, str] = {}
    """Per category, where to enable the variant, from the decode speed-up's CI per level."""
    differences: list[CategoryDifference] = []
    """Per level, the extreme categories and whether they clearly differ."""
    text: str
    """In one sentence: which categories gain differently, or the measured statement that none does."""


class PositionBin(Doc):
    """One bin of output positions: tokens ``first_token`` to ``last_token`` of each request that reached it."""

    first_token: int
    """First output token of the bin (0-based)."""
    last_token: int
    """Last output token of the bin."""
    requests: int = 0
    """Requests that completed the bin."""
    decode_tps: float | None = None
    """Mean decode tok/s over the bin (bin 0: its tokens after the first)."""
    decode_tps_ci95: Interval = None
    """Bootstrap 95% interval of the mean, over requests."""
    acceptance_rate: float | None = None
    """Accepted / drafted tokens over the bin (llama.cpp per-token timings; null without them)."""
    acceptance_rate_ci95: Interval = None
    """Bootstrap 95% interval over requests."""


class PositionCurve(Doc):
    """A variant's decode speed by output position at one level, its clean steps pooled."""

    variant: str
    """Variant."""
    level: float
    """Load level."""
    bins: list[PositionBin] = []
    """Every bin some request completed, in order."""
    last_vs_first: Ratio | None = None
    """Decode tok/s in the last bin / the first, paired by request (the requests that completed both)."""
    text: str | None = None
    """The same in one sentence."""


class PositionSpeedup(Doc):
    first_token: int
    """First output token of the bin."""
    last_token: int
    """Last output token of the bin."""
    value: float | None = None
    """Mean decode tok/s over the bin, variant / baseline, paired by request."""
    ci95: Interval = None
    """Bootstrap 95% interval over the pairs."""
    pairs: int = 0
    """Requests paired."""


class PositionComparison(Doc):
    baseline: str
    """Baseline variant."""
    variant: str
    """Compared variant."""
    level: float
    """Load level."""
    bins: list[PositionSpeedup] = []
    """The speed-up per bin."""


class PositionsSummary(Doc):
    """Decode speed over a long answer (``analysis.positions``)."""

    bin_tokens: int
    """Output tokens per bin (``load.positions.bin_tokens``)."""
    steps_used: list[str] = []
    """The step statuses whose requests feed the curves and speed-ups: clean, and unsteady (a long answer's
    throughput drifts within its window by the very slowdown measured); other steps are left out."""
    curves: list[PositionCurve] = []
    """Per variant and level with a completed bin."""
    comparisons: list[PositionComparison] = []
    """Per compared variant and level judged: the speed-up by position."""
    text: list[str] = []
    """One line per curve with a first and a last bin: the change of decode speed from the first bin to the last."""

"""The cost document of ``summary.json`` (``Summary.cost``), typed: the price of a server per hour, cost per million
tokens per variant and level with intervals, the cheapest level that may be recommended, and how many servers an
offered load needs. Present only when the scenario has a ``cost:`` section (``analysis.cost``).
"""

from __future__ import annotations

from .base import Doc, Interval

__all__ = ["Capacity", "CostSummary", "LevelCost", "Price", "VariantCost"]


class Price(Doc):
    basis: str
    """``gpu``: gpu_hour_usd x gpus + other_hour_usd; ``cpu`` (no GPU price given): cpu_hour_usd + other_hour_usd."""
    hourly_usd: float
    """What one server of the measured configuration costs per hour, USD."""
    gpus: int | None = None
    """GPUs per server (``gpu`` basis only)."""
    text: str
    """The price in words, with its parts."""


class LevelCost(Doc):
    """One variant at one level of the ladder, its clean steps pooled (no figures when none was clean)."""

    level: float
    """Load level (users, or offered req/s in open loop)."""
    status: str
    """clean (at least one step measured cleanly), else the status that kept every step of the level out."""
    excluded: list[str] = []
    """Steps of this level left out, with their reasons."""
    output_tps: float | None = None
    """Aggregate output tok/s of the clean steps pooled."""
    output_tps_ci95: Interval = None
    """95% t interval of ``output_tps`` over the clean steps' pooled per-second bins (AR(1)-aware,
    ``analysis.rates``)."""
    usd_per_mtok: float | None = None
    """USD per million output tokens: hourly_usd / (output_tps x 3600) x 1e6."""
    usd_per_mtok_ci95: Interval = None
    """The bounds of ``output_tps_ci95`` through the same formula (high tok/s -> low cost); null when the
    interval's low end is not above 0."""
    tps_per_gpu: float | None = None
    """output_tps / gpus (``gpu`` basis only)."""
    tps_per_gpu_ci95: Interval = None
    """``output_tps_ci95`` / gpus (``gpu`` basis only)."""
    goodput_rps: float | None = None
    """Requests per second that succeeded and met every per-request SLO, the clean steps pooled."""
    goodput_rps_ci95: Interval = None
    """95% t interval of ``goodput_rps`` over the clean steps' pooled per-second bins (AR(1)-aware,
    ``analysis.rates``)."""
    tokens_per_request: float | None = None
    """Mean output tokens of a successful request sent in the clean windows."""
    effective_tps: float | None = None
    """Effective tok/s: goodput_rps x tokens_per_request (tokens of good requests only)."""
    effective_tps_ci95: Interval = None
    """``goodput_rps_ci95`` x tokens_per_request."""
    usd_per_effective_mtok: float | None = None
    """USD per million effective tokens: hourly_usd / (effective_tps x 3600) x 1e6."""
    usd_per_effective_mtok_ci95: Interval = None
    """The bounds of ``effective_tps_ci95`` through the same formula; null when its low end is not above 0."""
    gate_failures: list[str] = []
    """SLO gates that failed at a step of this level."""
    eligible: bool = False
    """Clean, every SLO gate held and effective tokens measured: the level may be recommended."""


class Capacity(Doc):
    target_rps: float
    """The offered load asked about (``cost.target_rps``), requests/s."""
    level: float | None = None
    """The eligible level with the most goodput per server (null: no level is eligible)."""
    goodput_rps: float | None = None
    """Its goodput per server."""
    goodput_rps_ci95: Interval = None
    """That level's ``goodput_rps_ci95``."""
    servers: int | None = None
    """ceil(target_rps / goodput_rps), assuming servers scale linearly."""
    servers_ci95: list[int] | None = None
    """[ceil(target / goodput high), ceil(target / goodput low)]; null when the low end is not above 0."""
    gpus: int | None = None
    """servers x gpus (``gpu`` basis only)."""
    gpus_ci95: list[int] | None = None
    """``servers_ci95`` x gpus (``gpu`` basis only)."""
    measured_efficiency: float | None = None
    """The variant's scale-out efficiency (slope / N; null: no judged scale-out in the run)."""
    measured_efficiency_ci95: Interval = None
    """The scale-out's ``efficiency_ci95``."""
    servers_measured: int | None = None
    """ceil(target_rps / (goodput_rps x min(efficiency, 1))): the answer with the measured scaling."""
    servers_measured_ci95: list[int] | None = None
    """The same with both intervals' bounds together (high goodput with high efficiency); null when a low end is
    not above 0."""
    scaling_text: str | None = None
    """The measured answer in words."""
    text: str
    """The answer in words."""


class VariantCost(Doc):
    variant: str
    """The variant."""
    levels: list[LevelCost] = []
    """Every level of the ladder, in order."""
    best_level: float | None = None
    """The eligible level with the lowest cost per million effective tokens (null: none is eligible)."""
    text: str
    """The choice, or why there is none, in words."""
    capacity: Capacity | None = None
    """How many servers ``cost.target_rps`` needs (null: no target given)."""


class CostSummary(Doc):
    """Cost per million tokens and capacity, from the scenario's prices; no price is built in."""

    price: Price
    """What one server costs per hour, and how that was computed."""
    rule: str
    """Which levels may be recommended: clean, and which SLO gates must hold."""
    effective: str
    """Which requests count as effective, and how effective tokens are computed."""
    assumption: str
    """What the capacity answer assumes."""
    variants: list[VariantCost] = []
    """Per variant, in run order."""
    text: str
    """The cheapest eligible variant and level over all variants, in one sentence."""

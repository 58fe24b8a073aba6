"""The document of ``compare.json``: a run against an earlier one, typed (see ``documents``)."""

from __future__ import annotations

from .base import Doc, Interval

__all__ = ["RegressionRow", "RunComparison"]


class RegressionRow(Doc):
    variant: str
    """Variant."""
    level: float
    """Level."""
    metric: str
    """output_tps, decode_tps, tpot_p50, tpot_p95 or ttft_p95."""
    ratio: float | None = None
    """New / old, oriented so > 1 is better."""
    ci95: Interval = None
    """95% interval of the ratio."""
    change: str
    """``better``, ``worse``, ``within noise`` or ``no data``."""


class RunComparison(Doc):
    """``compare.json``: a run against an earlier one."""

    old: str | None = None
    """The earlier run's id."""
    old_dir: str | None = None
    """The earlier run's directory (to recompute)."""
    new: str | None = None
    """This run's id."""
    max_regression_pct: float
    """Worse than this (and outside the noise) is a regression."""
    rows: list[RegressionRow] = []
    """Every variant, level and metric both runs have."""
    regressions: list[RegressionRow] = []
    """The rows that are regressions."""
    not_compared: list[str] = []
    """Each variant and level measured in either run that was not compared, and why (only in one run, or a step
    that was not clean); a comparison with no rows is no evidence of "no regression"."""
    prompt_cache: str | None = None
    """Set when the two runs' prompts asked different things of the prompt cache (cold, replayed, shared)."""

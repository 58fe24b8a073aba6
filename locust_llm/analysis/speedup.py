"""Variant-vs-baseline speed-ups with bootstrap CIs, the crossover level, and a plain-language recommendation.

Speed-up of variant V at level L = metric(V, L) / metric(baseline, L), with a 95% CI; the crossover
is the first level whose CI's upper bound is below 1 (docs/verdicts-and-gates.md, "Speed-up" and "Crossover").
A speed-up is always oriented so that **> 1 means the variant is better**: ``variant / baseline`` for
higher-is-better metrics (decode tok/s, output tok/s, goodput) and ``baseline / variant`` for lower-is-better ones
(TPOT, TTFT, ITL, E2E).

A step, as used by :func:`crossover_level` and :func:`recommendation`, is a dict with ``level`` and a speed-up
``{"value": float, "ci95": [lo, hi] | None}``, either under the key ``speedup`` or at the top level
(``{"level": 4, "value": 1.3, "ci95": [1.2, 1.4]}``). A step may carry its verdict as ``state`` (an open-loop
level is judged on several figures, ``comparison.open_loop_verdict``) and, as ``basis``, the name of the figure
its speed-up shows when that is not the headline. Pure functions; no Locust imports.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from ..fmt import ci_text, lvl, speedup
from .stats import DEFAULT_N_BOOT, Statistic, bootstrap_distribution, finite, percentile_interval, resample_indices

__all__ = ["Speedup", "crossover_level", "paired_ratio_ci", "ratio_ci", "recommendation", "speedup_state"]


def ratio_ci(
    variant_values,
    baseline_values,
    statistic: Statistic = np.mean,
    higher_is_better: bool = True,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    alpha: float = 0.05,
) -> dict:
    """Speed-up of a variant over the baseline, ``{"value": float, "ci95": [lo, hi] | None}``.

    ``value = statistic(variant) / statistic(baseline)`` when ``higher_is_better`` (throughputs), else
    ``statistic(baseline) / statistic(variant)`` (latencies), so > 1 always favours the variant.
    The CI is a percentile bootstrap: both samples are resampled independently (two child streams of
    ``SeedSequence(seed)``), ``n_boot`` times each, and the ``alpha/2``, ``1 - alpha/2`` quantiles of the
    replicated ratio are returned. Only finite values are used; with fewer than 2 in either sample the CI is
    None (and the value None when a sample is empty). A zero denominator gives inf/NaN, not an exception.
    Samples must be independent (per-request figures); rates over time go through ``rates.block_ratio_ci``.
    """
    variant, baseline = finite(variant_values), finite(baseline_values)
    if variant.size == 0 or baseline.size == 0:
        return {"value": None, "ci95": None}
    with np.errstate(divide="ignore", invalid="ignore"):
        num, den = (variant, baseline) if higher_is_better else (baseline, variant)
        value = float(np.float64(statistic(num)) / np.float64(statistic(den)))
        if variant.size < 2 or baseline.size < 2:
            return {"value": value, "ci95": None}
        rng_variant, rng_baseline = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
        boot_variant = bootstrap_distribution(variant, statistic, n_boot, rng_variant)
        boot_baseline = bootstrap_distribution(baseline, statistic, n_boot, rng_baseline)
        ratios = boot_variant / boot_baseline if higher_is_better else boot_baseline / boot_variant
    interval = percentile_interval(ratios, alpha)
    return {"value": value, "ci95": list(interval) if interval else None}


def paired_ratio_ci(
    variant_values,
    baseline_values,
    statistic: Statistic = np.mean,
    higher_is_better: bool = True,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    alpha: float = 0.05,
) -> dict:
    """Like :func:`ratio_ci` for paired samples (element i of each side is the same request in both variants):
    each resample draws the same pairs on both sides, so what the pairs share (the prompt, the arrival) cancels
    in the ratio instead of widening it. ``pairs`` says how many there were."""
    variant, baseline = np.asarray(variant_values, dtype=float), np.asarray(baseline_values, dtype=float)
    keep = np.isfinite(variant) & np.isfinite(baseline)
    variant, baseline = variant[keep], baseline[keep]
    if variant.size < 2:
        return {"value": None, "ci95": None, "pairs": int(variant.size)}
    rng = np.random.default_rng(seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        num, den = (variant, baseline) if higher_is_better else (baseline, variant)
        value = float(np.float64(statistic(num)) / np.float64(statistic(den)))
        ratios = []
        for idx in resample_indices(variant.size, n_boot, rng):
            top = np.asarray(statistic(num[idx], axis=1), dtype=float)
            bottom = np.asarray(statistic(den[idx], axis=1), dtype=float)
            ratios.append(top / bottom)
    interval = percentile_interval(np.concatenate(ratios), alpha)
    return {"value": value, "ci95": list(interval) if interval else None, "pairs": int(variant.size)}


def _speedup(step: Mapping) -> Mapping:
    inner = step.get("speedup")
    return inner if isinstance(inner, Mapping) else step


def _ci(step: Mapping) -> tuple[float, float] | None:
    return _interval(_speedup(step).get("ci95"))


def _interval(ci) -> tuple[float, float] | None:
    if not ci or len(ci) != 2 or ci[0] is None or ci[1] is None:
        return None
    lo, hi = float(ci[0]), float(ci[1])
    return (lo, hi) if not (math.isnan(lo) or math.isnan(hi)) else None


def _value(step: Mapping) -> float | None:
    value = _speedup(step).get("value")
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _sorted(steps: list[dict]) -> list[dict]:
    return sorted((s for s in steps if s.get("level") is not None), key=lambda s: float(s["level"]))


def crossover_level(steps: list[dict]) -> float | None:
    """The first level, in ascending order, whose speed-up CI upper bound is below 1; None if there is none.

    Steps without a CI (too few samples) never qualify: a crossover is a claim that the variant is slower,
    and it needs evidence. A step that carries its verdict (``state``) is judged by it.
    """
    for step in _sorted(steps):
        if speedup_state(step) == "worse":
            return step["level"]
    return None


class Speedup(Protocol):
    """A typed speed-up of ``summary.json`` (``Ratio``, a position bin's speed-up): its 95% interval."""

    @property
    def ci95(self) -> list[float] | None: ...


def speedup_state(step: Mapping[str, Any] | Speedup) -> str:
    """``"better"`` (CI lower bound > 1), ``"worse"`` (CI upper bound < 1) or ``"unclear"`` (spans 1 / no CI);
    a step's own verdict (``state``) when it carries one. ``step`` is a step dict of the analysis or a typed
    speed-up of the summary (which carries no verdict of its own)."""
    if not isinstance(step, Mapping):
        return _interval_state(_interval(step.ci95))
    if step.get("state") in ("better", "worse", "unclear"):
        return step["state"]
    return _ci_state(step)


def _ci_state(step: Mapping) -> str:
    return _interval_state(_ci(step))


def _interval_state(ci: tuple[float, float] | None) -> str:
    if ci is None:
        return "unclear"
    if ci[0] > 1.0:
        return "better"
    if ci[1] < 1.0:
        return "worse"
    return "unclear"


def _unclear_why(steps: list[dict]) -> str:
    """Why levels show no clear difference: their CIs include 1, or (a verdict on several figures) not every
    figure the verdict reads is clear."""
    return (
        "CIs include 1x"
        if all(_ci_state(s) == "unclear" for s in steps)
        else "not clear on every figure the verdict reads"
    )


def _levels(steps: list[dict]) -> str:
    return ", ".join(lvl(s["level"]) for s in steps)


def _named(step: Mapping) -> str:
    """The speed-up, with the figure it is of when that is not the comparison's headline (``basis``)."""
    return speedup(_value(step)) + (f" {step['basis']}" if step.get("basis") else "")


def _with_ci(step: Mapping) -> str:
    ci = _ci(step)
    text = _named(step)
    return f"{text}, CI {ci_text(ci, _bare)}" if ci else f"{text}, no CI"


def _bare(value: float) -> str:
    return speedup(value, suffix="")


def _at(steps: list[dict]) -> str:
    """``"2.0x at 1, 1.3x at 4"`` for the first and last of ``steps`` (one entry if they coincide)."""
    first, last = steps[0], steps[-1]
    parts = [f"{_named(first)} at {lvl(first['level'])}"]
    if last is not first:
        parts.append(f"{_named(last)} at {lvl(last['level'])}")
    return ", ".join(parts)


def recommendation(variant: str, baseline: str, steps: list[dict], crossover: float | None, unit: str) -> str:
    """One plain-language sentence on where to enable ``variant`` instead of ``baseline``.

    Each level's verdict comes from its CI (:func:`speedup_state`); ``crossover`` is :func:`crossover_level`'s answer.
    ``unit`` names the level: ``"concurrent streams"`` (closed loop) or ``"req/s"`` (open loop). Cases:

    * better then worse: ``"enable spec-k4 up to 4 concurrent streams (2.0x at 1, 1.3x at 4); disable from 8
      (0.8x, CI 0.78–0.82)"`` -- "up to" is the last clearly-better level below the crossover; levels between it
      and the crossover whose CI spans 1 are named as "no clear difference";
    * always better: ``"enable ... at every level judged, up to 16 <unit> (...)"``;
    * better, then no clear difference (no crossover): ``"enable ... up to L <unit> (...); no clear difference
      at ..."``;
    * never better, with a crossover: ``"disable ... from L <unit> (...)"``, plus the levels below it with no
      clear difference, or "slower than <baseline> at every level judged" when it is slower everywhere;
    * inconclusive (every CI spans 1): ``"inconclusive: ..."``.

    A level above the crossover where the variant is clearly better again is flagged as non-monotone.
    """
    steps = [s for s in _sorted(steps) if _value(s) is not None]
    if not steps:
        return f"no comparison of {variant} with {baseline}: no level has data"
    before = steps if crossover is None else [s for s in steps if float(s["level"]) < float(crossover)]
    after = [] if crossover is None else [s for s in steps if float(s["level"]) >= float(crossover)]
    better = [s for s in before if speedup_state(s) == "better"]
    unclear = [s for s in before if speedup_state(s) != "better"]
    span = f"{lvl(steps[0]['level'])} to {lvl(steps[-1]['level'])} {unit}"
    parts: list[str] = []

    if after:
        xo = after[0]
        if better:
            last = better[-1]
            parts.append(f"enable {variant} up to {lvl(last['level'])} {unit} ({_at(better)})")
            gap = [s for s in unclear if float(s["level"]) > float(last["level"])]
            if gap:
                parts.append(f"no clear difference at {_levels(gap)} ({_with_ci(gap[0])})")
            parts.append(f"disable from {lvl(xo['level'])} ({_with_ci(xo)})")
        elif not before and all(speedup_state(s) == "worse" for s in after):
            parts.append(
                f"disable {variant}: slower than {baseline} at every level judged, {span} "
                f"({_with_ci(xo)} at {lvl(xo['level'])}"
                + (f"; {_with_ci(after[-1])} at {lvl(after[-1]['level'])})" if len(after) > 1 else ")")
            )
        else:
            parts.append(f"disable {variant} from {lvl(xo['level'])} {unit} ({_with_ci(xo)})")
            if before:
                parts.append(
                    f"no clear difference from {baseline} below that (at {_levels(before)}; {_unclear_why(before)})"
                )
        again = [s for s in after if speedup_state(s) == "better"]
        if again:
            parts.append(
                f"note: faster again at {_levels(again)} ({_at(again)}), the curve is not monotone; "
                f"re-test those levels"
            )
        return "; ".join(parts)

    if better:
        if not unclear:
            return f"enable {variant} at every level judged, up to {lvl(steps[-1]['level'])} {unit} ({_at(better)})"
        parts.append(f"enable {variant} up to {lvl(better[-1]['level'])} {unit} ({_at(better)})")
        parts.append(f"no clear difference at {_levels(unclear)} ({_unclear_why(unclear)})")
        return "; ".join(parts)

    values = [value for value in map(_value, steps) if value is not None]  # every step kept has one
    return (
        f"inconclusive: {variant} is neither clearly faster nor slower than {baseline} at any level judged "
        f"({span}; speed-up {speedup(min(values))} to {speedup(max(values))}, {_unclear_why(steps)})"
    )

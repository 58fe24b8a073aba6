"""Inflection points of a load ladder: where throughput saturates and where latency takes off.

Pure functions over per-level figures (a level is a user count in closed loop or an offered req/s in open
loop). Levels may come in any order; they are sorted ascending first, and levels whose figures are missing
(None / NaN) are skipped. No Locust imports.

``saturation`` and ``throughput_knee`` decide from each level's throughput and the standard error of its logarithm
(``cycles.batch_ratio``), never from whether two intervals overlap (a wide interval at a low level would otherwise
be "saturation"):

* saturation: the first level whose throughput gain to *every* higher level has a 95% upper bound below 5%;
  otherwise "not reached within the ladder", with the last segment's gain and its interval;
* knee (closed loop): the first level whose next segment's throughput elasticity
  ``ln(T_{i+1} / T_i) / ln(L_{i+1} / L_i)`` has a 95% upper bound below 0.5: past it, by Little's law, more than
  half of each added user's time goes into waiting. The elasticity and its interval are shown.

A ratio of two levels' throughputs has ``se = sqrt(se_i^2 + se_j^2)`` on the log scale (independent windows) and the
t quantile with the smaller of the two degrees of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TypeGuard

from ..fmt import lvl
from .stats import t_quantile

__all__ = ["KNEE_ELASTICITY", "LevelThroughput", "knee_level", "saturation", "throughput_knee"]


def _ok(x: object) -> TypeGuard[float]:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


SATURATION_MIN_GAIN = 0.05


def knee_level(levels: Sequence[float], latency_p95: Sequence[float | None], threshold: float = 1.0) -> float | None:
    """The last level before P95 latency starts growing faster than load; None if it never does.

    Rule. With levels sorted ascending (levels and latencies must be > 0; others are skipped), the elasticity
    of segment ``i`` is the log-log slope ``s_i = ln(p_{i+1} / p_i) / ln(L_{i+1} / L_i)``. The knee is
    ``L_i`` of the first segment with ``s_i > threshold``: the highest level of the regime where latency still
    grows no faster than load (default ``threshold = 1``: doubling the load more than doubles the P95).
    Example: P95 TPOT 20, 20.4, 21, 22, 24, 80 ms at 1, 2, 4, 8, 16, 32 users -> slopes ~0.03 ... 0.13, then
    ln(80/24)/ln 2 = 1.74 > 1 -> knee 16.

    Choosing ``threshold``: in open loop, queueing makes latency explode (slope >> 1) past capacity, so 1 is
    the natural cut. In a closed loop Little's law gives ``throughput = users / latency``, so throughput
    elasticity is ``1 - s``: past saturation latency grows *in proportion* to users (``s -> 1`` from below)
    rather than faster, and ``threshold = 1`` only catches super-linear effects (queueing beyond server slots,
    KV-cache preemption). Pass ``threshold = 0.5`` there to mark where half of each load increase already
    goes into waiting instead of throughput.
    """
    if len(levels) != len(latency_p95):
        raise ValueError(f"{len(levels)} levels but {len(latency_p95)} latency figures")
    points = sorted(
        (float(lv), float(p))
        for lv, p in zip(levels, latency_p95, strict=False)
        if _ok(lv) and _ok(p) and lv > 0 and p > 0
    )
    for (l0, p0), (l1, p1) in pairwise(points):
        if l1 <= l0:
            continue
        if math.log(p1 / p0) / math.log(l1 / l0) > threshold:
            return l0
    return None


KNEE_ELASTICITY = 0.5


@dataclass(frozen=True)
class LevelThroughput:
    """One level's throughput, the standard error of its logarithm and that error's degrees of freedom."""

    level: float
    value: float
    se_log: float
    df: int


def _log_ratio(a: LevelThroughput, b: LevelThroughput, alpha: float) -> tuple[float, float]:
    """``ln(b / a)`` and the half-width of its interval."""
    half = t_quantile(1.0 - alpha / 2.0, min(a.df, b.df)) * math.hypot(a.se_log, b.se_log)
    return math.log(b.value / a.value), half


def _usable(points: Sequence[LevelThroughput]) -> list[LevelThroughput]:
    return sorted((p for p in points if p.value > 0 and math.isfinite(p.se_log) and p.df >= 1), key=lambda p: p.level)


def _gain(a: LevelThroughput, b: LevelThroughput, alpha: float) -> dict:
    y, half = _log_ratio(a, b, alpha)
    return {"from": a.level, "to": b.level, "gain": math.expm1(y), "ci95": [math.expm1(y - half), math.expm1(y + half)]}


def saturation(points: Sequence[LevelThroughput], min_gain: float = SATURATION_MIN_GAIN, alpha: float = 0.05) -> dict:
    """``{"level", "status", "text", "gains"}``: the first level whose gain to every higher level has its 95% upper
    bound below ``min_gain`` (``status`` reached), else ``not reached`` (the last segment's gain said), or
    ``undetermined`` with fewer than two levels that have an interval. ``gains``: the reached level's gains to each
    higher level, or the last segment's."""
    usable = _usable(points)
    if len(usable) < 2:
        return {"level": None, "status": "undetermined", "text": "fewer than two levels with an interval", "gains": []}
    for i, a in enumerate(usable[:-1]):
        gains = [_gain(a, b, alpha) for b in usable[i + 1 :]]
        if all(g["ci95"][1] < min_gain for g in gains):
            top = max(g["ci95"][1] for g in gains)
            text = (
                f"saturated at {lvl(a.level)}: the gain to every higher level is below +{min_gain:.0%} "
                f"(at most {top:+.1%}, 95% upper bound)"
            )
            return {"level": a.level, "status": "reached", "text": text, "gains": gains}
    last = _gain(usable[-2], usable[-1], alpha)
    text = (
        f"not reached within the ladder (still {last['gain']:+.0%} from {lvl(last['from'])} to {lvl(last['to'])}, "
        f"95% CI {last['ci95'][0]:+.0%} to {last['ci95'][1]:+.0%})"
    )
    return {"level": None, "status": "not reached", "text": text, "gains": [last]}


def throughput_knee(points: Sequence[LevelThroughput], threshold: float = KNEE_ELASTICITY, alpha: float = 0.05) -> dict:
    """``{"level", "status", "text", "segments"}``: the first level whose next segment's throughput elasticity has
    its 95% upper bound below ``threshold`` (``status`` reached), else ``not reached`` (or ``undetermined``).
    ``segments``: each segment's elasticity and interval."""
    usable = _usable(points)
    segments: list[dict] = []
    for a, b in pairwise(usable):
        if b.level <= a.level:
            continue
        y, half = _log_ratio(a, b, alpha)
        span = math.log(b.level / a.level)
        segments.append(
            {"from": a.level, "to": b.level, "elasticity": y / span, "ci95": [(y - half) / span, (y + half) / span]}
        )
    if not segments:
        return {
            "level": None,
            "status": "undetermined",
            "text": "fewer than two levels with an interval",
            "segments": [],
        }
    for seg in segments:
        if seg["ci95"][1] < threshold:
            text = (
                f"knee at {lvl(seg['from'])}: throughput elasticity to {lvl(seg['to'])} {seg['elasticity']:.2f} "
                f"(95% CI {seg['ci95'][0]:.2f} to {seg['ci95'][1]:.2f}, below {threshold:g})"
            )
            return {"level": seg["from"], "status": "reached", "text": text, "segments": segments}
    return {
        "level": None,
        "status": "not reached",
        "text": f"no segment's throughput elasticity is confidently below {threshold:g}",
        "segments": segments,
    }

"""Inflection points of a load ladder: where throughput saturates and where latency takes off.

Pure functions over per-level figures (a level is a user count in closed loop or an offered req/s in open
loop). Levels may come in any order; they are sorted ascending first, and levels whose figures are missing
(None / NaN) are skipped. No Locust imports.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise
from typing import TypeGuard

__all__ = ["knee_level", "saturation_level"]


def _ok(x: object) -> TypeGuard[float]:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


SATURATION_MIN_GAIN = 0.05


def saturation_level(
    levels: Sequence[float], throughput_ci: Sequence[tuple], min_gain: float = SATURATION_MIN_GAIN
) -> float | None:
    """The load level beyond which more load no longer buys throughput beyond the noise; None if none.

    ``throughput_ci[i]`` is ``(value, lo, hi)`` for ``levels[i]``: a throughput point estimate and its CI (e.g.
    ``rates.series_mean_ci`` of the level's per-second rates; a missing CI counts as ``lo = hi = value``).

    Rule. With levels sorted ascending, a higher level ``L_j`` *adds throughput* over ``L_i`` when both
      (a) its CI lies entirely above ``L_i``'s CI: ``lo_j > hi_i`` (the gain is not noise), and
      (b) its point gain is material: ``value_j >= (1 + min_gain) * value_i`` (default 5%).
    The saturation level is the first ``L_i`` that has at least one higher level and that no higher level adds
    throughput over. Comparing with *every* higher level (not only the next one) makes the rule robust to
    non-monotone curves: a noisy dip at ``L_{i+1}`` does not declare saturation if ``L_{i+2}`` still gains,
    and a post-saturation decline (thrashing) does not move the answer. The highest level can never be the
    answer: with nothing above it there is no evidence that it saturated, so a curve still rising at the top
    of the ladder returns None.
    """
    if len(levels) != len(throughput_ci):
        raise ValueError(f"{len(levels)} levels but {len(throughput_ci)} throughput figures")
    points = []
    for level, figure in zip(levels, throughput_ci, strict=False):
        if figure is None or not _ok(level):
            continue
        value, lo, hi = (tuple(figure) + (None, None))[:3]
        if not _ok(value):
            continue
        lo = lo if _ok(lo) else value
        hi = hi if _ok(hi) else value
        points.append((float(level), float(value), float(lo), float(hi)))
    points.sort(key=lambda p: p[0])
    for i, (level, value, _lo, hi) in enumerate(points[:-1]):
        gains = any(lo_j > hi and value_j >= (1.0 + min_gain) * value for _l, value_j, lo_j, _h in points[i + 1 :])
        if not gains:
            return level
    return None


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

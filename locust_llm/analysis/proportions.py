"""Intervals for pass rates: Wilson's score interval of one proportion, and Newcombe's hybrid score interval for
the difference of two paired proportions. Closed forms, no resampling. Pure.

References: E. B. Wilson (1927), J. Am. Stat. Assoc. 22: 209-212; R. G. Newcombe (1998), "Improved confidence
intervals for the difference between binomial proportions based on paired data", Stat. Med. 17: 2635-2650
(method 10, with the continuity-corrected correlation as Fagerland, Lydersen and Laake give it in "Statistical
Analysis of Contingency Tables", 2017, section 8.5).
"""

from __future__ import annotations

import math
from statistics import NormalDist

__all__ = ["paired_difference_interval", "wilson_interval"]


def _z(alpha: float) -> float:
    return NormalDist().inv_cdf(1 - alpha / 2)


def wilson_interval(successes: int, n: int, alpha: float = 0.05) -> list[float] | None:
    """Wilson's score interval of ``successes / n``; None without trials. Never outside [0, 1], never of zero
    width (0/10 gives [0, 0.28])."""
    if n <= 0:
        return None
    z, p = _z(alpha), successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # At 0 or n the bound is exactly 0 or 1 (the formula leaves a rounding residue).
    return [0.0 if successes == 0 else centre - half, 1.0 if successes == n else centre + half]


def paired_difference_interval(
    both: int, first_only: int, second_only: int, neither: int, alpha: float = 0.05
) -> list[float] | None:
    """Interval of p1 - p2 for paired outcomes (pair i: the first side's and the second side's answer to the same
    question): p1 = (both + first_only) / n, p2 = (both + second_only) / n. Newcombe's square-and-add of the two
    Wilson intervals, with the correlation of the pairs; None without pairs."""
    n = both + first_only + second_only + neither
    if n <= 0:
        return None
    first, second = both + first_only, both + second_only
    p1, p2 = first / n, second / n
    first_ci, second_ci = wilson_interval(first, n, alpha), wilson_interval(second, n, alpha)
    assert first_ci is not None and second_ci is not None  # n > 0
    l1, u1 = first_ci
    l2, u2 = second_ci
    margins = first * (n - first) * second * (n - second)
    phi = 0.0
    if margins > 0:
        cross = both * neither - first_only * second_only
        # Continuity-corrected: a small positive association counts as none.
        phi = (cross - n / 2) / math.sqrt(margins) if cross > n / 2 else min(cross, 0) / math.sqrt(margins)
    d = p1 - p2
    low = d - math.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0.0))
    high = d + math.sqrt(max((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2, 0.0))
    return [max(-1.0, low), min(1.0, high)]

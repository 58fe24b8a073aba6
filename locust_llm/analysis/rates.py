"""Per-second rate series -> means with intervals that respect time correlation, and block-paired ratios. Pure.

A throughput measured second by second is not a sample of independent values: a server that is slow this
second tends to be slow the next. Treating the bins as independent (an iid bootstrap) gives intervals far too
narrow (with lag-1 correlation 0.8 an A/A comparison excludes 1 in about 58% of runs instead of 5%). Here each
series is an AR(1) process: the variance of its mean is ``s^2/n * (1+rho)/(1-rho)`` with ``rho`` the lag-1
autocorrelation (bias-corrected for short series, clipped to [0, 0.95]), and it carries
``n_eff = n (1-rho)/(1+rho)`` effective values (the t quantile uses ``n_eff - 1`` degrees of freedom).

A comparison estimates one autocorrelation from all the blocks of a level, both sides pooled (a 10-second
block alone estimates it too poorly), and compares block ``r`` of the variant with block ``r`` of the
baseline: each pair gives a log ratio with its own variance, the pairs are pooled with random-effects
weights (DerSimonian-Laird: the spread between pairs beyond their own noise widens the interval), and
Cochran's Q says whether the pairs disagree beyond their noise (``blocks_agree``); a level whose blocks
disagree is never called faster or slower.

Bins are counts (tokens or requests in a second), so a series whose bins are all equal still gets the
spread of a count (variance floor = mean, Poisson): an interval never has zero width.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from .stats import finite, t_quantile

__all__ = [
    "SeriesMean",
    "ar1_inflation",
    "block_ratio_ci",
    "chi2_quantile",
    "lag1",
    "pool_log_ratios",
    "series_mean",
    "series_mean_ci",
]

RHO_MAX = 0.95


@dataclass(frozen=True)
class SeriesMean:
    mean: float
    variance: float  # of the mean
    n: int
    n_eff: float
    rho: float

    @property
    def df(self) -> float:
        return max(self.n_eff - 1.0, 1.0)


def lag1(series: list[np.ndarray], fitted: int = 1) -> float:
    """The lag-1 autocorrelation of one or more series (each about its own mean, their products pooled),
    bias-corrected and clipped to [0, ``RHO_MAX``]. ``fitted``: the parameters fitted to each series before (1: its
    mean; 2: a line, for the residuals of a trend). The estimate runs low by about (k + 2 (k + 1) rho) / n on series
    of n values with k fitted parameters: (1 + 4 rho) / n about a mean, (2 + 6 rho) / n about a line (measured on
    seeded AR(1) series of 20 to 60 values; ``tests/unit/analysis/test_steady.py`` checks the line's)."""
    products = squares = 0.0
    sizes = [x.size for x in series if x.size >= 2]
    for x in series:
        if x.size >= 2:
            centred = x - x.mean()
            products += float(centred[1:] @ centred[:-1])
            squares += float(centred @ centred)
    if not sizes or squares <= 0:
        return 0.0
    rho = products / squares
    bias = (fitted + 2.0 * (fitted + 1) * rho) * len(sizes) / sum(sizes)
    return min(max(rho + bias, 0.0), RHO_MAX)


def ar1_inflation(rho: float) -> float:
    """How much an AR(1) correlation ``rho`` between neighbours inflates the variance of a mean (or of a trend's
    slope) over what independent values would give: ``(1 + rho) / (1 - rho)``; ``n`` values then weigh as
    ``n / inflation`` independent ones."""
    return (1.0 + rho) / (1.0 - rho)


def series_mean(values, count_floor: bool = True, rho: float | None = None) -> SeriesMean | None:
    """The mean of a per-second series and the variance of that mean under AR(1) (``rho`` given, or estimated
    from the series itself); None with fewer than 2 bins."""
    x = finite(values)
    n = int(x.size)
    if n < 2:
        return None
    mean = float(x.mean())
    centred = x - mean
    ss = float(centred @ centred)
    rho = lag1([x]) if rho is None else rho
    s2 = ss / (n - 1)
    if count_floor:
        s2 = max(s2, abs(mean))
    inflation = ar1_inflation(rho)
    return SeriesMean(mean, s2 / n * inflation, n, n / inflation, rho)


def series_mean_ci(values, alpha: float = 0.05) -> list[float] | None:
    """``[lo, hi]`` of a series' mean (t interval with the effective number of values); None when undefined."""
    estimate = series_mean(values)
    if estimate is None:
        return None
    half = t_quantile(1.0 - alpha / 2.0, estimate.df) * math.sqrt(estimate.variance)
    return [estimate.mean - half, estimate.mean + half]


def chi2_quantile(p: float, k: float) -> float:
    """Chi-square quantile with ``k`` degrees of freedom (Wilson-Hilferty; within 1% for k >= 2 at p = 0.95;
    only used with k >= 2)."""
    z = NormalDist().inv_cdf(p)
    c = 2.0 / (9.0 * k)
    return k * (1.0 - c + z * math.sqrt(c)) ** 3


def _pair(variant: SeriesMean, baseline: SeriesMean, higher_is_better: bool) -> tuple[float, float, float] | None:
    if variant.mean <= 0 or baseline.mean <= 0:
        return None
    sign = 1.0 if higher_is_better else -1.0
    log_ratio = sign * math.log(variant.mean / baseline.mean)
    variance = variant.variance / variant.mean**2 + baseline.variance / baseline.mean**2
    return log_ratio, variance, min(variant.df, baseline.df)


def block_ratio_ci(
    variant_blocks: Mapping[int, np.ndarray],
    baseline_blocks: Mapping[int, np.ndarray],
    higher_is_better: bool = True,
    alpha: float = 0.05,
) -> dict:
    """Speed-up of a rate, > 1 favouring the variant: ``{"value", "ci95", "blocks", "blocks_agree", "block_values"}``.

    Blocks with the same key (the step number) are paired; without a common key, each side's blocks are
    joined into one series and compared as a single pair. With one pair ``value`` is the ratio of the means;
    with several, the pooled ratio (weighted geometric mean of the pairs' ratios) the interval is centred on.
    Without any pair that has 2 bins a side, ``value`` is the ratio of all bins' means and there is no interval.
    With one pair ``blocks_agree`` is None.
    """
    keys = sorted(set(variant_blocks) & set(baseline_blocks))
    if keys:
        pairs = [(finite(variant_blocks[k]), finite(baseline_blocks[k])) for k in keys]
    else:
        joined = [
            np.concatenate([finite(b) for b in blocks.values()]) if blocks else np.empty(0)
            for blocks in (variant_blocks, baseline_blocks)
        ]
        pairs = [(joined[0], joined[1])]
    variant_all = np.concatenate([v for v, _ in pairs])
    baseline_all = np.concatenate([b for _, b in pairs])
    out: dict[str, object] = {"value": None, "ci95": None, "blocks": 0, "blocks_agree": None, "block_values": []}
    if not variant_all.size or not baseline_all.size:
        return out
    with np.errstate(divide="ignore", invalid="ignore"):
        num, den = (variant_all, baseline_all) if higher_is_better else (baseline_all, variant_all)
        out["value"] = float(np.float64(num.mean()) / np.float64(den.mean()))
    # One autocorrelation for every block of the level, both sides: a 10-second block alone estimates it so
    # poorly that an interval could rest on one or two effective seconds.
    rho = lag1([x for pair in pairs for x in pair])
    logs = []
    for v, b in pairs:
        mv, mb = series_mean(v, rho=rho), series_mean(b, rho=rho)
        pair = _pair(mv, mb, higher_is_better) if mv is not None and mb is not None else None
        if pair is not None:
            logs.append(pair)
    out.update(pool_log_ratios(logs, alpha))
    return out


def pool_log_ratios(logs: list[tuple[float, float, float]], alpha: float = 0.05) -> dict:
    """Pairs' log ratios ``(log ratio, its variance, its degrees of freedom)`` pooled: ``{"blocks", "block_values",
    "blocks_agree", "value", "ci95"}`` (random-effects weights; Cochran's Q for agreement; module docstring). With no
    pair only ``blocks`` and ``block_values``; with one, ``blocks_agree`` is None."""
    out: dict[str, object] = {"blocks": len(logs), "block_values": [math.exp(y) for y, _, _ in logs]}
    if not logs:
        return out
    y = np.array([p[0] for p in logs])
    var = np.array([p[1] for p in logs])
    df = float(sum(p[2] for p in logs))
    out["blocks_agree"] = None
    if len(logs) > 1:
        w = 1.0 / var
        fixed = float((w * y).sum() / w.sum())
        q = float((w * (y - fixed) ** 2).sum())
        k = len(logs)
        tau2 = max(0.0, (q - (k - 1)) / float(w.sum() - (w**2).sum() / w.sum()))
        # Each pair's variance is itself estimated (t, not normal): the Q threshold grows with that uncertainty.
        smallest = min(p[2] for p in logs)
        critical = (
            t_quantile(1.0 - alpha / 2.0, smallest) ** 2
            if k == 2
            else chi2_quantile(1.0 - alpha, k - 1) * (smallest / (smallest - 2.0) if smallest > 2.0 else math.inf)
        )
        out["blocks_agree"] = bool(q <= critical)
        out["q"] = q
        var = var + tau2
    w = 1.0 / var
    centre = float((w * y).sum() / w.sum())
    half = t_quantile(1.0 - alpha / 2.0, max(df, 1.0)) / math.sqrt(float(w.sum()))
    out["value"], out["ci95"] = math.exp(centre), [math.exp(centre - half), math.exp(centre + half)]
    return out

"""Distribution summaries with bootstrap confidence intervals, throughput rate samples, Student's t quantile.

Pure functions over numpy (no Locust, no scipy). Every random step takes an explicit ``seed`` so a report
re-rendered from the same run directory shows the same intervals.

Conventions
-----------
* Percentiles are ``np.percentile``'s default (``method="linear"``, i.e. type 7 of Hyndman & Fan): the same
  numbers every summary reports, so a figure and its CI always talk about the same estimator.
* Non-finite values and ``None`` are dropped before anything is computed (failed requests carry NaN latencies;
  they are counted elsewhere, never silently averaged in here).
* Bootstrap intervals are percentile intervals: the ``alpha/2`` and ``1 - alpha/2`` quantiles (linear) of the
  statistic over ``n_boot`` resamples drawn with replacement, the same size as the sample.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from statistics import NormalDist
from typing import Any

import numpy as np

__all__ = [
    "LARGE",
    "SortedSample",
    "Statistic",
    "bootstrap_distribution",
    "finite",
    "mean_of",
    "occupancy_samples",
    "percentile_interval",
    "percentile_of",
    "percentile_stat",
    "rate_samples",
    "resample_indices",
    "summarize",
    "t_quantile",
    "t_sf",
    "weighted_percentiles",
]

# A numpy-style reducer: statistic(values) is one number, statistic(resamples, axis=1) one per row when it
# accepts ``axis`` (np.mean, np.median, percentile_stat). numpy's overloaded signatures admit no narrower type.
Statistic = Callable[..., Any]

PERCENTILES = (50, 95, 99)
DEFAULT_N_BOOT = 2000
# Resample matrices are built in chunks of at most this many elements (about 16 MB of float64), so a
# 100 000-request step does not allocate n_boot x n at once.
_CHUNK_ELEMENTS = 2_000_000


def finite(values: Iterable[float] | np.ndarray | None) -> np.ndarray:
    """The finite values as a 1-D float array (``None``, NaN and +-inf dropped)."""
    if values is None:
        return np.empty(0)
    if isinstance(values, np.ndarray) and values.dtype.kind in "fiu":
        array = values.astype(float, copy=False).ravel()
    else:
        array = np.asarray([v for v in values if v is not None], dtype=float).ravel()
    return array[np.isfinite(array)]


def percentile_of(values, q: float) -> float | None:
    """The ``q``-th percentile of the finite values; None when there is none."""
    array = finite(values)
    return float(np.percentile(array, q)) if array.size else None


def mean_of(values) -> float | None:
    """The mean of the finite values; None when there is none."""
    array = finite(values)
    return float(array.mean()) if array.size else None


def percentile_stat(q: float) -> Statistic:
    """A statistic computing the ``q``-th percentile exactly like ``np.percentile`` (linear), vectorisable.

    It accepts ``axis=``, so :func:`bootstrap_distribution` evaluates all resamples in one call.
    """
    return functools.partial(np.percentile, q=q)


def resample_indices(n: int, n_boot: int, rng: np.random.Generator):
    """Index matrices ``(rows, n)`` drawn with replacement, ``n_boot`` rows in total."""
    rows_per_chunk = max(1, _CHUNK_ELEMENTS // max(n, 1))
    done = 0
    while done < n_boot:
        rows = min(rows_per_chunk, n_boot - done)
        yield rng.integers(0, n, size=(rows, n))
        done += rows


def _apply(statistic: Statistic, samples: np.ndarray) -> np.ndarray:
    """``statistic`` of every row of ``samples``: one vectorised call when it takes ``axis``, else a loop."""
    try:
        out = np.asarray(statistic(samples, axis=1), dtype=float)
        if out.shape == (samples.shape[0],):
            return out
    except TypeError:
        pass
    return np.fromiter((statistic(row) for row in samples), dtype=float, count=samples.shape[0])


def bootstrap_distribution(
    values,
    statistic: Statistic,
    n_boot: int = DEFAULT_N_BOOT,
    rng: np.random.Generator | int | None = 0,
) -> np.ndarray:
    """``n_boot`` bootstrap replicates of ``statistic`` over the finite ``values`` (empty array if none).

    ``statistic`` receives a 1-D array; if it also accepts ``axis=`` (``np.mean``, ``np.median``,
    :func:`percentile_stat`) it is called once per chunk of resamples with ``axis=1`` instead.
    """
    array = finite(values)
    if array.size == 0 or n_boot <= 0:
        return np.empty(0)
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    parts = [_apply(statistic, array[idx]) for idx in resample_indices(array.size, n_boot, rng)]
    return np.concatenate(parts)


def percentile_interval(replicates: np.ndarray, alpha: float = 0.05) -> tuple[float, float] | None:
    """The ``(alpha/2, 1 - alpha/2)`` quantiles of bootstrap replicates; None if there are none."""
    replicates = np.asarray(replicates, dtype=float)
    replicates = replicates[~np.isnan(replicates)]
    if replicates.size == 0:
        return None
    lo, hi = np.quantile(replicates, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


LARGE = 1_000  # beyond this many values, intervals come from order statistics, not resampling


class SortedSample:
    """Percentiles exactly as ``np.percentile`` (linear) of the values, each counted ``weights`` times: weighted
    values are sorted once and searched; unweighted ones are only partitioned around the ranks asked for, in
    place (pass an array the sample may reorder)."""

    def __init__(self, values: np.ndarray, weights: np.ndarray | None = None):
        if weights is not None and np.all(weights == 1):
            weights = None
        if weights is None:
            self.values = values
            self.cum = None
            self.total = float(self.values.size)
        else:
            order = np.argsort(values, kind="stable")
            self.values, self.cum = values[order], np.cumsum(weights[order])
            self.total = float(self.cum[-1])

    def _at(self, rank: np.ndarray) -> np.ndarray:
        """The value at 0-based rank(s) of the repeated sample."""
        if self.cum is None:
            return self.values[rank]
        return self.values[np.searchsorted(self.cum, rank + 1)]

    def percentiles(self, qs) -> np.ndarray:
        h = (self.total - 1) * np.asarray(qs, dtype=float) / 100.0
        lo = np.floor(h).astype(np.int64)
        hi = np.ceil(h).astype(np.int64)
        if self.cum is None:  # O(n) selection of just these ranks, in place
            self.values.partition(np.unique(np.concatenate([lo, hi])))
        v_lo, v_hi = self._at(lo), self._at(hi)
        return v_lo + (h - lo) * (v_hi - v_lo)


def weighted_percentiles(values: np.ndarray, weights: np.ndarray, qs) -> np.ndarray:
    """``np.percentile(np.repeat(values, weights), qs)`` (linear) without building the repeated array."""
    return SortedSample(np.array(values, dtype=float), np.asarray(weights, dtype=float)).percentiles(qs)


def _large_sample_figures(sample: SortedSample, mean: float, sd: float, n: int, alpha: float) -> dict:
    """P50/P95/P99 with distribution-free intervals (the binomial ranks around each) and a normal interval of
    the mean: exact enough beyond ``LARGE`` values, and no resampling of millions of them. Every rank in one
    selection pass (one partition of the array, not one per interval)."""
    z = NormalDist().inv_cdf(1 - alpha / 2)
    bounds = []
    for q in PERCENTILES:
        p = q / 100.0
        half = z * math.sqrt(p * (1 - p) / n)
        bounds += [100 * max(p - half, 0.0), 100 * min(p + half, 1.0)]
    values = [float(x) for x in sample.percentiles(list(PERCENTILES) + bounds)]
    points, cis = values[: len(PERCENTILES)], values[len(PERCENTILES) :]
    ci95 = {f"p{q}": cis[2 * i : 2 * i + 2] for i, q in enumerate(PERCENTILES)}
    ci95["mean"] = [mean - z * sd / math.sqrt(n), mean + z * sd / math.sqrt(n)]
    return {**{f"p{q}": point for q, point in zip(PERCENTILES, points, strict=False)}, "ci95": ci95}


def summarize(values, n_boot: int = DEFAULT_N_BOOT, seed: int = 0, alpha: float = 0.05, weights=None) -> dict:
    """``{p50, p95, p99, mean, n, ci95: {p50: [lo, hi], p95: [...], p99: [...], mean: [...]}}``.

    Point figures are computed on the finite values exactly as ``np.percentile`` (linear) and ``np.mean`` do;
    ``weights`` (integer counts, e.g. the tokens that share one inter-token latency) count each value that
    many times. Up to ``LARGE`` values the four intervals come from the same ``n_boot`` resamples (percentile
    bootstrap, ``seed``); beyond, from order statistics (``_large_sample_figures``). The key is called ``ci95``
    whatever ``alpha`` is, because the report and summary.json say so. With no finite values every figure is
    None and ``n`` is 0; with one value the point figures are that value and intervals None.
    """
    names = ("p50", "p95", "p99", "mean")
    if weights is not None and np.all(np.asarray(weights) == 1):
        weights = None
    if weights is not None:
        array, weights = np.asarray(values, dtype=float), np.asarray(weights, dtype=float)
        keep = np.isfinite(array) & np.isfinite(weights) & (weights > 0)
        array, weights = array[keep], weights[keep]
        if weights.sum() <= LARGE:
            array, weights = np.repeat(array, weights.astype(np.int64)), None
    else:
        array = finite(values)
    if array.size == 0:
        return {"p50": None, "p95": None, "p99": None, "mean": None, "n": 0, "ci95": {k: None for k in names}}
    if weights is not None or array.size > LARGE:
        mean = float(np.average(array, weights=weights))
        sd = (
            float(array.std())
            if weights is None
            else math.sqrt(float(np.average((array - mean) ** 2, weights=weights)))
        )
        sample = SortedSample(array, weights)  # reorders ``array`` in place when unweighted
        figures = _large_sample_figures(sample, mean, sd, array.size, alpha)
        return {
            "p50": figures["p50"],
            "p95": figures["p95"],
            "p99": figures["p99"],
            "mean": mean,
            "n": int(sample.total),
            "ci95": figures["ci95"],
        }
    p50, p95, p99 = (float(x) for x in np.percentile(array, PERCENTILES))
    out: dict[str, object] = {"p50": p50, "p95": p95, "p99": p99, "mean": float(array.mean()), "n": int(array.size)}
    if array.size < 2:
        out["ci95"] = {k: None for k in names}
        return out
    rng = np.random.default_rng(seed)
    reps = []
    for idx in resample_indices(array.size, n_boot, rng):
        samples = array[idx]
        pct = np.percentile(samples, PERCENTILES, axis=1)  # shape (3, rows)
        reps.append(np.vstack([pct, samples.mean(axis=1)]))
    replicates = np.concatenate(reps, axis=1)
    ci95 = {}
    for name, row in zip(names, replicates, strict=False):
        interval = percentile_interval(row, alpha)
        assert interval is not None  # replicates of two or more finite values
        lo, hi = interval
        ci95[name] = [lo, hi]
    out["ci95"] = ci95
    return out


def rate_samples(event_times, event_counts, start: float, end: float, bin_s: float = 1.0) -> np.ndarray:
    """Per-bin rates (count per second) of events whose time falls in ``[start, end)``.

    The window is cut into ``k = max(1, round((end - start) / bin_s))`` bins of equal width
    ``w = (end - start) / k`` (so ``w`` is ``bin_s`` up to rounding, and no partial bin is dropped or
    over-weighted); bin ``j`` is ``[start + j*w, start + (j+1)*w)``. ``event_counts`` gives each event's weight
    (e.g. tokens in a chunk); ``None`` counts each event once. The mean of the returned rates is exactly the
    aggregate rate ``sum(counts in window) / (end - start)``; ``rates.series_mean_ci`` gives its interval with the
    bins' time correlation accounted for (docs/verdicts-and-gates.md, "Speed-up").
    An empty array when the window is empty or not finite.
    """
    if not (math.isfinite(start) and math.isfinite(end)) or end <= start or bin_s <= 0:
        return np.empty(0)
    times = np.asarray(event_times, dtype=float).ravel()
    counts = np.ones_like(times) if event_counts is None else np.asarray(event_counts, dtype=float).ravel()
    if counts.shape != times.shape:
        raise ValueError(f"event_counts has {counts.size} entries but event_times has {times.size}")
    k = max(1, round((end - start) / bin_s))
    width = (end - start) / k
    rates = np.zeros(k)
    # In slices: a night's worth of token arrivals never needs more than a slice's worth of temporaries.
    for first in range(0, times.size, _CHUNK_ELEMENTS):
        t, c = times[first : first + _CHUNK_ELEMENTS], counts[first : first + _CHUNK_ELEMENTS]
        inside = (t >= start) & (t < end) & np.isfinite(c)
        index = np.minimum(((t[inside] - start) / width).astype(np.int64), k - 1)  # clip float round-off
        rates += np.bincount(index, weights=c[inside], minlength=k)
    return rates / width


def occupancy_samples(starts, ends, start: float, end: float, bin_s: float = 1.0) -> np.ndarray:
    """Per-bin mean number of intervals ``[starts[i], ends[i]]`` open (e.g. requests in flight), over the bins of
    ``[start, end)`` that ``rate_samples`` uses; intervals with a NaN end are left out. Their mean is the mean number
    open over the window. An empty array when the window is empty or not finite."""
    if not (math.isfinite(start) and math.isfinite(end)) or end <= start or bin_s <= 0:
        return np.empty(0)
    a = np.asarray(starts, dtype=float).ravel()
    b = np.asarray(ends, dtype=float).ravel()
    keep = np.isfinite(a) & np.isfinite(b) & (b > a)
    a, b = a[keep], b[keep]
    k = max(1, round((end - start) / bin_s))
    edges = start + (end - start) / k * np.arange(k + 1)
    # The time each interval spent open before every edge; its differences are the open time per bin.
    open_before = np.zeros(k + 1)
    step = max(_CHUNK_ELEMENTS // (k + 1), 1)  # intervals per slice: a slice's temporaries stay bounded
    for first in range(0, a.size, step):
        lo, hi = a[first : first + step], b[first : first + step]
        open_before += np.clip(edges[:, None] - lo[None, :], 0.0, (hi - lo)[None, :]).sum(axis=1)
    return np.diff(open_before) / ((end - start) / k)


# -- Student's t quantile (scipy is not a dependency) -------------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 100_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta ``I_x(a, b)``."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """Upper tail ``P(T > t)`` of Student's t with ``df`` degrees of freedom (``t >= 0``)."""
    return 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df > 0`` degrees of freedom (non-integer df allowed).

    Inverts the exact distribution function, written through the regularised incomplete beta function
    (continued fraction, relative tolerance 1e-15), by bisection to 1e-13 relative in t: the result agrees with
    the closed forms for df = 1 and 2 and with published tables to better than 1e-9 (df=10, p=0.975 gives
    2.228139; df=30 gives 2.042272). For ``df > 1e7`` the normal quantile is returned (error below 1e-6).
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if not df > 0:
        raise ValueError(f"df must be positive, got {df}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if df > 1e7:
        return NormalDist().inv_cdf(p)
    tail = 1.0 - p
    lo, hi = 0.0, max(2.0, NormalDist().inv_cdf(p))
    while t_sf(hi, df) > tail:
        lo, hi = hi, hi * 2.0
    for _ in range(400):
        mid = 0.5 * (lo + hi)
        if t_sf(mid, df) > tail:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * hi:
            break
    return 0.5 * (lo + hi)

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
    "binned_rates",
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


def finite(values: Iterable[float] | np.ndarray | None, copy: bool = True) -> np.ndarray:
    """The finite values as a 1-D float array (``None``, NaN and +-inf dropped). ``copy=False``: a float array
    whose values are all finite comes back itself (the caller must not modify it)."""
    if values is None:
        return np.empty(0)
    if isinstance(values, np.ndarray) and values.dtype.kind in "fiu":
        array = values.astype(float, copy=False).ravel()
    else:
        array = np.asarray([v for v in values if v is not None], dtype=float).ravel()
    keep = np.isfinite(array)
    return array if not copy and keep.all() else array[keep]


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
    values are sorted once and searched; unweighted ones are never reordered or copied whole (``select``)."""

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

    def percentiles(self, qs) -> np.ndarray:
        h = (self.total - 1) * np.asarray(qs, dtype=float) / 100.0
        lo = np.floor(h).astype(np.int64)
        hi = np.ceil(h).astype(np.int64)
        ranks = np.concatenate([lo, hi])
        # the value at each 0-based rank of the (repeated) sample
        at = select(self.values, ranks) if self.cum is None else self.values[np.searchsorted(self.cum, ranks + 1)]
        v_lo, v_hi = at[: lo.size], at[lo.size :]
        return v_lo + (h - lo) * (v_hi - v_lo)


_SELECT_SAMPLE = 65_536  # values sampled to bracket the ranks asked for
_SELECT_SLACK = 1_024  # sample positions either side of a rank's estimate: 8 of its standard errors or more


def select(values: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """The values at 0-based ``ranks`` of the sorted finite ``values`` (``np.sort(values)[ranks]``), without
    reordering them or copying them whole: a regular sample brackets each group of nearby ranks, and only the
    values inside a bracket are partitioned (a few percent of tens of millions). A bracket that misses its ranks
    (a sample unlike the whole) falls back on partitioning a copy."""
    ranks = np.asarray(ranks, dtype=np.int64)
    n = values.size
    if n <= 4 * _SELECT_SAMPLE:
        return np.partition(values, np.unique(ranks))[ranks]
    sample = np.sort(values[:: n // _SELECT_SAMPLE])
    m = sample.size
    out = np.empty(ranks.size)
    wanted = np.unique(ranks)
    at = (wanted * m) // n  # each rank's place in the sample
    groups = np.split(wanted, np.flatnonzero(np.diff(at) > _SELECT_SLACK) + 1)
    for group in groups:
        first = int(group[0] * m // n) - _SELECT_SLACK
        last = int(group[-1] * m // n) + _SELECT_SLACK
        low = sample[first] if first >= 0 else -np.inf
        high = sample[last] if last < m else np.inf
        below = int(np.count_nonzero(values < low))
        inside = values[(values >= low) & (values <= high)]
        if below <= group[0] and below + inside.size > group[-1]:
            inside.partition(group - below)
            found = inside[group - below]
        else:
            found = np.partition(values, group)[group]
        for rank, value in zip(group, found, strict=True):
            out[ranks == rank] = value
    return out


def weighted_percentiles(values: np.ndarray, weights: np.ndarray, qs) -> np.ndarray:
    """``np.percentile(np.repeat(values, weights), qs)`` (linear) without building the repeated array."""
    return SortedSample(np.array(values, dtype=float), np.asarray(weights, dtype=float)).percentiles(qs)


def _large_sample_figures(sample: SortedSample, mean: float, sd: float, n: int, alpha: float) -> dict:
    """P50/P95/P99 with distribution-free intervals (the binomial ranks around each) and a normal interval of
    the mean: exact enough beyond ``LARGE`` values, and no resampling of millions of them. Every rank in one
    selection (``select``), not one per interval."""
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


def _sd(values: np.ndarray, mean: float, weights: np.ndarray | None) -> float:
    """The (weighted) population standard deviation around ``mean``, in slices: a step's tens of millions of
    inter-token latencies never need a copy of themselves (two, in NumPy's ``std``)."""
    total = 0.0
    for first in range(0, values.size, _CHUNK_ELEMENTS):
        deviation = values[first : first + _CHUNK_ELEMENTS] - mean
        deviation *= deviation
        if weights is not None:
            deviation *= weights[first : first + _CHUNK_ELEMENTS]
        total += float(deviation.sum())
    return math.sqrt(total / (values.size if weights is None else float(weights.sum())))


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
        array = finite(values, copy=False)  # read, never modified
    if array.size == 0:
        return {"p50": None, "p95": None, "p99": None, "mean": None, "n": 0, "ci95": {k: None for k in names}}
    if weights is not None or array.size > LARGE:
        mean = float(np.average(array, weights=weights))
        sd = _sd(array, mean, weights)
        sample = SortedSample(array, weights)
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
    times = np.asarray(event_times, dtype=float).ravel()
    counts = np.ones_like(times) if event_counts is None else np.asarray(event_counts).ravel()
    if counts.shape != times.shape:
        raise ValueError(f"event_counts has {counts.size} entries but event_times has {times.size}")
    # In slices: a night's worth of token arrivals never needs more than a slice's worth of temporaries.
    slices = (
        (times[first : first + _CHUNK_ELEMENTS], counts[first : first + _CHUNK_ELEMENTS])
        for first in range(0, times.size, _CHUNK_ELEMENTS)
    )
    return binned_rates(slices, start, end, bin_s)


def binned_rates(
    slices: Iterable[tuple[np.ndarray, np.ndarray]], start: float, end: float, bin_s: float = 1.0
) -> np.ndarray:
    """``rate_samples`` of events given as slices ``(times, counts)``, so that no array of them all need exist."""
    if not (math.isfinite(start) and math.isfinite(end)) or end <= start or bin_s <= 0:
        return np.empty(0)
    k = max(1, round((end - start) / bin_s))
    width = (end - start) / k
    rates = np.zeros(k)
    for t, counts in slices:
        c = counts.astype(float, copy=False)
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
    k = max(1, round((end - start) / bin_s))
    edges = (end - start) / k * np.arange(k + 1)
    # The time the intervals spent open before every edge (its differences are the open time per bin): each
    # interval open before edge e adds e - start_i, less e - end_i once it has closed. Sorted sums make it
    # O(n log n) whatever the bins; times from the window's start keep the sums' rounding to nanoseconds.
    open_before = _time_before(a[keep] - start, edges) - _time_before(b[keep] - start, edges)
    return np.diff(open_before) / ((end - start) / k)


def _time_before(times: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """``sum(max(edge - t, 0) for t in times)`` at every edge."""
    times = np.sort(times)
    sums = np.concatenate([[0.0], np.cumsum(times)])
    count = np.searchsorted(times, edges)
    return count * edges - sums[count]


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

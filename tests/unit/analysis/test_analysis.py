"""Analysis functions on synthetic data with known answers (stats, compare, curves, steady). Seeded; no timing."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from locust_llm.analysis.curves import knee_level
from locust_llm.analysis.speedup import crossover_level, ratio_ci, recommendation, speedup_state
from locust_llm.analysis.stats import (
    bootstrap_distribution,
    percentile_interval,
    percentile_stat,
    rate_samples,
    summarize,
    t_quantile,
)
from locust_llm.analysis.steady import drift

UNIT = "concurrent streams"


# -- stats -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 10, 33, 100, 1001])
def test_summarize_percentiles_equal_numpy(n):
    rng = np.random.default_rng(n)
    for data in (rng.lognormal(3.0, 0.7, n), rng.integers(0, 5, n).astype(float), rng.normal(0, 1, n) * 1e3):
        s = summarize(data, n_boot=200)
        p50, p95, p99 = np.percentile(data, [50, 95, 99])
        assert s["n"] == n
        assert s["p50"] == p50 and s["p95"] == p95 and s["p99"] == p99  # exact, not approximate
        assert s["mean"] == pytest.approx(float(np.mean(data)), rel=1e-12, abs=1e-12)
        # same as the reference written out by hand: linear interpolation between order statistics
        ordered = np.sort(data)
        for q, got in ((50, s["p50"]), (95, s["p95"]), (99, s["p99"])):
            h = (n - 1) * q / 100
            lo = math.floor(h)
            ref = ordered[lo] + (h - lo) * (ordered[min(lo + 1, n - 1)] - ordered[lo])
            assert got == pytest.approx(ref, rel=1e-12, abs=1e-12)


def test_summarize_drops_non_finite_and_handles_tiny_samples():
    s = summarize([1.0, float("nan"), None, 3.0, float("inf")], n_boot=100)
    assert s["n"] == 2 and s["p50"] == 2.0 and s["mean"] == 2.0
    assert set(s["ci95"]) == {"p50", "p95", "p99", "mean"}
    for lo, hi in s["ci95"].values():
        assert 1.0 <= lo <= hi <= 3.0
    one = summarize([5.0])
    assert one["p99"] == 5.0 and one["ci95"]["mean"] is None
    empty = summarize([])
    assert empty["n"] == 0 and empty["p50"] is None and empty["ci95"]["p95"] is None


def test_summarize_cis_bracket_the_estimates():
    data = np.random.default_rng(7).lognormal(2.0, 0.5, 500)
    s = summarize(data)
    for name in ("p50", "p95", "p99", "mean"):
        lo, hi = s["ci95"][name]
        assert lo <= s[name] <= hi
    assert summarize(data) == s  # seeded: identical on re-run


def bootstrap_ci(values, statistic, seed=0, alpha=0.05):
    return percentile_interval(bootstrap_distribution(np.asarray(values, dtype=float), statistic, 2000, seed), alpha)


def test_bootstrap_basics():
    data = np.random.default_rng(3).normal(10.0, 2.0, 400)
    vectorised = bootstrap_ci(data, np.mean, seed=5)
    looped = bootstrap_ci(data, lambda a: float(np.mean(a)), seed=5)  # no axis= -> one call per resample
    assert vectorised == pytest.approx(looped, rel=1e-12)
    lo, hi = vectorised
    assert lo < 10.0 < hi and hi - lo < 0.6  # se = 0.1 -> width ~0.4
    assert bootstrap_ci(data, percentile_stat(95)) == pytest.approx(
        bootstrap_ci(data, lambda a: float(np.percentile(a, 95))), rel=1e-12
    )
    narrower = bootstrap_ci(data, np.mean, alpha=0.5)
    assert lo < narrower[0] < narrower[1] < hi
    assert bootstrap_ci(np.full(10, 3.0), np.mean) == (3.0, 3.0)


def test_rate_samples_bins_half_open_and_mean_is_aggregate_rate():
    times = [0.0, 0.5, 1.0, 1.999, 2.0, 2.5, 3.0, -0.1]
    counts = [1, 2, 3, 4, 5, 6, 100, 100]
    rates = rate_samples(times, counts, 0.0, 3.0)
    assert rates.tolist() == [3.0, 7.0, 11.0]  # 3.0 and -0.1 are outside [0, 3)
    assert rates.mean() == pytest.approx(21 / 3.0)
    half = rate_samples(times, counts, 0.0, 3.0, bin_s=0.5)
    assert half.tolist() == [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
    # a window that is not a whole number of bins: equal-width bins, mean still total / window
    rng = np.random.default_rng(0)
    t = rng.uniform(0, 10.4, 5000)
    r = rate_samples(t, None, 0.0, 10.4)
    assert r.size == 10 and r.mean() == pytest.approx(5000 / 10.4)
    assert rate_samples([1.0], None, 5.0, 5.0).size == 0


@pytest.mark.parametrize(
    "df,expected",
    [(1, 12.7062), (2, 4.3027), (5, 2.5706), (10, 2.2281), (30, 2.0423), (120, 1.9799), (1e6, 1.9600), (1e9, 1.9600)],
)
def test_t_quantile_matches_tables(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)


def test_t_quantile_closed_forms_and_symmetry():
    for p in (0.6, 0.9, 0.95, 0.975, 0.995, 0.9995):
        assert t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-9)
        assert t_quantile(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-9)
        assert t_quantile(1 - p, 7.5) == pytest.approx(-t_quantile(p, 7.5), rel=1e-12)
    assert t_quantile(0.95, 10) == pytest.approx(1.8125, abs=1e-4)
    assert t_quantile(0.5, 3) == 0.0
    assert round(t_quantile(0.975, 10), 3) == 2.228 and round(t_quantile(0.975, 30), 3) == 2.042
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)


# -- compare -----------------------------------------------------------------------------------------------


def test_ratio_ci_direction_latency_vs_throughput():
    rng = np.random.default_rng(11)
    baseline_tpot = rng.lognormal(math.log(40.0), 0.1, 300)  # ms
    variant_tpot = rng.lognormal(math.log(20.0), 0.1, 300)  # twice as fast
    latency = ratio_ci(variant_tpot, baseline_tpot, np.median, higher_is_better=False, n_boot=1000, seed=1)
    assert 1.9 < latency["value"] < 2.1 and latency["ci95"][0] > 1.0
    # the same data read as higher-is-better says the variant is worse (0.5x): the flag sets the direction
    wrong_way = ratio_ci(variant_tpot, baseline_tpot, np.median, higher_is_better=True, n_boot=1000, seed=1)
    assert wrong_way["value"] == pytest.approx(1 / latency["value"]) and wrong_way["ci95"][1] < 1.0
    baseline_tps, variant_tps = 1000.0 / baseline_tpot, 1000.0 / variant_tpot
    throughput = ratio_ci(variant_tps, baseline_tps, np.mean, higher_is_better=True, n_boot=1000, seed=1)
    assert 1.9 < throughput["value"] < 2.1 and throughput["ci95"][0] > 1.0


def test_ratio_ci_contains_true_ratio_for_large_sample():
    rng = np.random.default_rng(2024)
    variant = rng.normal(150.0, 20.0, 4000)  # true mean 150
    baseline = rng.normal(100.0, 15.0, 4000)  # true mean 100 -> true speed-up 1.5
    result = ratio_ci(variant, baseline, np.mean, higher_is_better=True, n_boot=2000, seed=0)
    lo, hi = result["ci95"]
    assert lo < 1.5 < hi and hi - lo < 0.02
    assert result == ratio_ci(variant, baseline, np.mean, True, 2000, 0)  # seeded
    assert ratio_ci([], baseline, np.mean, True, 100, 0) == {"value": None, "ci95": None}
    assert ratio_ci([2.0], [1.0], np.mean, True, 100, 0) == {"value": 2.0, "ci95": None}


SPEEDUPS = {1: 2.0, 2: 1.8, 4: 1.3, 8: 0.8, 16: 0.8}


def _tpot_samples(seed=42, n=200):
    """Per-request TPOT (ms) per level; the variant's TPOT is the baseline's divided by the speed-up."""
    rng = np.random.default_rng(seed)
    baseline, variant = {}, {}
    for level, speedup in SPEEDUPS.items():
        base = 20.0 * (1 + level / 8)
        baseline[level] = rng.lognormal(math.log(base), 0.1, n)
        variant[level] = rng.lognormal(math.log(base / speedup), 0.1, n)
    return variant, baseline


def test_crossover_and_recommendation_better_then_worse():
    variant, baseline = _tpot_samples()
    steps = [
        {"level": level, "speedup": ratio_ci(variant[level], baseline[level], np.median, False, 1000, i)}
        for i, level in enumerate(sorted(variant))
    ]
    assert [s["level"] for s in steps] == [1, 2, 4, 8, 16]
    for step in steps:
        assert step["speedup"]["ci95"][0] < SPEEDUPS[step["level"]] < step["speedup"]["ci95"][1]
    assert [speedup_state(s) for s in steps] == ["better", "better", "better", "worse", "worse"]
    xo = crossover_level(steps)
    assert xo == 8
    text = recommendation("spec-k4", "baseline", steps, xo, UNIT)
    assert re.fullmatch(
        r"enable spec-k4 up to 4 concurrent streams \((1\.9\d|2\.0\d?)x at 1, 1\.[23]\d?x at 4\); "
        r"disable from 8 \(0\.[78]\d?x, CI 0\.\d+\u20130\.\d+\)",
        text,
    ), text


def _step(level, value, lo, hi):
    return {"level": level, "speedup": {"value": value, "ci95": [lo, hi]}}


def test_crossover_rule():
    # unsorted input; a CI that merely touches 1 is not a crossover; missing CIs never qualify
    steps = [
        _step(16, 0.7, 0.6, 0.8),
        _step(4, 0.9, 0.8, 1.0),
        _step(8, 0.85, 0.8, 0.99),
        _step(1, 1.5, 1.4, 1.6),
        {"level": 2, "speedup": {"value": 0.5, "ci95": None}},
    ]
    assert crossover_level(steps) == 8
    flat = [{"level": 1, "value": 1.2, "ci95": [1.1, 1.3]}, {"level": 2, "value": 1.0, "ci95": [0.9, 1.1]}]
    assert crossover_level(flat) is None  # top-level {"value", "ci95"} form is accepted too
    assert crossover_level([]) is None


def test_recommendation_cases():
    always = [_step(1, 1.9, 1.8, 2.0), _step(4, 1.5, 1.4, 1.6), _step(16, 1.2, 1.1, 1.3)]
    text = recommendation("spec-k4", "baseline", always, crossover_level(always), UNIT)
    assert text == "enable spec-k4 at every level judged, up to 16 concurrent streams (1.9x at 1, 1.2x at 16)"

    never = [_step(1, 0.8, 0.7, 0.9), _step(2, 0.7, 0.6, 0.8)]
    text = recommendation("spec-k4", "baseline", never, crossover_level(never), "req/s")
    assert text.startswith("disable spec-k4: slower than baseline at every level judged, 1 to 2 req/s")
    assert "enable" not in text

    unclear = [_step(0.5, 1.02, 0.95, 1.1), _step(1, 0.98, 0.9, 1.05)]
    text = recommendation("spec-k4", "baseline", unclear, crossover_level(unclear), "req/s")
    assert text.startswith("inconclusive:") and "0.98x to 1.02x" in text and "enable" not in text

    fades = [_step(1, 1.5, 1.3, 1.7), _step(2, 1.1, 1.05, 1.2), _step(4, 1.0, 0.9, 1.1), _step(8, 1.0, 0.95, 1.05)]
    text = recommendation("spec-k4", "baseline", fades, crossover_level(fades), UNIT)
    assert text == (
        "enable spec-k4 up to 2 concurrent streams (1.5x at 1, 1.1x at 2); no clear difference at 4, 8 (CIs include 1x)"
    )

    gap = [_step(1, 1.5, 1.3, 1.7), _step(2, 1.0, 0.9, 1.1), _step(4, 0.8, 0.7, 0.9)]
    text = recommendation("spec-k4", "baseline", gap, crossover_level(gap), UNIT)
    assert text == (
        "enable spec-k4 up to 1 concurrent streams (1.5x at 1); no clear difference at 2 (1.0x, CI "
        "0.9\u20131.1); disable from 4 (0.8x, CI 0.7\u20130.9)"
    )

    late = [_step(1, 1.0, 0.9, 1.1), _step(4, 0.8, 0.7, 0.9)]
    text = recommendation("spec-k4", "baseline", late, crossover_level(late), UNIT)
    assert text.startswith("disable spec-k4 from 4 concurrent streams (0.8x, CI 0.7\u20130.9)")

    bumpy = [_step(1, 1.5, 1.3, 1.7), _step(4, 0.8, 0.7, 0.9), _step(8, 1.3, 1.2, 1.4)]
    assert "not monotone" in recommendation("v", "b", bumpy, crossover_level(bumpy), UNIT)
    assert recommendation("v", "b", [], None, UNIT).startswith("no comparison")


# -- curves ------------------------------------------------------------------------------------------------


def test_knee_level_of_a_tpot_curve_rising_from_16():
    rng = np.random.default_rng(16)
    levels = [1, 2, 4, 8, 16, 32, 64]
    p95 = []
    for level in levels:
        # flat-ish (+1% per stream) up to 16, then growing like load^2.5
        centre = 20.0 * (1 + 0.01 * min(level, 16)) * max(1.0, level / 16) ** 2.5
        samples = rng.lognormal(math.log(centre), 0.05, 400)
        p95.append(summarize(samples, n_boot=100)["p95"])
    assert knee_level(levels, p95) == 16


def test_knee_rule_edges():
    levels = [1, 2, 4, 8, 16]
    assert knee_level(levels, [10.0 * lv**0.9 for lv in levels]) is None  # never faster than load
    assert knee_level(levels, [10.0 * lv for lv in levels]) is None  # exactly proportional is not a knee
    linear_after_4 = [10, 10.2, 10.5, 21, 42]  # closed-loop style: slope -> 1
    assert knee_level(levels, linear_after_4) is None
    assert knee_level(levels, linear_after_4, threshold=0.5) == 4
    assert knee_level([16, 1, 4, 2, 8], [60, 10, 11, 10.5, 12]) == 8  # unsorted input
    assert knee_level(levels, [10, None, 11, float("nan"), 60]) == 4  # missing points skipped
    assert knee_level([1], [10]) is None


# -- steady ------------------------------------------------------------------------------------------------


def test_drift_flat_noisy_series_is_steady():
    rng = np.random.default_rng(1)
    t = np.arange(0.0, 120.0, 0.5)
    d = drift(t, 50.0 + rng.normal(0.0, 5.0, t.size))
    assert d["steady"] is True
    assert d["ci95"][0] <= 0.0 <= d["ci95"][1]
    assert d["slope"] == pytest.approx(np.polyfit(t, 50.0 + np.random.default_rng(1).normal(0, 5, t.size), 1)[0])


def test_drift_strong_trend_is_not_steady():
    rng = np.random.default_rng(2)
    t = np.arange(0.0, 120.0, 0.5)
    y = 50.0 + 0.2 * t + rng.normal(0.0, 5.0, t.size)  # +24 over the window: ~40% of the mean
    d = drift(t, y)
    assert d["steady"] is False
    assert d["ci95"][0] > 0.0 and d["ci95"][0] < 0.2 < d["ci95"][1]
    assert d["relative_slope_per_min"] == pytest.approx(60 * d["slope"] / y.mean())
    # CI half-width is t(0.975, n-2) * se, se from the OLS residuals
    slope, intercept = np.polyfit(t, y, 1)
    resid = y - (intercept + slope * t)
    se = math.sqrt(resid @ resid / (t.size - 2) / ((t - t.mean()) @ (t - t.mean())))
    assert d["ci95"][1] - d["slope"] == pytest.approx(t_quantile(0.975, t.size - 2) * se, rel=1e-9)


def test_drift_small_significant_slope_on_lots_of_data_is_steady():
    rng = np.random.default_rng(3)
    t = np.arange(0.0, 120.0, 0.01)  # 12 000 samples
    y = 50.0 + 0.005 * t + rng.normal(0.0, 1.0, t.size)  # +0.6 over the window: 1.2% of the mean
    d = drift(t, y)
    assert d["ci95"][0] > 0.0  # statistically significant ...
    assert d["drift_fraction"] < 0.05 and d["steady"] is True  # ... but immaterial
    assert drift(t, y, tolerance=0.005)["steady"] is False


def test_drift_too_few_points():
    assert drift([], [])["steady"] is None
    assert drift([0.0, 1.0], [1.0, 2.0])["ci95"] is None
    assert drift([5.0, 5.0, 5.0], [1.0, 2.0, 3.0])["slope"] is None
    exact = drift([0.0, 1.0, 2.0], [1.0, 1.0, 1.0])
    assert exact["slope"] == 0.0 and exact["steady"] is True


def test_order_statistic_intervals_cover_the_true_percentile():
    """Beyond LARGE values, intervals come from order statistics: they must still cover about 95% of the time."""
    from locust_llm.analysis.stats import LARGE

    rng = np.random.default_rng(12)
    truth = {50: math.exp(0.0), 95: math.exp(1.6448536), 99: math.exp(2.3263479)}  # lognormal(0, 1)
    covered = {q: 0 for q in truth}
    trials = 300
    for _ in range(trials):
        figures = summarize(rng.lognormal(0.0, 1.0, 2 * LARGE))
        for q, value in truth.items():
            lo, hi = figures["ci95"][f"p{q}"]
            covered[q] += lo <= value <= hi
    for q, hits in covered.items():
        assert 0.90 <= hits / trials <= 0.99, (q, hits / trials)


def test_large_sample_percentiles_and_bounds_are_numpys_order_statistics():
    """Beyond LARGE values the points and the interval bounds come from one selection pass: each must equal
    numpy's linear percentile of the same data at the same (binomial) ranks."""
    from statistics import NormalDist

    from locust_llm.analysis.stats import LARGE

    data = np.random.default_rng(5).lognormal(0.0, 1.0, 2 * LARGE + 7)
    figures = summarize(data.copy())
    z, n = NormalDist().inv_cdf(0.975), data.size
    for q in (50, 95, 99):
        assert figures[f"p{q}"] == pytest.approx(np.percentile(data, q), rel=1e-12)
        half = z * math.sqrt(q / 100 * (1 - q / 100) / n)
        truth = np.percentile(data, [100 * max(q / 100 - half, 0.0), 100 * min(q / 100 + half, 1.0)])
        assert figures["ci95"][f"p{q}"] == pytest.approx(list(truth), rel=1e-12)


@pytest.mark.parametrize(
    "shape", ["random", "sorted", "reversed", "constant", "five values", "sample unlike the whole", "with NaN"]
)
def test_large_sample_selection_is_numpys_and_leaves_the_values_alone(shape):
    """Millions of values: the percentiles come from brackets a regular sample draws around each rank. Whatever
    the values' order (sorted, constant, a sample that sees only one value of the many), each must be the same
    order statistic numpy finds, and the caller's array must come back untouched (no reordering in place)."""
    from locust_llm.analysis.stats import select

    rng = np.random.default_rng(7)
    n = 1_000_003
    data = {
        "random": rng.lognormal(3.0, 0.4, n),
        "sorted": np.sort(rng.normal(size=n)),
        "reversed": np.sort(rng.normal(size=n))[::-1].copy(),
        "constant": np.full(n, 2.5),
        "five values": rng.integers(0, 5, n).astype(float),
        # every value the regular sample reads is 0, the others are not: its brackets miss, the fallback answers
        "sample unlike the whole": np.where(np.arange(n) % (n // 65_536) == 0, 0.0, rng.normal(10.0, 1.0, n)),
        "with NaN": np.where(rng.random(n) < 0.01, np.nan, rng.normal(size=n)),
    }[shape]
    before = data.copy()
    finite = data[np.isfinite(data)]
    ranks = np.array([0, 3, finite.size // 2, finite.size // 2 - 1, int(finite.size * 0.99), finite.size - 1])
    assert np.array_equal(select(finite, ranks), np.sort(finite)[ranks])
    figures = summarize(data)
    for q in (50, 95, 99):  # the same order statistics, interpolated as before (numpy's own lerp differs in ulps)
        assert figures[f"p{q}"] == pytest.approx(np.percentile(finite, q), rel=1e-12)
    assert np.array_equal(data, before, equal_nan=True)


def test_occupancy_is_the_hand_counted_requests_in_flight_per_bin():
    """Requests open over [1.7e9 + 0, +2], [+1, +3], [+0.5, +0.75] and one never closed, a 4 s window in 1 s
    bins: the mean number open in each bin, counted by hand; epoch times must not cost the sums their precision."""
    from locust_llm.analysis.stats import occupancy_samples

    t0 = 1_700_000_000.0
    starts = [t0 + 0.0, t0 + 1.0, t0 + 0.5, t0 + 2.0]
    ends = [t0 + 2.0, t0 + 3.0, t0 + 0.75, np.nan]
    got = occupancy_samples(starts, ends, t0, t0 + 4.0)
    assert got == pytest.approx([1.25, 2.0, 1.0, 0.0], abs=1e-9)
    assert occupancy_samples([t0], [t0 + 10.0], t0 + 2.0, t0 + 3.0, bin_s=0.5) == pytest.approx([1.0, 1.0], abs=1e-9)

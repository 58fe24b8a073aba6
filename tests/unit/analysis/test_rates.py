"""Throughput intervals that mean 95%: seeded synthetic series with a known answer (AR(1) noise)."""

import math

import numpy as np
import pytest

from locust_llm.analysis.rates import block_ratio_ci, chi2_quantile, series_mean, series_mean_ci

TRIALS = 200


def ar1(rng, n, phi, mean=100.0, sd=10.0):
    """A stationary AR(1) series: lag-1 correlation ``phi``, marginal sd ``sd``."""
    shocks = rng.normal(0.0, sd * math.sqrt(1.0 - phi**2), n)
    x = np.empty(n)
    x[0] = rng.normal(0.0, sd)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + shocks[i]
    return mean + x


@pytest.mark.parametrize("blocks", [1, 2])
def test_aa_false_exclusion_and_ab_coverage_with_correlated_seconds(blocks):
    rng = np.random.default_rng(20261130)
    excluded = covered = 0
    for _ in range(TRIALS):
        same = block_ratio_ci(
            {r: ar1(rng, 30, 0.8) for r in range(blocks)}, {r: ar1(rng, 30, 0.8) for r in range(blocks)}
        )
        excluded += not same["ci95"][0] <= 1.0 <= same["ci95"][1]
        faster = block_ratio_ci(
            {r: ar1(rng, 30, 0.8, 130.0, 13.0) for r in range(blocks)}, {r: ar1(rng, 30, 0.8) for r in range(blocks)}
        )
        covered += faster["ci95"][0] <= 1.3 <= faster["ci95"][1]
    print(f"blocks={blocks}: A/A excludes 1 in {excluded / TRIALS:.1%}, A/B covers 1.30 in {covered / TRIALS:.1%}")
    assert excluded / TRIALS <= 0.08
    assert covered / TRIALS >= 0.90


def test_two_short_blocks_share_one_autocorrelation_and_keep_a_usable_interval():
    """The default's shape: two 10-second blocks a side. Estimated per block, a lag-1 correlation from 10 values
    can come out near 1 and leave one effective second (a 0.15x-10.9x interval was seen on a real run); one
    estimate from all four blocks keeps the intervals honest and usable."""
    rng = np.random.default_rng(11)
    excluded, widths = 0, []
    for _ in range(TRIALS):
        same = block_ratio_ci({r: ar1(rng, 10, 0.5) for r in range(2)}, {r: ar1(rng, 10, 0.5) for r in range(2)})
        lo, hi = same["ci95"]
        excluded += not lo <= 1.0 <= hi
        widths.append(hi / lo)
    assert excluded / TRIALS <= 0.08
    assert np.percentile(widths, 95) < 3.0, np.percentile(widths, [50, 95])


def test_independent_bins_would_have_excluded_one_far_more_often():
    """The same A/A series judged as if the seconds were independent: the reason for the AR(1) correction."""
    rng = np.random.default_rng(7)
    naive = 0
    for _ in range(TRIALS):
        v, b = ar1(rng, 30, 0.8), ar1(rng, 30, 0.8)
        se = math.sqrt(v.var(ddof=1) / v.size / v.mean() ** 2 + b.var(ddof=1) / b.size / b.mean() ** 2)
        naive += abs(math.log(v.mean() / b.mean())) > 1.96 * se
    assert naive / TRIALS > 0.25


def test_interleaved_blocks_cancel_a_drift_that_sequential_blocks_take_for_a_speedup():
    rng = np.random.default_rng(3)
    drift = np.linspace(100.0, 160.0, 4 * 30)  # the machine speeds up over the run; both variants equal
    seconds = [drift[i * 30 : (i + 1) * 30] + rng.normal(0, 3, 30) for i in range(4)]
    sequential = block_ratio_ci({0: seconds[2], 1: seconds[3]}, {0: seconds[0], 1: seconds[1]})
    abba = block_ratio_ci({0: seconds[1], 1: seconds[2]}, {0: seconds[0], 1: seconds[3]})
    assert sequential["ci95"][0] > 1.0  # a false "faster"
    assert abba["ci95"][0] <= 1.0 <= abba["ci95"][1]


def test_blocks_that_disagree_beyond_their_noise_are_flagged():
    rng = np.random.default_rng(5)
    base = {0: 100 + rng.normal(0, 2, 30), 1: 100 + rng.normal(0, 2, 30)}
    flip = block_ratio_ci({0: 150 + rng.normal(0, 2, 30), 1: 70 + rng.normal(0, 2, 30)}, base)
    agree = block_ratio_ci({0: 120 + rng.normal(0, 2, 30), 1: 121 + rng.normal(0, 2, 30)}, base)
    assert flip["blocks_agree"] is False and agree["blocks_agree"] is True
    assert flip["ci95"][1] / flip["ci95"][0] > agree["ci95"][1] / agree["ci95"][0]  # the spread widens it
    assert [round(v, 1) for v in flip["block_values"]] == [pytest.approx(1.5, abs=0.05), pytest.approx(0.7, abs=0.05)]


def test_a_perfectly_steady_count_series_still_has_an_interval():
    ci = series_mean_ci(np.full(20, 50.0))
    assert ci[0] < 50.0 < ci[1]
    estimate = series_mean(np.full(20, 50.0))
    assert estimate.variance >= 50.0 / 20  # a count of 50 a second has at least Poisson spread


def test_unpaired_blocks_are_joined_and_too_few_bins_give_no_interval():
    joined = block_ratio_ci({0: np.full(10, 200.0)}, {5: np.full(10, 100.0)})
    assert joined["blocks"] == 1 and joined["value"] == pytest.approx(2.0)
    single = block_ratio_ci({0: np.array([200.0])}, {0: np.array([100.0])})
    assert single["value"] == pytest.approx(2.0) and single["ci95"] is None
    assert block_ratio_ci({}, {0: np.ones(5)})["value"] is None


def test_latency_orientation_inverts_the_ratio():
    lower = block_ratio_ci({0: np.full(20, 50.0)}, {0: np.full(20, 100.0)}, higher_is_better=False)
    assert lower["value"] == pytest.approx(2.0)


def test_chi2_quantile_matches_tables():
    assert chi2_quantile(0.95, 2) == pytest.approx(5.991, rel=0.01)
    assert chi2_quantile(0.95, 4) == pytest.approx(9.488, rel=0.01)

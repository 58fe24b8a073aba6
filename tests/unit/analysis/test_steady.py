"""A steadiness test that means what it says: seeded synthetic windows with a known answer (no trend, or a known
drift), through the same ``steady.drift`` the analysis uses; and open-loop steadiness judged on what the server
controls."""

import math

import numpy as np
import pytest

from locust_llm.analysis.rates import lag1
from locust_llm.analysis.steady import drift
from locust_llm.pipeline import finish_run
from locust_llm.records import RequestRecord
from tests.synthetic import window, write_run

RUNS = 500
SECONDS = 30
TIMES = np.arange(SECONDS) + 0.5


def ar1(rng, n, phi, sd, mean=100.0):
    """A stationary AR(1) series: lag-1 correlation ``phi``, marginal spread ``sd``."""
    shocks = rng.normal(0.0, sd * math.sqrt(1.0 - phi**2), n)
    x = np.empty(n)
    x[0] = rng.normal(0.0, sd)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + shocks[i]
    return mean + x


def unsteady_share(phi, sd, change, seed, autocorrelated=True):
    """Share of ``RUNS`` 30 s windows of per-second throughput (mean 100) called unsteady, with a linear drift of
    ``change`` (a fraction of the mean) from the first second to the last."""
    rng = np.random.default_rng(seed)
    ramp = 1.0 + change * (np.arange(SECONDS) / (SECONDS - 1) - 0.5)
    return np.mean(
        [
            drift(TIMES, ar1(rng, SECONDS, phi, sd) * ramp, autocorrelated=autocorrelated)["steady"] is False
            for _ in range(RUNS)
        ]
    )


def test_stationary_ar1_noise_is_rarely_called_a_drift():
    """phi 0.8, 12% spread, 30 s windows, no trend at all: at most 10% unsteady (measured 8.8%); an interval that
    takes the seconds as independent called 49.8% of them unsteady."""
    assert unsteady_share(0.8, 12.0, 0.0, seed=1) <= 0.10
    assert unsteady_share(0.8, 12.0, 0.0, seed=1, autocorrelated=False) >= 0.40


@pytest.mark.parametrize(("phi", "sd"), [(0.0, 4.0), (0.3, 2.0)])
def test_a_ten_percent_drift_is_caught(phi, sd):
    """A real 10% drift across a 30 s window is caught in at least 90% of windows when the seconds are no noisier than
    4% (independent) or 2% (lag-1 correlation 0.3); stationary windows of that noise stay under 10% unsteady."""
    assert unsteady_share(phi, sd, 0.10, seed=2) >= 0.90
    assert unsteady_share(phi, sd, 0.0, seed=3) <= 0.10


def test_at_12_percent_and_phi_0_8_no_test_can_see_a_ten_percent_drift():
    """The information is not there: the least-squares slope over 30 AR(1) seconds with phi 0.8 and 12% spread has a
    standard error of about 22% of the mean across the window (12% x sqrt(12 / 30^3 x 9) x 29), twice the drift. The
    test flags such a drift about as often as no drift at all, instead of pretending to know."""
    se = 0.12 * math.sqrt(12 / SECONDS**3 * (1.8 / 0.2)) * (SECONDS - 1)
    assert se == pytest.approx(0.22, abs=0.01)
    assert unsteady_share(0.8, 12.0, 0.10, seed=4) <= 0.20


@pytest.mark.parametrize("phi", [0.3, 0.5, 0.8])
def test_the_residuals_lag1_estimate_is_bias_corrected(phi):
    """About a fitted line, the plain lag-1 autocorrelation of 30 values runs low by about (2 + 6 phi) / 30; the
    corrected estimate (``fitted=2``) is on average at least twice as close to the truth."""
    rng = np.random.default_rng(5)
    raw, corrected = [], []
    for _ in range(1000):
        y = ar1(rng, SECONDS, phi, 10.0)
        slope, intercept = np.polyfit(TIMES, y, 1)
        residuals = y - (intercept + slope * TIMES)
        raw.append(residuals[1:] @ residuals[:-1] / (residuals @ residuals))
        corrected.append(lag1([residuals], fitted=2))
    assert abs(np.mean(corrected) - phi) <= abs(np.mean(raw) - phi) / 2
    assert np.mean(raw) < phi - 0.05  # the bias is real


def open_loop_step(variant, step, start, rate, service_s, growth_s=0.0):
    """Constant arrivals for 30 s, each request taking ``service_s`` plus ``growth_s`` per second since the start
    (a server falling behind: requests pile up), 20 tokens each."""
    rows = []
    for k in range(int(rate * SECONDS)):
        intended = start + k / rate
        e2e = service_s + growth_s * (intended - start)
        offsets = 0.02 + (e2e - 0.02) / 19 * np.arange(20)
        rows.append(
            RequestRecord(
                run_id="s",
                variant=variant,
                level=rate,
                step=step,
                phase="steady",
                mode="open",
                seq=k,
                request_id=f"{variant}-{step}-{k}",
                output_tokens=20,
                token_source="usage_deltas",
                t_intended=intended,
                t_send=intended,
                t_first=intended + offsets[0],
                t_end=intended + offsets[-1],
                t_done=intended + offsets[-1] + 0.0005,
                chunk_offsets=offsets.tolist(),
                chunk_tokens=[1] * 20,
                finish_reason="length",
                http_status=200,
            ).to_dict()
        )
    return rows


def test_an_open_loop_step_is_judged_on_latency_and_in_flight_not_on_its_arrivals(tmp_path):
    """Poisson-like throughput is the arrivals' own noise; a server whose requests take longer and longer piles them
    up. The first step stays steady whatever its throughput does, the second is unsteady for latency and in-flight."""
    start = 1_700_000_000.0
    steady = open_loop_step("baseline", 0, start, 4.0, 0.5)
    behind = open_loop_step("baseline", 1, start + 60, 4.0, 0.5, growth_s=0.05)
    steps = [
        window("baseline", 0, 4.0, start, SECONDS, "open"),
        window("baseline", 1, 4.0, start + 60, SECONDS, "open"),
    ]
    run = write_run(tmp_path, steady + behind, steps, mode="open")
    first, second = finish_run(run).summary.variants["baseline"].steps
    assert first.status == "clean" and first.steady_check.latency.steady and first.steady_check.in_flight.steady
    assert second.status == "unsteady"
    assert second.steady_check.latency.steady is False and second.steady_check.in_flight.steady is False
    assert "E2E from the intended send drifted" in second.status_reasons[0]
    assert "requests in flight drifted" in second.status_reasons[0]


def test_steadiness_is_an_equivalence_test_with_a_too_noisy_status():
    """Steady only when the 90% drift interval lies inside +-10%; a wide interval holding 0 is too noisy, not
    steady (absence of evidence); a drift seen and not shown to be small is unsteady."""
    rng = np.random.default_rng(10)
    t = np.arange(60) + 0.5
    quiet = drift(t, 100.0 + rng.normal(0.0, 1.0, t.size), autocorrelated=False)
    assert quiet["status"] == "steady" and quiet["steady"] is True
    lo, hi = quiet["drift_ci95"]
    assert -0.10 < lo <= hi < 0.10
    ramp = drift(t, 100.0 * (1.0 + 0.3 * t / 60.0) + rng.normal(0.0, 1.0, t.size), autocorrelated=False)
    assert ramp["status"] == "unsteady" and ramp["steady"] is False and ramp["drift_ci95"][0] > 0
    short = np.arange(6) + 0.5
    noisy = drift(short, 100.0 + rng.normal(0.0, 20.0, short.size), autocorrelated=False)
    assert noisy["status"] == "too noisy" and noisy["steady"] is None
    assert noisy["drift_ci95"][0] < 0.0 < noisy["drift_ci95"][1]


def test_steady_is_two_one_sided_tests_at_5_percent_the_90_percent_interval_inside_the_margin():
    """Five points, no slope, residuals (a, -a, 0, -a, a) with a = 2.5 around 100: by hand, the slope's error is
    sqrt(4 a^2 / 3 / 10) and the change across the 4 s window is +-t * se * 4 / 100, with t(0.95, 3) = 2.353363
    (90%) and t(0.975, 3) = 3.182446 (95%): +-8.59% and +-11.62%. Equivalence at 5% (TOST) holds: steady, where
    asking it of the 95% interval (a test at 2.5%) called the window too noisy."""
    a = 2.5
    judged = drift(np.arange(5.0), 100.0 + np.array([a, -a, 0.0, -a, a]), autocorrelated=False)
    se = math.sqrt(4 * a**2 / 3 / 10)
    assert judged["drift_ci90"] == pytest.approx([-2.353363 * se * 0.04, 2.353363 * se * 0.04], abs=1e-6)
    assert judged["drift_ci95"] == pytest.approx([-3.182446 * se * 0.04, 3.182446 * se * 0.04], abs=1e-6)
    assert judged["status"] == "steady" and judged["steady"] is True

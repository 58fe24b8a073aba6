"""Soak analysis against known answers: trends with a known slope, memory growth, the soak gates, a killed soak.

Truth comes from the generators (a TTFT that rises by a set percent per hour, memory that grows by a set MiB per
hour), never from the code under test.
"""

import json
import math

import numpy as np
import pandas as pd
import pytest

from locust_llm.analysis.gates import EXIT_INTERRUPTED, EXIT_OK, EXIT_SLO
from locust_llm.analysis.soak import drift_check, memory_check, trend
from locust_llm.pipeline import finish_run
from tests.synthetic import back_to_back, patch_env, window, write_run

LIMITS = {"max_drift_pct_per_hour": 10.0, "max_error_rate": 0.01, "max_memory_growth_mib_per_hour": 100.0}


def windows_over(hours: float, count: int) -> np.ndarray:
    """Midpoints (hours) of ``count`` equal windows over ``hours``."""
    return (np.arange(count) + 0.5) * hours / count


# -- the trend and its CI -------------------------------------------------------------------------
def test_a_rise_of_ten_percent_per_hour_is_found_and_its_ci_covers_it_in_over_90_percent_of_soaks():
    hours = windows_over(2.0, 60)  # a 2-hour soak in 2-minute windows
    covered, estimates = 0, []
    for seed in range(300):
        rng = np.random.default_rng(seed)
        values = 100.0 * (1 + 0.10 * hours) + rng.normal(0, 3.0, hours.size)
        fit = trend(hours, values)
        truth = 100.0 * 10.0 / (100.0 * (1 + 0.10 * hours[0]))  # percent of the level at the first window
        covered += fit["pct_ci95"][0] <= truth <= fit["pct_ci95"][1]
        estimates.append(fit["pct_per_hour"])
    # 95% nominal; the percent's base (the fitted first level) is itself estimated, which the CI leaves out
    assert 0.90 <= covered / 300 <= 0.99, covered
    assert np.mean(estimates) == pytest.approx(10.0, abs=0.3)
    one = trend(hours, 100.0 * (1 + 0.10 * hours) + np.random.default_rng(1).normal(0, 3.0, hours.size))
    assert one["pct_ci95"][0] <= 10.0 <= one["pct_ci95"][1]
    assert one["slope_per_hour"] == pytest.approx(10.0, abs=2.5)  # ms per hour on a 100 ms level
    # drifting 10%/h with the limit at 5%/h: the whole CI lies beyond it -> the gate fails
    failed = drift_check("ttft_p99_ms", trend(hours, 100.0 * (1 + 0.10 * hours)), 5.0)
    assert not failed["ok"] and failed["judged"] and "TTFT P99 drifts +9.98%/h" in failed["text"]


def test_a_flat_series_has_a_ci_around_zero_and_the_drift_gate_holds():
    hours = windows_over(2.0, 60)
    values = 250.0 + np.random.default_rng(7).normal(0, 5.0, hours.size)
    fit = trend(hours, values)
    assert fit["pct_ci95"][0] <= 0.0 <= fit["pct_ci95"][1]
    assert fit["ci95"][0] <= 0.0 <= fit["ci95"][1]
    check = drift_check("output_tps", fit, 10.0)
    assert check["ok"] and check["judged"]
    # falling throughput beyond the limit fails (the bad direction for throughput is down) ...
    assert not drift_check("output_tps", trend(hours, 250.0 * (1 - 0.2 * hours)), 10.0)["ok"]
    # ... rising throughput never does
    assert drift_check("output_tps", trend(hours, 250.0 * (1 + 0.5 * hours)), 10.0)["ok"]


def test_two_windows_give_no_ci_and_the_gate_says_it_did_not_judge():
    fit = trend([0.1, 0.3], [100.0, 150.0])
    assert fit["slope_per_hour"] == pytest.approx(250.0) and fit["ci95"] is None
    check = drift_check("ttft_p50_ms", fit, 10.0)
    assert check["ok"] and not check["judged"] and "a trend needs 3" in check["text"]


def test_memory_growth_of_a_known_slope():
    hours = windows_over(1.0, 30)
    rng = np.random.default_rng(3)
    fit = trend(hours, 2048.0 + 50.0 * hours + rng.normal(0, 4.0, hours.size))
    assert fit["ci95"][0] <= 50.0 <= fit["ci95"][1]
    assert memory_check("rss_mib", fit, 100.0)["ok"]
    leaking = trend(hours, 2048.0 + 300.0 * hours + rng.normal(0, 4.0, hours.size))
    check = memory_check("rss_mib", leaking, 100.0)
    assert not check["ok"] and "server resident memory changes by +3" in check["text"] and "MiB/h" in check["text"]


# -- whole runs through the pipeline --------------------------------------------------------------
T0 = 1_800_000_000.0
WINDOW_S = 600.0


def soak_run(
    path,
    windows: int = 6,
    ttft_rise_per_h: float = 0.0,
    rss_mib_per_h: float = 0.0,
    open_last: bool = False,
    fail_every: int = 0,
    gpu: list | None = None,
):
    """A closed-loop soak of two streams in 10-minute windows: TTFT 0.2 s rising by ``ttft_rise_per_h`` (fraction
    of the start per hour), 100 tokens at 50 ms; the server's RSS sampled every 10 s, growing ``rss_mib_per_h``.
    ``open_last``: the last window was never closed (a killed run); ``fail_every``: every n-th request fails;
    ``gpu``: per window (SM clock MHz, temperature C) of one GPU, with 80 GB of its memory used."""
    path.mkdir()
    rng = np.random.default_rng(11)
    rows, steps = [], []
    for i in range(windows):
        start = T0 + i * WINDOW_S
        steps.append({**window("baseline", i, 2.0, start, WINDOW_S), "window": i})
        ttft = 0.2 * (1 + ttft_rise_per_h * (i + 0.5) * WINDOW_S / 3600)
        for stream in range(2):
            rows += back_to_back(path.name, "baseline", 2.0, i, start, WINDOW_S, ttft, 0.05, 100, rng, stream)
    if fail_every:
        for row in rows[::fail_every]:
            row.update(error_class="http_error", http_status=500)
    if open_last:
        steps[-1]["t_end"] = math.nan
        cut = steps[-1]["t_steady"] + WINDOW_S / 2
        rows = [r for r in rows if r["t_done"] <= cut]
    write_run(path, rows, steps)
    t = np.arange(T0 - 5, T0 + windows * WINDOW_S + 5, 10.0)
    frames = [
        pd.DataFrame(
            {
                "t": t,
                "variant": "baseline",
                "source": "process",
                "metric": "process_rss_mib",
                "labels": "{}",
                "value": 900.0 + rss_mib_per_h * (t - T0) / 3600,
            }
        )
    ]
    for metric, column in (("gpu_sm_clock_mhz", 0), ("gpu_temp_c", 1), ("gpu_mem_used_mib", None)) if gpu else ():
        index = np.clip(((t - T0) // WINDOW_S).astype(int), 0, windows - 1)
        values = [80_000.0] * t.size if column is None else [gpu[i][column] for i in index]
        frames.append(
            pd.DataFrame(
                {
                    "t": t,
                    "variant": "baseline",
                    "source": "nvml",
                    "metric": metric,
                    "labels": '{"gpu": "0"}',
                    "value": values,
                }
            )
        )
    pd.concat(frames, ignore_index=True).to_parquet(path / "telemetry.parquet")
    (path / "telemetry.json").write_text(
        json.dumps({"interval_s": 10.0, "attachments": [{"variant": "baseline", "engine": "llamacpp"}]})
    )
    patch_env(
        path,
        "soak",
        variant="baseline",
        level=2.0,
        duration_s=windows * WINDOW_S,
        windows=windows,
        window_s=WINDOW_S,
        **LIMITS,
    )
    return path


def test_a_steady_soak_passes_every_soak_gate(tmp_path):
    outcome = finish_run(soak_run(tmp_path / "flat"))
    soak = outcome.summary.soak
    assert [w.window for w in soak.windows] == list(range(6)) and soak.complete
    assert all(w.in_trend and w.complete for w in soak.windows)
    assert soak.windows[0].start_s == 0.0 and soak.windows[-1].end_s == pytest.approx(6 * WINDOW_S)
    assert soak.windows[2].ttft_p50_ms == pytest.approx(200.0, abs=0.5)
    trends = {t.figure: t for t in soak.trends}
    assert trends["ttft_p50_ms"].pct_ci95[0] <= 0.0 <= trends["ttft_p50_ms"].pct_ci95[1]
    assert abs(trends["output_tps"].pct_per_hour) < 2.0
    assert abs(trends["rss_mib"].slope_per_hour) < 1e-6
    checks = {(c.gate, c.figure): c for c in soak.checks}
    assert set(checks) >= {
        ("soak_drift", "ttft_p99_ms"),
        ("soak_drift", "output_tps"),
        ("soak_error_rate", "error_rate"),
        ("soak_memory_growth", "rss_mib"),
    }
    assert all(c.ok and c.judged for c in soak.checks)
    assert outcome.verdict.exit_code == EXIT_OK, outcome.verdict.reasons
    assert any(c.gate == "soak_drift:ttft_p99_ms" and c.ok for c in outcome.verdict.checks)
    html = (tmp_path / "flat" / "report.html").read_text()
    assert 'id="soak"' in html and "TTFT over the soak" in html and "every soak gate holds" in html
    assert "soak: baseline held at 2 concurrent streams for 60 min of 60 min" in outcome.text
    assert "every soak gate holds" in outcome.text
    assert "soak gate ok: TTFT P99 drifts" in (tmp_path / "flat" / "summary.md").read_text()


def test_rising_ttft_and_growing_memory_fail_the_soak_with_their_reasons(tmp_path):
    outcome = finish_run(soak_run(tmp_path / "drift", ttft_rise_per_h=0.5, rss_mib_per_h=400.0))
    trends = {t.figure: t for t in outcome.summary.soak.trends}
    ttft = trends["ttft_p50_ms"]
    # TTFT rises 0.5 x 0.2 s per hour = 100 ms/h: the CI holds it, and 50% of the start level per hour
    assert ttft.ci95[0] <= 100.0 <= ttft.ci95[1]
    assert ttft.pct_per_hour == pytest.approx(100 * 100.0 / (200.0 * (1 + 0.5 * 300 / 3600)), rel=0.02)
    rss = trends["rss_mib"]
    assert rss.slope_per_hour == pytest.approx(400.0, rel=1e-3)
    assert outcome.verdict.exit_code == EXIT_SLO
    reasons = outcome.verdict.reasons[str(EXIT_SLO)]
    assert any("TTFT P50 drifts +4" in r and "limit 10%/h" in r for r in reasons), reasons
    assert any("server resident memory changes by +400 MiB/h" in r for r in reasons), reasons


def test_an_error_rate_beyond_the_soak_limit_fails(tmp_path):
    outcome = finish_run(soak_run(tmp_path / "errors", fail_every=40))  # 2.5% of the requests fail
    soak = outcome.summary.soak
    assert soak.error_rate == pytest.approx(0.025, abs=0.003)
    reasons = outcome.verdict.reasons[str(EXIT_SLO)]
    assert any("soak error rate 2.5" in r and "limit 1%" in r for r in reasons), reasons


def test_a_killed_soak_is_reported_up_to_its_last_record(tmp_path):
    path = soak_run(tmp_path / "killed", windows=4, open_last=True)
    outcome = finish_run(path)
    soak = outcome.summary.soak
    assert len(soak.windows) == 4 and not soak.complete
    last = soak.windows[-1]
    assert not last.complete and not last.in_trend and last.requests > 0
    # the open window ends at the last record: about half a window in
    assert last.end_s - last.start_s == pytest.approx(WINDOW_S / 2, abs=10.0)
    assert [w.in_trend for w in soak.windows[:3]] == [True, True, True]
    assert outcome.verdict.exit_code == EXIT_INTERRUPTED
    assert "did not finish" in outcome.verdict.reasons[str(EXIT_INTERRUPTED)][0]
    steps = json.loads((path / "steps.json").read_text())["steps"]
    assert math.isnan(steps[-1]["t_end"])  # the raw file is left as the run wrote it
    html = (path / "report.html").read_text()
    assert "unfinished" in html and "has not finished" in html


def test_gpu_clocks_and_temperature_and_a_clock_that_falls_is_throttling(tmp_path):
    steady = [(1980.0, 60.0), (1980.0, 62.0), (1965.0, 64.0), (1980.0, 65.0), (1980.0, 65.0), (1980.0, 66.0)]
    gpu = finish_run(soak_run(tmp_path / "cool", gpu=steady)).summary.soak.gpu
    assert (gpu.sm_clock_min_mhz, gpu.sm_clock_max_mhz, gpu.temp_min_c, gpu.temp_max_c) == (1965, 1980, 60, 66)
    assert gpu.throttling is False and gpu.clock_drop_pct == pytest.approx(100 * 15 / 1980)
    hot = [(1980.0, 70.0), (1980.0, 80.0), (1900.0, 86.0), (1600.0, 90.0), (1500.0, 91.0), (1500.0, 91.0)]
    outcome = finish_run(soak_run(tmp_path / "hot", gpu=hot))
    gpu = outcome.summary.soak.gpu
    assert gpu.throttling is True and gpu.clock_drop_pct == pytest.approx(100 * 480 / 1980) and gpu.temp_max_c == 91
    window = outcome.summary.soak.windows[4]
    assert (window.sm_clock_mhz, window.temp_max_c, window.gpu_mem_mib) == (1500, 91, 80_000)
    assert "throttling suspected" in (tmp_path / "hot" / "report.html").read_text()
    assert "GPU SM clock over the soak" in (tmp_path / "hot" / "report.html").read_text()
    assert "GPU memory over the soak" in (tmp_path / "hot" / "report.html").read_text()
    trends = {t.figure: t for t in outcome.summary.soak.trends}
    assert trends["gpu_mem_mib"].slope_per_hour == pytest.approx(0.0, abs=1e-6)
    assert any(c.figure == "gpu_mem_mib" and c.ok and c.judged for c in outcome.summary.soak.checks)

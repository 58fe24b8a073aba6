"""summary.json from synthetic run directories with known answers, through `locust-llm report`."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from locust_llm.analysis.summary import build_summary
from locust_llm.records import RequestRecord
from locust_llm.rundir import RunData
from locust_llm.rundir.steps import StepRow
from tests.synthetic import TOKENS, TPOT_S, TTFT_S, WINDOW_S, synthetic_run


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("synthetic")
    synthetic_run(run_dir, np.random.default_rng(7))
    done = subprocess.run(
        [sys.executable, "-m", "locust_llm.cli", "report", str(run_dir)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads((run_dir / "summary.json").read_text()), run_dir


def test_percentiles_are_numpys(summary):
    data, run_dir = summary
    frame = pq.read_table(run_dir / "requests.parquet").to_pandas()
    steady = frame[(frame["variant"] == "spec-k4") & (frame["step"] == 2) & (frame["phase"] == "steady")]
    tpot_ms = ((steady["t_end"] - steady["t_first"]) / (steady["output_tokens"] - 1) * 1000).to_numpy()
    figures = data["variants"]["spec-k4"]["steps"][2]["tpot_ms"]
    assert figures["n"] == len(tpot_ms)
    for q in (50, 95, 99):
        assert figures[f"p{q}"] == pytest.approx(np.percentile(tpot_ms, q), rel=1e-12)


def test_failures_count_in_the_denominators(summary):
    data, _ = summary
    step = data["variants"]["baseline"]["steps"][0]
    assert step["errors"] == 1 and step["errors_by_class"] == {"http_error": 1}
    assert step["error_rate"] == pytest.approx(1 / step["requests"])
    # goodput: the SLO (TPOT <= 15 ms) holds for every success at level 1, and the failure is not good
    assert step["goodput_rps"] == pytest.approx((step["requests"] - 1) / WINDOW_S)
    assert (
        data["variants"]["baseline"]["steps"][3]["goodput_rps"]
        < data["variants"]["baseline"]["steps"][3]["request_rate"]
    )


def test_speedup_and_crossover(summary):
    data, _ = summary
    (comparison,) = data["comparisons"]
    assert comparison["baseline"] == "baseline" and comparison["variant"] == "spec-k4"
    by_level = {s["level"]: s for s in comparison["steps"]}
    for level, expected in ((1, 2.0), (8, 0.8)):
        decode = by_level[level]["decode_tps_speedup"]
        assert decode["ci95"][0] < expected * 1.05 and decode["ci95"][1] > expected * 0.95
        assert by_level[level]["tpot_p50_speedup"]["value"] == pytest.approx(expected, rel=0.1)
    assert by_level[1]["output_tps_speedup"]["ci95"][0] > 1
    assert by_level[8]["output_tps_speedup"]["ci95"][1] < 1
    assert comparison["crossover_level"] == 8
    assert "up to 4" in comparison["recommendation"] and "disable from 8" in comparison["recommendation"]


def test_aggregate_throughput_counts_tokens_in_the_window(summary):
    data, _ = summary
    step = data["variants"]["baseline"]["steps"][0]
    # one stream at ~50 tokens per (50 ms + 49 x 10 ms): tokens per second of the window
    expected = TOKENS / (TTFT_S + (TOKENS - 1) * TPOT_S["baseline"][1])
    assert step["output_tps"] == pytest.approx(expected, rel=0.03)
    lo, hi = step["output_tps_ci95"]
    assert lo <= step["output_tps"] <= hi


def test_report_merges_runs(summary, tmp_path):
    _, run_dir = summary
    out = tmp_path / "merged"
    done = subprocess.run(
        [sys.executable, "-m", "locust_llm.cli", "report", str(run_dir), str(run_dir), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    merged = json.loads((out / "summary.json").read_text())
    name = run_dir.name
    assert set(merged["variants"]) == {f"{name}:baseline", f"{name}:spec-k4"}
    assert merged["baseline"] == f"{name}:baseline"


def test_report_rejects_a_folder_that_is_not_a_run(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "locust_llm.cli", "report", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "not a run directory" in done.stderr


def test_multi_token_chunks_follow_the_definitions():
    """One request, chunks of 1, 3 and 2 tokens: every per-token figure by docs/metrics.md's definitions, by hand."""
    t0 = 100.0
    record = RequestRecord(
        run_id="r",
        variant="v",
        level=1,
        step=0,
        phase="steady",
        request_id="one",
        output_tokens=6,
        token_source="usage_deltas",
        t_send=t0,
        t_first=t0 + 0.05,
        t_end=t0 + 0.15,
        chunk_offsets=[0.05, 0.11, 0.15],
        chunk_tokens=[1, 3, 2],
        finish_reason="length",
        http_status=200,
    )
    frame = pd.DataFrame([record.to_dict()])
    run = RunData(
        requests=frame,
        steps=[StepRow(variant="v", step=0, level=1, mode="closed", t_start=t0 - 1, t_steady=t0, t_end=t0 + 1.0)],
    )
    step = build_summary(run).model_dump()["variants"]["v"]["steps"][0]
    assert step["ttft_ms"]["p50"] == pytest.approx(50.0)
    assert step["tpot_ms"]["p50"] == pytest.approx(100.0 / 5)  # (t_end - t_first) / (n - 1)
    assert step["itl_ms"]["n"] == 5 and step["itl_ms"]["mean"] == pytest.approx(20.0)  # 60/3 x3, 40/2 x2
    assert step["icl_ms"]["n"] == 2 and step["icl_ms"]["mean"] == pytest.approx(50.0)  # chunk gaps 60, 40
    assert step["decode_tps"]["p50"] == pytest.approx(5 / 0.1)
    assert step["e2e_tps"]["p50"] == pytest.approx(6 / 0.15)
    assert step["output_tps"] == pytest.approx(6 / 1.0)  # all 6 tokens arrive inside the 1 s window
    assert step["tokens_per_chunk"]["value"] == pytest.approx(2.0)

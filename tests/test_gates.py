"""Exit codes for nightly jobs: SLO gates, regressions, invalid runs, server failures, bad input."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from locust_llm.analysis.gates import (EXIT_BAD_INPUT, EXIT_INVALID, EXIT_OK, EXIT_REGRESSION, EXIT_SERVER,
                                       EXIT_SLO, Gates, verdict)
from locust_llm.recorder import SCHEMA

from .conftest import assert_run_completed, require_llama_server
from .test_summary import synthetic_run

REPO = Path(__file__).resolve().parent.parent


def step(level, **figures):
    return {"level": level, "requests": 10, "errors": 0, "error_rate": 0.0, "client_valid": True,
            "ttft_ms": {"p99": 50.0}, "tpot_ms": {"p99": 10.0}, **figures}


def summary(*steps, events=()):
    return {"run_id": "r", "variants": {"baseline": {"steps": list(steps)}}, "events": list(events),
            "comparisons": []}


def test_verdict_codes_and_their_order():
    ok = summary(step(1), step(2))
    assert verdict(ok, Gates(ttft_p99_ms=100, tpot_p99_ms=20, error_rate=0.01))["exit_code"] == EXIT_OK
    assert verdict(ok, Gates(ttft_p99_ms=40))["exit_code"] == EXIT_SLO
    failing = summary(step(1, error_rate=0.2, errors=2))
    assert verdict(failing, Gates(error_rate=0.1))["exit_code"] == EXIT_SLO
    regression = {"old": "o", "regressions": [{"variant": "baseline", "level": 1.0, "metric": "output_tps",
                                                "ratio": 0.5, "ci95": [0.4, 0.6]}]}
    assert verdict(ok, Gates(ttft_p99_ms=40), regression)["exit_code"] == EXIT_REGRESSION
    invalid = summary(step(1, client_valid=False), step(2, client_valid=False))
    assert verdict(invalid, Gates(), regression)["exit_code"] == EXIT_INVALID
    assert verdict(summary(step(1, client_valid=False), step(2)), Gates())["exit_code"] == EXIT_OK
    lost = summary(step(1), events=[{"kind": "records_missing", "missing": {0: 3}}])
    assert verdict(lost, Gates())["exit_code"] == EXIT_INVALID
    died = summary(step(1), events=[{"kind": "server_exited", "variant": "baseline"}])
    assert verdict(died, Gates(ttft_p99_ms=1), regression)["exit_code"] == EXIT_SERVER
    nothing = summary(step(1, errors=10, error_rate=1.0))
    assert verdict(nothing, Gates())["exit_code"] == EXIT_INVALID
    empty_step = summary(step(1), step(2, requests=0, errors=0))
    assert "no request was sent" in verdict(empty_step, Gates())["reasons"][str(EXIT_INVALID)][0]


def test_unmeasured_figure_fails_its_gate():
    result = verdict(summary(step(1, ttft_ms={"p99": None})), Gates(ttft_p99_ms=100))
    assert result["exit_code"] == EXIT_SLO and "not measured" in result["reasons"][str(EXIT_SLO)][0]


def compare(old: Path, new: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "locust_llm.cli", "compare", str(old), str(new)],
                          capture_output=True, text=True, timeout=300)


def test_compare_flags_a_degraded_copy_only(tmp_path):
    old, degraded = tmp_path / "old", tmp_path / "degraded"
    old.mkdir()
    synthetic_run(old, np.random.default_rng(3))
    shutil.copytree(old, degraded)
    frame = pq.read_table(degraded / "requests.parquet").to_pandas()
    # 30% slower decode: every chunk arrives later by 30% of its offset after the first token
    frame["chunk_offsets"] = frame["chunk_offsets"].map(
        lambda offsets: (offsets[0] + (np.asarray(offsets) - offsets[0]) * 1.3) if len(offsets) else offsets)
    frame["t_end"] = frame["t_send"] + frame["chunk_offsets"].map(lambda o: o[-1] if len(o) else np.nan)
    pq.write_table(pa.Table.from_pandas(frame, schema=SCHEMA, preserve_index=False), degraded / "requests.parquet")

    same = compare(old, old)
    assert same.returncode == EXIT_OK, same.stdout[-2000:]
    worse = compare(old, degraded)
    assert worse.returncode == EXIT_REGRESSION, worse.stdout[-2000:]
    assert "REGRESSION" in worse.stdout
    result = json.loads((degraded / "compare.json").read_text())
    html = (degraded / "report.html").read_text()
    assert "(regression)" in html and "Against run synthetic" in html
    tpot = [r for r in result["regressions"] if r["metric"] == "tpot_p50"]
    assert tpot and all(r["ratio"] == pytest.approx(1 / 1.3, rel=0.05) for r in tpot)


def run_locust(tmp_path, *args) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "spec_decode.py"), "--headless",
               "--skip-log", "--report-dir", str(tmp_path), *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, env=os.environ.copy())


SHORT = ("--ladder", "1", "--step-duration", "3", "--warmup", "1")


@pytest.mark.server
def test_default_scenario_passes_and_an_impossible_slo_fails(tmp_path):
    require_llama_server()
    done = run_locust(tmp_path, *SHORT, "--run-id", "default")
    assert done.returncode == EXIT_OK, done.stdout[-2000:] + done.stderr[-2000:]
    assert "verdict" in done.stderr and "exit code 0" in done.stderr
    strict = run_locust(tmp_path, *SHORT, "--variant", "baseline", "--run-id", "strict", "--slo-tpot-p99-ms", "0.001")
    assert strict.returncode == EXIT_SLO, strict.stdout[-2000:]
    assert json.loads((tmp_path / "strict" / "verdict.json").read_text())["exit_code"] == EXIT_SLO


@pytest.mark.server
def test_nightly_compares_with_a_saved_baseline(tmp_path):
    require_llama_server()
    args = ("--scenario", "scenarios/tiny-cpu-test.yaml", "--variant", "baseline", *SHORT)
    first = run_locust(tmp_path, *args, "--run-id", "first")
    assert_run_completed(first)
    library = tmp_path / "library"
    saved = subprocess.run([sys.executable, "-m", "locust_llm.cli", "baseline", "save", str(tmp_path / "first"),
                            "--name", "golden", "--library", str(library)], capture_output=True, text=True)
    assert saved.returncode == 0, saved.stderr
    missing = run_locust(tmp_path, *args, "--run-id", "missing", "--baseline-run", "nope")
    assert missing.returncode == EXIT_BAD_INPUT
    scenario = tmp_path / "nightly.yaml"
    scenario.write_text((REPO / "scenarios" / "tiny-cpu-test.yaml").read_text()
                        + f"gates: {{baseline_run: golden, library: {json.dumps(str(library))}, "
                          f"max_regression_pct: 1000}}\n")
    second = run_locust(tmp_path, "--scenario", str(scenario), "--variant", "baseline", *SHORT, "--run-id", "second")
    assert_run_completed(second)
    assert json.loads((tmp_path / "second" / "compare.json").read_text())["old"] == "first"


def test_bad_scenario_exits_with_the_input_code(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nserver: {engin: llamacpp}\nvariants: {a: {}}\n")
    done = run_locust(tmp_path, "--scenario", str(bad))
    assert done.returncode == EXIT_BAD_INPUT
    assert "unknown key 'engin'" in done.stderr and str(bad) in done.stderr

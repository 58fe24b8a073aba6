"""Exit codes for nightly jobs: SLO gates, regressions, invalid runs, server failures, bad input."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from locust_llm.analysis.documents.regression import RunComparison
from locust_llm.analysis.documents.summary import Summary
from locust_llm.analysis.gates import EXIT_INVALID, EXIT_OK, EXIT_REGRESSION, EXIT_SERVER, EXIT_SLO, evaluate
from locust_llm.records import REQUESTS_SCHEMA as SCHEMA
from locust_llm.scenario import GatesSpec
from tests.synthetic import synthetic_run


def step(level, **figures):
    return {
        "step": 0,
        "mode": "closed",
        "level": level,
        "requests": 10,
        "errors": 0,
        "error_rate": 0.0,
        "client_valid": True,
        "ttft_ms": {"p99": 50.0},
        "tpot_ms": {"p99": 10.0},
        "ttft_all_ms": {"p99": 50.0},
        "tpot_all_ms": {"p99": 10.0},
        **figures,
    }


def summary(*steps, events=()):
    return Summary.model_validate(
        {
            "run_id": "r",
            "generated_at": "now",
            "records": 10,
            "variants": {"baseline": {"steps": list(steps)}},
            "events": list(events),
        }
    )


def Gates(**limits):  # noqa: N802  (reads like the old dataclass in the table of cases below)
    return GatesSpec(**limits)


def verdict(doc, gates, regression=None):
    if regression is not None:
        regression = RunComparison.model_validate(
            {"max_regression_pct": 5, "rows": regression["regressions"], **regression}
        )
    return evaluate(doc, gates, regression).model_dump()


def test_verdict_codes_and_their_order():
    ok = summary(step(1), step(2))
    assert verdict(ok, Gates(ttft_p99_ms=100, tpot_p99_ms=20, error_rate=0.01))["exit_code"] == EXIT_OK
    assert verdict(ok, Gates(ttft_p99_ms=40))["exit_code"] == EXIT_SLO
    failing = summary(step(1, error_rate=0.2, errors=2))
    assert verdict(failing, Gates(error_rate=0.1))["exit_code"] == EXIT_SLO
    regression = {
        "old": "o",
        "regressions": [
            {
                "variant": "baseline",
                "level": 1.0,
                "metric": "output_tps",
                "ratio": 0.5,
                "ci95": [0.4, 0.6],
                "change": "worse",
            }
        ],
    }
    assert verdict(ok, Gates(ttft_p99_ms=40), regression)["exit_code"] == EXIT_REGRESSION
    client = {
        "client_valid": False,
        "status": "client-invalid",
        "status_reasons": ["client-invalid: the client was the bottleneck: CPU 99%"],
    }
    invalid = summary(step(1, **client), step(2, **client))
    assert verdict(invalid, Gates(), regression)["exit_code"] == EXIT_INVALID
    assert verdict(summary(step(1, **client), step(2)), Gates())["exit_code"] == EXIT_OK
    lost = summary(step(1), events=[{"kind": "records_missing", "missing": {"0": 3}}])
    assert verdict(lost, Gates())["exit_code"] == EXIT_INVALID
    died = summary(step(1), events=[{"kind": "server_exited", "variant": "baseline", "log_tail": ""}])
    assert verdict(died, Gates(ttft_p99_ms=1), regression)["exit_code"] == EXIT_SERVER
    nothing = summary(step(1, errors=10, error_rate=1.0))
    assert verdict(nothing, Gates())["exit_code"] == EXIT_INVALID
    busy = {"status": "contended", "status_reasons": ["contended: host busy: 1.20 cores; top: burn (pid 7) 1.00"]}
    contended = verdict(summary(step(1, **busy), step(2, **client)), Gates(ttft_p99_ms=1))
    assert contended["exit_code"] == EXIT_INVALID and "burn (pid 7)" in contended["reasons"][str(EXIT_INVALID)][0]
    assert {c["level"] for c in contended["checks"]} == {2.0}  # a contended step's latency is not gated


def test_gates_judge_every_request_and_open_loop_from_the_intended_send():
    timeouts = step(1, ttft_all_ms={"p99": 120_000.0})  # successes fast, but a tenth timed out
    assert verdict(summary(timeouts), Gates(ttft_p99_ms=500))["exit_code"] == EXIT_SLO
    late = step(1, mode="open", ttft_sched_all_ms={"p99": 550.0})  # sent 500 ms behind schedule
    assert verdict(summary(late), Gates(ttft_p99_ms=500))["exit_code"] == EXIT_SLO
    assert (
        verdict(summary(step(1, mode="open", ttft_sched_all_ms={"p99": 60.0})), Gates(ttft_p99_ms=500))["exit_code"]
        == EXIT_OK
    )


def test_unmeasured_figure_fails_its_gate():
    result = verdict(summary(step(1, ttft_all_ms={"p99": None})), Gates(ttft_p99_ms=100))
    assert result["exit_code"] == EXIT_SLO and "not measured" in result["reasons"][str(EXIT_SLO)][0]


def compare(old: Path, new: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "locust_llm.cli", "compare", str(old), str(new)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_compare_flags_a_degraded_copy_only(tmp_path):
    old, degraded = tmp_path / "old", tmp_path / "degraded"
    old.mkdir()
    synthetic_run(old, np.random.default_rng(3))
    shutil.copytree(old, degraded)
    frame = pq.read_table(degraded / "requests.parquet").to_pandas()
    # 30% slower decode: every chunk arrives later by 30% of its offset after the first token
    frame["chunk_offsets"] = frame["chunk_offsets"].map(
        lambda offsets: (offsets[0] + (np.asarray(offsets) - offsets[0]) * 1.3) if len(offsets) else offsets
    )
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


def test_compare_says_why_nothing_was_compared_and_reads_a_damaged_run_in_one_line(tmp_path):
    old, other = tmp_path / "old", tmp_path / "other-ladder"
    old.mkdir()
    synthetic_run(old, np.random.default_rng(4))
    shutil.copytree(old, other)
    # The same runs at other levels (another ladder): no variant and level in common.
    steps = json.loads((other / "steps.json").read_text())
    for step in steps["steps"]:
        step["level"] = step["users"] = step["level"] * 3
    (other / "steps.json").write_text(json.dumps(steps))
    frame = pq.read_table(other / "requests.parquet").to_pandas()
    frame["level"] = frame["level"] * 3
    pq.write_table(pa.Table.from_pandas(frame, schema=SCHEMA, preserve_index=False), other / "requests.parquet")

    nothing = compare(old, other)
    assert nothing.returncode == EXIT_INVALID, nothing.stdout[-2000:] + nothing.stderr[-2000:]
    said = nothing.stdout + nothing.stderr
    assert "0 regression" not in said
    for level in (1, 2, 4, 8):
        assert f"baseline level {level}: not measured in the new run" in said
        assert f"baseline level {level * 3}: not measured in the old run" in said

    damaged = other / "requests.parquet"
    damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])
    unreadable = compare(old, other)
    assert unreadable.returncode == EXIT_INVALID
    assert "Traceback" not in unreadable.stderr and "requests.parquet" in unreadable.stderr
    assert len(unreadable.stderr.strip().splitlines()) == 1, unreadable.stderr

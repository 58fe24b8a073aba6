"""Exit codes of real headless runs: the default scenario, an impossible SLO, a saved baseline, bad input."""

import json
import subprocess
import sys

import pytest

from locust_llm.analysis.gates import EXIT_BAD_INPUT, EXIT_SLO
from tests.helpers import REPO, assert_run_completed, host_left_no_clean_step, require_llama_server, run_locust

SHORT = ("--ladder", "1", "--step-duration", "3", "--warmup", "1")
FAST = ("--scenario", "scenarios/tiny-cpu-test.yaml")  # the test pair, no quality check: for what is not the default


@pytest.mark.server
def test_default_scenario_passes_and_an_impossible_slo_fails(tmp_path):
    require_llama_server()
    done = run_locust(tmp_path, *SHORT, "--run-id", "default")
    assert_run_completed(done)
    assert "verdict" in done.stderr and f"exit code {done.returncode}" in done.stderr
    # The quiet counterpart of tests/e2e/test_contention.py: our own two servers, client and host scanner are no
    # neighbour (one step may catch a passing one: CI machines are shared), and a clean level-1 step gives the
    # default's speed-up (1.7-1.9x on this machine), not one the host made up.
    summary = json.loads((tmp_path / "default" / "summary.json").read_text())
    foreign = sorted(s["host"]["foreign_cores"] for v in summary["variants"].values() for s in v["steps"])
    assert foreign[-2] < 0.25, foreign
    step = summary["comparisons"][0]["steps"][0]
    if step["status"] == "clean":
        assert step["output_tps_speedup"]["value"] > 1.2, step
    strict = run_locust(
        tmp_path, *FAST, *SHORT, "--variant", "baseline", "--run-id", "strict", "--slo-tpot-p99-ms", "0.001"
    )
    verdict = json.loads((tmp_path / "strict" / "verdict.json").read_text())
    assert strict.returncode == verdict["exit_code"]
    # On a loaded 2-core box the client may be judged the bottleneck (exit 5 outranks 3), or the host contended (a
    # contended step is judged by no gate): then every step says so.
    if not host_left_no_clean_step(tmp_path / "strict", strict, EXIT_SLO):
        assert strict.returncode == EXIT_SLO and str(EXIT_SLO) in verdict["reasons"], verdict


@pytest.mark.server
def test_nightly_compares_with_a_saved_baseline(tmp_path):
    require_llama_server()
    args = (*FAST, "--variant", "baseline", *SHORT)
    first = run_locust(tmp_path, *args, "--run-id", "first")
    assert_run_completed(first)
    library = tmp_path / "library"
    saved = subprocess.run(
        [
            sys.executable,
            "-m",
            "locust_llm.cli",
            "baseline",
            "save",
            str(tmp_path / "first"),
            "--name",
            "golden",
            "--library",
            str(library),
        ],
        capture_output=True,
        text=True,
    )
    assert saved.returncode == 0, saved.stderr
    missing = run_locust(tmp_path, *args, "--run-id", "missing", "--baseline-run", "nope")
    assert missing.returncode == EXIT_BAD_INPUT
    scenario = tmp_path / "nightly.yaml"
    scenario.write_text(
        (REPO / "scenarios" / "tiny-cpu-test.yaml").read_text()
        + f"gates: {{baseline_run: golden, library: {json.dumps(str(library))}, "
        f"max_regression_pct: 1000}}\n"
    )
    second = run_locust(tmp_path, "--scenario", str(scenario), "--variant", "baseline", *SHORT, "--run-id", "second")
    assert_run_completed(second)
    assert json.loads((tmp_path / "second" / "compare.json").read_text())["old"] == "first"


def test_bad_scenario_exits_with_the_input_code(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nserver: {engin: llamacpp}\nvariants: {a: {}}\n")
    done = run_locust(tmp_path, "--scenario", str(bad))
    assert done.returncode == EXIT_BAD_INPUT
    assert "unknown key 'engin'" in done.stderr and str(bad) in done.stderr

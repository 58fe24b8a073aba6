"""The default scenario on a shared machine: a neighbour burns CPU only while the baseline server is alive.

Without contention detection such a run reported 2.85x instead of 1.7x, exit 0. Here the busy run must exit 5
naming the host contention and the neighbour. (Its quiet counterpart, the default run in which our own servers,
client and scanner count as no neighbour and the speed-up stands, is tests/e2e/test_gates.py's default run;
full-length figures, and what interleaving alone does: benchmarks/contention_ab.py.)
"""

import json
import subprocess
import sys

import pytest
import yaml

from locust_llm.analysis.gates import EXIT_INVALID
from tests.helpers import REPO, require_llama_server, run_locust

# The default scenario (interleaved, both servers up), one level, short windows.
SHORT = ("--ladder", "1", "--step-duration", "6", "--warmup", "1")


def default_without_quality(tmp_path):
    """The default scenario without its quality check (about 40 s a run, and not what this test is about)."""
    doc = yaml.safe_load((REPO / "scenarios" / "tiny-cpu.yaml").read_text())
    doc.pop("quality", None)
    path = tmp_path / "tiny-cpu-no-quality.yaml"
    path.write_text(yaml.safe_dump(doc))
    return ("--scenario", str(path))


def level_one(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    (step,) = summary["comparisons"][0]["steps"]
    return summary, step


@pytest.mark.server
def test_a_neighbour_burning_cpu_next_to_the_baseline_is_named_and_leaves_no_verdict(tmp_path):
    require_llama_server()
    scenario = default_without_quality(tmp_path)
    burner = subprocess.Popen(
        [sys.executable, "-m", "locust_llm.testing.burner", "--max-s", "300"], cwd=REPO, start_new_session=True
    )  # another job on the machine: not in our process tree
    try:
        busy = run_locust(tmp_path, *scenario, *SHORT, "--run-id", "busy")
    finally:
        burner.kill()
        burner.wait(timeout=10)
    assert busy.returncode == EXIT_INVALID, busy.stderr[-3000:]
    verdict = json.loads((tmp_path / "busy" / "verdict.json").read_text())
    (reason,) = verdict["reasons"][str(EXIT_INVALID)]
    assert "was measured cleanly" in reason and "host busy" in reason and f"pid {burner.pid}" in reason, reason
    summary, step = level_one(tmp_path / "busy")
    print(f"busy: exit {busy.returncode}; {reason}")
    baseline_steps = summary["variants"]["baseline"]["steps"]
    assert all(s["status"] == "contended" and s["host"]["foreign_cores"] > 0.25 for s in baseline_steps)
    assert step["output_tps_speedup"]["value"] is None and "no verdict" in summary["comparisons"][0]["recommendation"]
    assert "contended" in (tmp_path / "busy" / "summary.md").read_text()

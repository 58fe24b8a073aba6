"""SIGTERM (what CI systems and `timeout` send) and Ctrl-C mid-step: everything measured is written, every
process started for the run is gone, and the exit code says the run was interrupted."""

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import psutil
import pytest

from tests.e2e.test_faults import counted
from tests.helpers import LOCUSTFILE, REPO, require_llama_server

EXIT_INTERRUPTED = 7


@pytest.mark.server
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_interrupt_mid_step_writes_the_run_and_leaves_no_process(tmp_path, signum):
    require_llama_server()
    command = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        LOCUSTFILE,
        "--headless",
        "--skip-log",
        "--json",
        "--scenario",
        "scenarios/tiny-cpu-test.yaml",
        "--ladder",
        "1,2",
        "--step-duration",
        "30",
        "--warmup",
        "1",
        "--report-dir",
        str(tmp_path),
        "--run-id",
        "cut",
    ]
    locust = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run_dir = tmp_path / "cut"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until the first step's steady window is open
        steps = (
            json.loads((run_dir / "steps.json").read_text()).get("steps", [])
            if (run_dir / "steps.json").exists()
            else []
        )
        if steps and steps[0]["t_steady"] == steps[0]["t_steady"]:  # not NaN
            break
        time.sleep(0.2)
    time.sleep(2)
    tree = psutil.Process(locust.pid).children(recursive=True)
    assert any("llama-server" in " ".join(p.cmdline()) for p in tree)
    sent = time.monotonic()
    locust.send_signal(signum)
    stdout, stderr = locust.communicate(timeout=60)
    took = time.monotonic() - sent
    print(f"{signal.Signals(signum).name}: exit {locust.returncode} after {took:.2f} s")
    assert locust.returncode == EXIT_INTERRUPTED, stderr[-3000:]
    assert took < 20, took
    for name in ("requests.parquet", "summary.json", "verdict.json", "report.html", "telemetry.parquet"):
        assert (run_dir / name).exists(), name
    assert not (run_dir / "requests.parts").exists()
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["exit_code"] == EXIT_INTERRUPTED and "interrupted by" in verdict["reasons"]["7"][0]
    assert "interrupted at" in (run_dir / "report.html").read_text()
    # every request Locust counted (its --json stats at exit) is a row, the cancelled streams included
    assert len(pd.read_parquet(run_dir / "requests.parquet")) == counted(stdout) > 0
    time.sleep(0.5)
    left = [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, [p.cmdline() for p in left]
    assert not [
        p
        for p in psutil.process_iter(["cmdline"])
        if str(run_dir) in " ".join(p.info["cmdline"] or []) and p.pid != os.getpid()
    ]

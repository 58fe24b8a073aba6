"""``--soak`` against the reference server: a short soak gives its windows, trends and gates; a soak killed with
SIGKILL after two windows is still reported by ``locust-llm report`` from its part files (and so is one still
running)."""

import json
import math
import signal
import subprocess
import sys
import time

import pandas as pd
import psutil

from tests.helpers import LOCUSTFILE, REPO, assert_run_completed, run_locust

# Contention detection off: the windows are judged by what this test checks, not by what else the shared machine
# does. The drift limit is out of reach of a half-minute soak's noise, so the drift checks are judged and hold.
SCENARIO = """
name: soak
server: {engine: external, url: "http://127.0.0.1:9"}
variants: {ref: {}}
load:
  mode: closed
  ladder: [1, 2]
  warmup_s: 2
  prompt_tokens: 16
  max_tokens: 20
  contention_cores: 100
soak: {window_s: 10, max_drift_pct_per_hour: 1000000}
"""


def scenario(tmp_path):
    path = tmp_path / "soak.yaml"
    path.write_text(SCENARIO)
    return str(path)


def closed_windows(run_dir) -> int:
    try:
        steps = json.loads((run_dir / "steps.json").read_text())["steps"]
    except (OSError, ValueError, KeyError):
        return 0
    return sum(1 for s in steps if s["t_end"] is not None and math.isfinite(s["t_end"]))


def report(run_dir, *flags: str, code: int = 0) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "locust_llm.cli", "report", str(run_dir), *flags],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == code, done.stderr[-3000:]
    return json.loads((run_dir / "summary.json").read_text())


def test_a_half_minute_soak_in_three_windows(tmp_path, refserver_factory):
    server = refserver_factory("--ttft-s", "0.02", "--gap-s", "0.01")
    done = run_locust(
        tmp_path,
        "--host",
        server.url,
        "--scenario",
        scenario(tmp_path),
        "--soak",
        "30s",
        "--run-id",
        "soak",
        timeout=240,
    )
    assert_run_completed(done)
    run_dir = tmp_path / "soak"
    soak = json.loads((run_dir / "summary.json").read_text())["soak"]
    assert soak["variant"] == "ref" and soak["level"] == 2.0 and soak["windows_planned"] == 3 and soak["complete"]
    windows = soak["windows"]
    assert [w["window"] for w in windows] == [0, 1, 2]
    assert all(abs(w["window_s"] - 10.0) < 1.0 and w["requests"] > 20 and w["error_rate"] == 0 for w in windows)
    assert abs(soak["measured_s"] - 30.0) < 2.0
    # consecutive windows: each begins where the one before ended
    assert all(abs(b["start_s"] - a["end_s"]) < 1e-6 for a, b in zip(windows, windows[1:], strict=False))
    # the reference server's TTFT is 20 ms and its TPOT 10 ms in every window
    assert all(15 < w["ttft_p50_ms"] < 40 and 9 < w["tpot_p50_ms"] < 15 for w in windows), windows
    trends = {t["figure"]: t for t in soak["trends"]}
    assert {"ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "output_tps"} <= set(trends)
    assert all(trends[f]["n"] == 3 and trends[f]["ci95"] is not None for f in ("ttft_p50_ms", "output_tps"))
    checks = {(c["gate"], c["figure"]): c for c in soak["checks"]}
    assert checks[("soak_error_rate", "error_rate")]["ok"] and checks[("soak_drift", "output_tps")]["judged"]
    assert all(c["ok"] for c in soak["checks"])
    assert any("memory growth not measured" in n for n in soak["notes"])  # an external server: no process
    steps = json.loads((run_dir / "steps.json").read_text())["steps"]
    assert [s["window"] for s in steps] == [0, 1, 2]
    frame = pd.read_parquet(run_dir / "requests.parquet")
    steady = frame[frame["phase"] == "steady"].groupby("step").size().to_dict()
    assert steady == {w["step"]: w["requests"] for w in windows}
    html = (run_dir / "report.html").read_text()
    assert 'id="soak"' in html and "TTFT over the soak" in html and "Throughput over the soak" in html
    assert "soak: ref held at 2 concurrent streams" in done.stderr and "every soak gate holds" in done.stderr
    assert "soak gate ok" in (run_dir / "summary.md").read_text()


def test_a_soak_killed_after_two_windows_is_reported_from_its_parts(tmp_path, refserver_factory):
    server = refserver_factory("--ttft-s", "0.02", "--gap-s", "0.01")
    command = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        LOCUSTFILE,
        "--headless",
        "--skip-log",
        "--host",
        server.url,
        "--scenario",
        scenario(tmp_path),
        "--soak",
        "40s",
        "--report-dir",
        str(tmp_path),
        "--run-id",
        "cut",
    ]
    locust = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_dir = tmp_path / "cut"
    try:
        deadline = time.monotonic() + 120
        while closed_windows(run_dir) < 2 and time.monotonic() < deadline and locust.poll() is None:
            time.sleep(0.5)
        assert closed_windows(run_dir) == 2
        # a report of the soak in progress is asked for (a plain one is refused: the run is being written); the
        # open window ends at the last record, and the run has not finished (exit 7)
        refused = subprocess.run(
            [sys.executable, "-m", "locust_llm.cli", "report", str(run_dir)], cwd=REPO, capture_output=True, text=True
        )
        assert refused.returncode == 7 and "--so-far" in refused.stderr, refused.stderr
        running = report(run_dir, "--so-far", code=7)
        assert len(running["soak"]["windows"]) == 3 and not running["soak"]["windows"][2]["complete"]
        time.sleep(3)
        children = psutil.Process(locust.pid).children(recursive=True)
        locust.send_signal(signal.SIGKILL)
        locust.wait(timeout=30)
    finally:
        if locust.poll() is None:
            locust.kill()
    time.sleep(1)
    assert not [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not (run_dir / "requests.parquet").exists() and (run_dir / "requests.parts").is_dir()
    summary = report(run_dir, code=7)  # killed: the run did not finish
    soak = summary["soak"]
    windows = soak["windows"]
    assert len(windows) == 3 and not soak["complete"]
    assert [(w["complete"], w["in_trend"]) for w in windows] == [(True, True), (True, True), (False, False)]
    assert all(w["requests"] > 0 for w in windows) and windows[2]["end_s"] > windows[2]["start_s"]
    # the figures come from the part files: every steady request there is counted in its window
    parts = pd.concat(pd.read_parquet(p) for p in sorted((run_dir / "requests.parts").glob("part-*.parquet")))
    steady = parts[parts["phase"] == "steady"].groupby("step").size().to_dict()
    assert steady == {w["step"]: w["requests"] for w in windows}
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["exit_code"] == 7 and "did not finish" in verdict["reasons"]["7"][0]
    html = (run_dir / "report.html").read_text()
    assert 'id="soak"' in html and "unfinished" in html

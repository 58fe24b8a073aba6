"""Open-loop arrivals are independent of responses: a server-wide pause shows in TTFT_sched, not in the rate."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from .conftest import assert_run_completed

REPO = Path(__file__).resolve().parent.parent
PAUSE_S = 2.0
RATE = 20.0

SCENARIO = f"""
name: open-pause
server: {{engine: external, url: "http://127.0.0.1:9"}}
variants: {{ref: {{}}}}
load:
  mode: open
  arrival: constant
  ladder: [{RATE}]
  step_duration_s: 8
  warmup_s: 1
  prompt_tokens: 16
  max_tokens: 8
"""


def test_pause_shows_in_ttft_sched_and_the_rate_holds(tmp_path, refserver_factory):
    server = refserver_factory("--pause-once-s", str(PAUSE_S), "--ttft-s", "0.01", "--gap-s", "0.005")
    scenario = tmp_path / "open.yaml"
    scenario.write_text(SCENARIO)
    command = [sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "spec_decode.py"), "--headless",
               "--skip-log", "--host", server.url, "--scenario", str(scenario), "--run-id", "open",
               "--report-dir", str(tmp_path)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, env=os.environ.copy())
    assert_run_completed(done)
    frame = pd.read_parquet(tmp_path / "open" / "requests.parquet")
    sent = frame[frame["t_send"].notna()].sort_values("t_intended")
    assert sent["error_class"].isna().all(), sent["error_class"].value_counts()

    # The first request starts the pause; no token of any stream can arrive before it ends.
    pause_end = sent["t_send"].iloc[0] + PAUSE_S
    during = sent[sent["t_intended"] < pause_end - 0.1]
    assert len(during) >= 0.9 * RATE * PAUSE_S, "the dispatcher stopped sending while responses stalled"
    assert (during["t_send"] < pause_end - 0.05).all(), "sends waited for the stalled responses"
    ttft_sched_s = during["t_first"] - during["t_intended"]
    assert (ttft_sched_s >= (pause_end - during["t_intended"]) - 0.05).all()
    after = sent[sent["t_intended"] > pause_end + 0.5]
    assert (after["t_first"] - after["t_intended"]).median() < (during["t_first"] - during["t_intended"]).median()

    step = json.loads((tmp_path / "open" / "summary.json").read_text())["variants"]["ref"]["steps"][0]
    assert abs(step["achieved_rate"] - RATE) <= 0.05 * RATE
    assert abs(step["scheduled_rate"] - RATE) <= 0.05 * RATE
    assert step["schedule_lag_ms"]["n"] == step["requests"]

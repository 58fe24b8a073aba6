"""Open-loop arrivals are independent of responses: a server-wide pause shows in TTFT_sched, not in the rate."""

import json
from pathlib import Path

import pandas as pd

from tests.helpers import assert_run_completed, run_locust

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


def run_open_loop(tmp_path, server, scenario_text: str, run_id: str) -> Path:
    scenario = tmp_path / f"{run_id}.yaml"
    scenario.write_text(scenario_text)
    done = run_locust(tmp_path, "--host", server.url, "--scenario", str(scenario), "--run-id", run_id, timeout=120)
    assert_run_completed(done)
    return tmp_path / run_id


def test_inflight_cap_drops_are_recorded_never_hidden(tmp_path, refserver_factory):
    # Each response takes about 1 s; 20 arrivals/s against a cap of 2 must drop most of them.
    server = refserver_factory("--ttft-s", "0.5", "--gap-s", "0.1")
    capped = SCENARIO.replace("  max_tokens: 8\n", "  max_tokens: 8\n  max_inflight: 2\n  at_max_inflight: drop\n")
    run_dir = run_open_loop(tmp_path, server, capped.replace("step_duration_s: 8", "step_duration_s: 4"), "capped")
    frame = pd.read_parquet(run_dir / "requests.parquet")
    dropped = frame[frame["error_class"] == "dropped_inflight_cap"]
    assert len(dropped) > len(frame) / 2
    assert dropped["t_send"].isna().all() and dropped["t_intended"].notna().all()
    step = json.loads((run_dir / "summary.json").read_text())["variants"]["ref"]["steps"][0]
    assert step["errors_by_class"]["dropped_inflight_cap"] == (dropped["phase"] == "steady").sum()
    assert step["requests"] == (frame["phase"] == "steady").sum()
    assert step["client_valid"] is False
    assert any("in-flight cap" in reason for reason in step["client_validity"]["reasons"])


def test_pause_shows_in_ttft_sched_and_the_rate_holds(tmp_path, refserver_factory):
    server = refserver_factory("--pause-once-s", str(PAUSE_S), "--ttft-s", "0.01", "--gap-s", "0.005")
    run_dir = run_open_loop(tmp_path, server, SCENARIO, "open")
    frame = pd.read_parquet(run_dir / "requests.parquet")
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

    step = json.loads((run_dir / "summary.json").read_text())["variants"]["ref"]["steps"][0]
    assert abs(step["achieved_rate"] - RATE) <= 0.05 * RATE
    assert abs(step["scheduled_rate"] - RATE) <= 0.05 * RATE
    assert step["schedule_lag_ms"]["n"] == step["requests"]

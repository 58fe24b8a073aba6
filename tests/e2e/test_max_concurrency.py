"""``--max-concurrency`` on the reference server, arrivals over it held (vLLM's way, the default) or dropped.

Each response takes about 0.34 s (0.2 s to the first token, then 7 gaps of 0.02 s); 10 arrivals/s against 2 slots
(about 6 responses/s) must hit the cap. The server's own stamps (``/ref/logs``: when it received each request and when
it wrote each chunk) are the truth the cap is checked against; latencies run from the intended send time.
"""

import json

import numpy as np
import pandas as pd

from tests.helpers import run_locust

SCENARIO = """
name: capped
server: {engine: external, url: "http://127.0.0.1:9"}
variants: {ref: {}}
load:
  mode: open
  arrival: constant
  ladder: [10]
  step_duration_s: 4
  warmup_s: 1
  prompt_tokens: 16
  max_tokens: 8
  contention_cores: 100  # judged against the server's own stamps, not by what else the machine does
"""
SERVER = ("--ttft-s", "0.2", "--gap-s", "0.02")
CAP = 2


def server_overlap(logs: list[dict]) -> int:
    """The most streams the server was generating at once, from its own stamps (request received -> last chunk)."""
    events = sorted(
        [(log["t_recv"], 1) for log in logs if log["chunks"]]
        + [(log["chunks"][-1][0], -1) for log in logs if log["chunks"]],
        key=lambda e: (e[0], e[1]),
    )
    return int(np.max(np.cumsum([e[1] for e in events])))


def run(tmp_path, server, policy: str):
    scenario = tmp_path / f"{policy}.yaml"
    scenario.write_text(SCENARIO)
    done = run_locust(
        tmp_path,
        "--host",
        server.url,
        "--scenario",
        str(scenario),
        "--max-concurrency",
        str(CAP),
        "--at-max-concurrency",
        policy,
        "--goodput",
        "ttft:1000",
        "e2el:2000",
        "--run-id",
        policy,
        timeout=180,
    )
    # Exit 5 when dropped arrivals leave no step client-valid: the honest verdict on a capped open loop.
    assert done.returncode in (0, 5), done.stderr[-3000:]
    frame = pd.read_parquet(tmp_path / policy / "requests.parquet")
    summary = json.loads((tmp_path / policy / "summary.json").read_text())
    (step,) = summary["variants"]["ref"]["steps"]
    return done, frame, step, summary


def test_held_arrivals_wait_for_a_slot_and_their_wait_counts_from_the_intended_time(tmp_path, refserver_factory):
    held_server = refserver_factory(*SERVER)
    done, frame, step, summary = run(tmp_path, held_server, "hold")
    assert done.returncode == 0, done.stderr[-3000:]
    logs = held_server.all_logs()
    assert server_overlap(logs) <= CAP  # the server never saw more than the cap at once
    assert len(logs) == frame["t_send"].notna().sum()

    steady = frame[frame["phase"] == "steady"]
    assert steady["error_class"].isna().all(), steady["error_class"].value_counts()  # none dropped
    held = steady[steady["t_slot"].notna()]
    assert step["held"] == len(held) > len(steady) / 4
    # Sent once its slot freed, and its latency runs from the intended time, the wait included.
    assert (held["t_send"] >= held["t_slot"]).all() and (held["t_slot"] > held["t_intended"]).all()
    ttft_sched_ms = (held["t_first"] - held["t_intended"]) * 1000
    assert (ttft_sched_ms >= (held["t_slot"] - held["t_intended"]) * 1000 + 200 - 5).all()  # 0.2 s to first token
    # The schedule lag is the client's own lateness (from the slot), not the cap's queue: the step stays valid.
    assert step["schedule_lag_ms"]["p99"] < 50 and step["client_valid"] is not False
    assert step["ttft_sched_ms"]["p50"] > step["ttft_ms"]["p50"]
    # --goodput in vLLM's spelling became the run's SLOs: a request is good when TTFT_sched <= 1 s and E2E_sched <= 2 s.
    assert summary["slo"] == {"ttft_ms": 1000.0, "ttfot_ms": None, "tpot_ms": None, "e2e_ms": 2000.0}
    sent = steady[steady["t_send"].notna()]
    good = ((sent["t_first"] - sent["t_intended"]) <= 1.0) & ((sent["t_end"] - sent["t_intended"]) <= 2.0)
    assert step["goodput_rps"] * step["window_s"] == good.sum()
    print(
        f"hold: {len(steady)} arrivals, {step['held']} held (wait p50 {step['held_ms']['p50']:.0f} ms), 0 dropped; "
        f"TTFT_sched p50 {step['ttft_sched_ms']['p50']:.0f} ms p99 {step['ttft_sched_ms']['p99']:.0f} ms; "
        f"TTFT p50 {step['ttft_ms']['p50']:.0f} ms; goodput {step['goodput_rps']:.2f} req/s"
    )


def test_dropped_arrivals_are_failures_and_the_sent_ones_wait_for_nothing(tmp_path, refserver_factory):
    dropped_server = refserver_factory(*SERVER)
    done, frame, step, _ = run(tmp_path, dropped_server, "drop")
    assert server_overlap(dropped_server.all_logs()) <= CAP
    steady = frame[frame["phase"] == "steady"]
    dropped = steady[steady["error_class"] == "dropped_inflight_cap"]
    assert len(dropped) > len(steady) / 4 and dropped["t_send"].isna().all()
    assert step["held"] == 0 and frame["t_slot"].isna().all()
    assert step["errors_by_class"]["dropped_inflight_cap"] == len(dropped)
    assert step["client_valid"] is False  # arrivals dropped: the offered rate was not sent
    print(
        f"drop: {len(steady)} arrivals, {len(dropped)} dropped, 0 held; TTFT_sched p50 "
        f"{step['ttft_sched_ms']['p50']:.0f} ms p99 {step['ttft_sched_ms']['p99']:.0f} ms; exit {done.returncode}"
    )

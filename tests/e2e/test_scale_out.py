"""Scale-out against reference servers whose capacity is known: two servers of 2 slots each (the slope is 2), and
one server reached through two URLs (a shared capacity: the slope is 1), measured by real headless runs, the first
with ``--processes 2``; a replica that does not answer fails the run with exit 6; and launched llama.cpp replicas
whose own logs account for every record."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from tests.helpers import REPO, assert_run_completed, require_llama_server, run_locust

SLOTS, TTFT_S, GAP_S, TOKENS = 2, 0.05, 0.01, 20

SCENARIO = f"""
name: scale
server: {{engine: external, url: "http://127.0.0.1:9"}}
variants: {{ref: {{}}}}
load:
  mode: closed
  ladder: [4]
  step_duration_s: 12  # 6 s windows held 6 cycle batches of 8 cycles: a drift test too noisy to pass at random
  warmup_s: 1.5
  prompt_tokens: 16
  max_tokens: {TOKENS}
  contention_cores: 100  # judged against the servers' own stamps below, not by what else the machine does
scale_out: {{level: 4, pairs: 2}}
"""


def service_s(server) -> float:
    """The server's own time per request in a slot: its first slot to its last chunk (median)."""
    logs = [log for log in server.all_logs() if log["complete"] and log.get("t_slot") is not None]
    return float(np.median([log["chunks"][-1][0] - log["t_slot"] for log in logs]))


@pytest.mark.parametrize("shared", [False, True], ids=["two servers", "one server behind two URLs"])
def test_the_slope_of_known_capacities(tmp_path, refserver_factory, shared):
    flags = ("--slots", str(SLOTS), "--ttft-s", str(TTFT_S), "--gap-s", str(GAP_S))
    first = refserver_factory(*flags)
    second = first if shared else refserver_factory(*flags)
    # The same server under another name: the tool cannot know, the slope must show it.
    other = f"http://localhost:{first.port}" if shared else second.url
    scenario = tmp_path / "scale.yaml"
    scenario.write_text(SCENARIO)
    extra = () if shared else ("--processes", "2")
    done = run_locust(
        tmp_path,
        "--host",
        first.url,
        "--scale-out-urls",
        other,
        "--scenario",
        str(scenario),
        "--run-id",
        "scale",
        *extra,
        timeout=240,
    )
    run_dir = tmp_path / "scale"
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert done.returncode == verdict["exit_code"] == 0, done.stderr[-3000:]
    (scale,) = json.loads((run_dir / "summary.json").read_text())["scale_out"]["variants"]
    # Both servers run on this machine: found by their URLs, their CPU is the run's own, not another job's.
    servers = json.loads((run_dir / "env.json").read_text())["servers"]["ref"]
    assert servers["local_pids"] == [first.proc.pid]
    assert [r["local_pids"] for r in servers["replicas"]] == [[second.proc.pid]]

    # Truth from the servers' own stamps: each serves SLOTS streams at a time, one request per service time.
    one_truth = SLOTS / service_s(first)
    assert one_truth == pytest.approx(SLOTS / (TTFT_S + (TOKENS - 1) * GAP_S), rel=0.1)
    assert scale["one_goodput_rps"] == pytest.approx(one_truth, rel=0.1)
    slope_truth = 1.0 if shared else 2.0
    assert scale["slope"] == pytest.approx(slope_truth, rel=0.1)
    assert scale["slope_ci95"][0] <= slope_truth * 1.03 and scale["slope_ci95"][1] >= slope_truth * 0.97
    assert scale["scaling"] == ("no gain" if shared else "linear")
    assert [s["servers"] for s in scale["steps"]] == [1, 2, 2, 1]

    # Every request each server logged is a record that names it, none lost, none misattributed.
    frame = pd.read_parquet(run_dir / "requests.parquet")
    scaled = frame[frame["step"] >= 1]
    logged_first, logged_second = len(first.all_logs()), len(second.all_logs())
    if shared:
        assert logged_first == len(frame)
    else:
        assert (scaled["server"] == 1).sum() == logged_second > 0
        assert (frame["server"].fillna(0) == 0).sum() == logged_first
        assert set(frame["worker"]) == {0, 1}
    two = scaled[scaled["step"].isin([2, 3]) & (scaled["phase"] == "steady")]
    assert abs((two["server"] == 0).mean() - 0.5) < 0.05  # round-robin in each process


def test_a_replica_that_does_not_answer_fails_the_run(tmp_path, refserver_factory):
    server = refserver_factory("--ttft-s", str(TTFT_S), "--gap-s", str(GAP_S))
    scenario = tmp_path / "scale.yaml"
    scenario.write_text(SCENARIO.replace("step_duration_s: 6", "step_duration_s: 2"))
    done = run_locust(
        tmp_path,
        "--host",
        server.url,
        "--scale-out-urls",
        "http://127.0.0.1:9",
        "--scenario",
        str(scenario),
        "--run-id",
        "gone",
        timeout=120,
    )
    verdict = json.loads((tmp_path / "gone" / "verdict.json").read_text())
    assert done.returncode == verdict["exit_code"] == 6, done.stderr[-3000:]
    assert any("scale_out_failed" in reason for reason in verdict["reasons"]["6"])
    assert "http://127.0.0.1:9 does not answer" in done.stderr
    summary = json.loads((tmp_path / "gone" / "summary.json").read_text())
    assert summary["scale_out"]["variants"] == [] and summary["variants"]["ref"]["steps"]


@pytest.mark.server
def test_launched_llamacpp_replicas_serve_what_the_records_say(tmp_path):
    """The CPU test server launched twice (one thread each, so that two share the 2 cores): every request and
    token the second server's own log shows is a record that names it."""
    require_llama_server()
    text = (REPO / "scenarios" / "tiny-cpu-test.yaml").read_text()
    scenario = tmp_path / "scale.yaml"
    scenario.write_text(text.replace('"-np", "4"]', '"-np", "4", "-t", "1"]') + "scale_out: {servers: 2, pairs: 1}\n")
    done = run_locust(
        tmp_path,
        "--scenario",
        str(scenario),
        "--variant",
        "baseline",
        "--ladder",
        "2",
        "--step-duration",
        "4",
        "--run-id",
        "llama",
        timeout=300,
    )
    run_dir = tmp_path / "llama"
    assert_run_completed(done)
    env = json.loads((run_dir / "env.json").read_text())
    (replica,) = env["servers"]["baseline"]["replicas"]
    assert replica["launched"] and replica["url"] != env["servers"]["baseline"]["url"]
    assert "-t 1" in " ".join(replica["command"])
    log = (run_dir / "server-baseline-2.log").read_text()
    served = re.findall(r"\|\s+eval time = +[\d.]+ ms / +(\d+) tokens", log)  # not "prompt eval time"
    frame = pd.read_parquet(run_dir / "requests.parquet")
    second = frame[frame["server"] == 1]
    assert len(second) == len(served) == log.count("stop processing") > 0
    assert second["output_tokens"].sum() == sum(map(int, served))
    assert set(frame.loc[frame["step"] <= 0, "server"].isna()) == {True}  # the ladder is not a scale-out step
    (scale,) = json.loads((run_dir / "summary.json").read_text())["scale_out"]["variants"]
    assert [s["servers"] for s in scale["steps"]] == [1, 2]

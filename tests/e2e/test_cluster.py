"""Locust master and workers as separate processes (as on separate hosts): every record arrives, a worker clock
200 ms off is aligned onto the master's, a worker lost mid-step is recorded and marked, one that joins gets load.

The network-namespace test puts the master and the server in one namespace and two workers in another, joined
by a virtual Ethernet pair that exists only inside them (made and removed by the test; root only).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locust_llm.analysis.summary import build_summary
from locust_llm.rundir import load_run
from locust_llm.rundir.clocks import TIME_COLUMNS
from tests.e2e.test_webui import free_port
from tests.helpers import LOCUSTFILE, REPO, RefServerProcess, terminate

SKEW_S = 0.2
COMMON = ["-f", LOCUSTFILE, "--skip-log"]


def master(tmp_path: Path, port: int, host_url: str, workers: int, *args: str, prefix=(), bind="127.0.0.1"):
    command = [
        *prefix,
        sys.executable,
        "-m",
        "locust",
        *COMMON,
        "--headless",
        "--master",
        "--master-bind-host",
        bind,
        "--master-bind-port",
        str(port),
        "--expect-workers",
        str(workers),
        "--host",
        host_url,
        "--scenario",
        "scenarios/external.yaml",
        "--report-dir",
        str(tmp_path),
        *args,
    ]
    return subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def worker(port: int, skew_s: float = 0.0, prefix=(), master_host="127.0.0.1"):
    env = {**os.environ, "LOCUST_LLM_TEST_CLOCK_OFFSET_S": str(skew_s)}
    command = [
        *prefix,
        sys.executable,
        "-m",
        "locust",
        *COMMON,
        "--worker",
        "--master-host",
        master_host,
        "--master-port",
        str(port),
    ]
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def finish(proc: subprocess.Popen, others: list, timeout_s: float = 240) -> str:
    try:
        _, stderr = proc.communicate(timeout=timeout_s)
    finally:
        for other in [proc, *others]:
            terminate(other, 10)
    return stderr


def wait_for(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"never happened: {what}")


def steps_of(run_dir: Path) -> list[dict]:
    try:
        return json.loads((run_dir / "steps.json").read_text())["steps"]
    except (OSError, ValueError, KeyError):
        return []


def test_a_worker_clock_200_ms_off_is_aligned_onto_the_masters(tmp_path):
    server = RefServerProcess("--ttft-s", "0.02", "--gap-s", "0.005")
    port = free_port()
    boss = master(
        tmp_path, port, server.url, 2, "--ladder", "2,4", "--step-duration", "4", "--warmup", "1", "--run-id", "clock"
    )
    crew = [worker(port), worker(port, SKEW_S)]
    try:
        stderr = finish(boss, crew)
    finally:
        server.stop()
    run_dir = tmp_path / "clock"
    assert (run_dir / "summary.json").exists(), stderr[-3000:]
    estimates = json.loads((run_dir / "clocks.json").read_text())["workers"]
    offsets = sorted((est["offset_s"], int(w)) for w, est in estimates.items())
    (plain, plain_worker), (skewed, skewed_worker) = offsets
    # The injected offset is the truth: measured within a millisecond, and within its own stated uncertainty.
    assert abs(plain) < 1e-3 and abs(skewed - SKEW_S) < 1e-3, estimates
    assert abs(skewed - SKEW_S) <= estimates[str(skewed_worker)]["uncertainty_s"] + 1e-4

    raw = pd.read_parquet(run_dir / "requests.parquet")
    run = load_run(run_dir)
    truth = raw.drop(columns=["chunk_offsets", "chunk_tokens"]).copy()
    mine = (truth["worker"] == skewed_worker).to_numpy()
    for column in TIME_COLUMNS:  # every stamp a worker's clock made, the cycles' ends (t_done) included
        if column in truth:
            truth.loc[mine, column] -= SKEW_S
    assert set(raw["worker"]) == {plain_worker, skewed_worker} and mine.any()
    for column in ("t_send", "t_first", "t_end"):
        gap = np.abs(run.requests[column].to_numpy() - truth[column].to_numpy())
        assert np.nanmax(gap) < 1e-3, column

    def per_step(requests: pd.DataFrame) -> dict:
        copy = load_run(run_dir)
        copy.requests = requests
        return {(s.step, s.level): s.output_tps for v in build_summary(copy).variants.values() for s in v.steps}

    aligned, true = per_step(run.requests), per_step(truth)
    worst = max(np.nanmax(np.abs(run.requests[c].to_numpy() - truth[c].to_numpy())) for c in ("t_send", "t_first"))
    print(
        f"injected {SKEW_S * 1000:.0f} ms: measured {skewed * 1000:.3f} ms (other worker {plain * 1000:.3f} ms); "
        f"largest stamp error after alignment {worst * 1000:.3f} ms; step tok/s aligned vs truth "
        f"{[(round(aligned[k], 1), round(v, 1)) for k, v in true.items()]}"
    )
    for key, value in true.items():
        assert value and abs(aligned[key] - value) <= 0.01 * value, (key, aligned[key], value)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["records"] == len(raw)


@pytest.mark.parametrize("policy", ["stop", "continue"])
def test_a_worker_lost_mid_step(tmp_path, policy):
    scenario = tmp_path / "lossy.yaml"
    scenario.write_text(
        (REPO / "scenarios" / "external.yaml").read_text() + f"  on_worker_loss: {policy}\n  min_requests: 0\n"
    )
    server = RefServerProcess("--ttft-s", "0.02", "--gap-s", "0.005")
    port = free_port()
    boss = master(
        tmp_path,
        port,
        server.url,
        2,
        "--scenario",
        str(scenario),
        "--ladder",
        "2,4,2",
        "--step-duration",
        "8",
        "--warmup",
        "1",
        "--run-id",
        "lossy",
    )
    crew = [worker(port), worker(port)]
    run_dir = tmp_path / "lossy"
    try:
        wait_for(lambda: steps_of(run_dir) and np.isfinite(steps_of(run_dir)[0]["t_steady"]), 120, "a steady window")
        time.sleep(1.0)
        crew[1].send_signal(signal.SIGKILL)  # the host is gone: no goodbye, no last batch
        if policy == "continue":
            wait_for(lambda: len(steps_of(run_dir)) >= 2, 120, "the next step")
            crew.append(worker(port))  # a new worker joins mid-run and gets its share
        stderr = finish(boss, crew)
    finally:
        server.stop()
    steps = json.loads((run_dir / "steps.json").read_text())
    (lost,) = [e for e in steps["events"] if e["kind"] == "worker_lost"]
    print(f"{policy}: {lost}")
    assert lost["step"] == 0 and lost["stopped"] == (policy == "stop") and lost["records_sent"] > 0
    assert steps["steps"][0]["workers_lost"] == [lost["worker"]]
    summary = json.loads((run_dir / "summary.json").read_text())
    first = summary["variants"]["as-running"]["steps"][0]
    assert first["status"] == "worker-lost" and "not held" in first["status_reasons"][0]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    if policy == "stop":
        assert boss.returncode == 5 and verdict["exit_code"] == 5, stderr[-2000:]
        assert any("load.on_worker_loss: stop" in r for r in verdict["reasons"]["5"])
        assert len(steps["steps"]) == 1
    else:
        assert len(steps["steps"]) == 3, stderr[-2000:]
        (joined,) = [e for e in steps["events"] if e["kind"] == "worker_joined"]
        frame = pd.read_parquet(run_dir / "requests.parquet")
        later = frame[frame["step"] == 2]
        assert joined["worker"] in set(later["worker"])  # the newcomer carried load in the last step
        assert lost["worker"] not in set(later["worker"])


def netns_available() -> str | None:
    """Why namespaces cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "the ip command (Debian package iproute2) is not installed"
    probe = f"llm-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot make a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


@pytest.fixture
def two_hosts():
    """Namespaces A (master, server) and B (workers) joined by a veth pair with private addresses."""
    why = netns_available()
    if why:
        pytest.skip(why)
    tag = os.getpid() % 100_000
    a, b, subnet = f"llm-a-{tag}", f"llm-b-{tag}", f"10.{200 + tag % 50}.{tag % 250}"
    commands = [
        ["ip", "netns", "add", a],
        ["ip", "netns", "add", b],
        ["ip", "link", "add", f"va{tag}", "type", "veth", "peer", "name", f"vb{tag}"],
        ["ip", "link", "set", f"va{tag}", "netns", a],
        ["ip", "link", "set", f"vb{tag}", "netns", b],
        ["ip", "-n", a, "addr", "add", f"{subnet}.1/30", "dev", f"va{tag}"],
        ["ip", "-n", b, "addr", "add", f"{subnet}.2/30", "dev", f"vb{tag}"],
        ["ip", "-n", a, "link", "set", f"va{tag}", "up"],
        ["ip", "-n", b, "link", "set", f"vb{tag}", "up"],
        ["ip", "-n", a, "link", "set", "lo", "up"],
        ["ip", "-n", b, "link", "set", "lo", "up"],
    ]
    try:
        for command in commands:
            subprocess.run(command, check=True, capture_output=True)
        yield (["ip", "netns", "exec", a], f"{subnet}.1"), (["ip", "netns", "exec", b], f"{subnet}.2")
    finally:
        for name in (a, b):  # deleting a namespace removes its end of the pair, and so the pair
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


def test_master_and_two_workers_on_another_network_host(tmp_path, two_hosts):
    (in_a, address_a), (in_b, address_b) = two_hosts
    server = subprocess.Popen(
        [
            *in_a,
            sys.executable,
            "-m",
            "locust_llm.refserver",
            "--bind",
            address_a,
            "--port",
            "0",
            "--ttft-s",
            "0.02",
            "--gap-s",
            "0.005",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        url = "http://" + server.stdout.readline().split()[-1]
        port = free_port()
        boss = master(
            tmp_path,
            port,
            url,
            2,
            "--ladder",
            "2,4",
            "--step-duration",
            "3",
            "--warmup",
            "1",
            "--run-id",
            "netns",
            prefix=in_a,
            bind=address_a,
        )
        crew = [worker(port, prefix=in_b, master_host=address_a) for _ in range(2)]
        stderr = finish(boss, crew)
        fetch = f"import urllib.request; print(urllib.request.urlopen('{url}/ref/logs', timeout=10).read().decode())"
        logs = json.loads(
            subprocess.run(
                [*in_a, sys.executable, "-c", fetch], capture_output=True, text=True, timeout=60, check=True
            ).stdout
        )["logs"]
    finally:
        terminate(server, 10)
    frame = pd.read_parquet(tmp_path / "netns" / "requests.parquet")
    # The load came over the link from the workers' host; only the master's consistency prompts came from its own.
    from_workers = [log for log in logs if log["client"] == address_b]
    assert {log["client"] for log in logs} <= {address_a, address_b}
    print(f"namespaces: {len(frame)} rows, {len(from_workers)} requests the server received from the workers' host")
    assert len(frame) == len(from_workers) > 0, stderr[-2000:]
    assert set(frame["worker"]) == {0, 1} and frame["request_id"].is_unique

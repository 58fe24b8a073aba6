"""Records reach the master from workers without loss: --processes, and an in-process master with two workers."""

import json
import os
import socket
import subprocess
import sys

import gevent
import pandas as pd
import pytest
from locust.argument_parser import get_parser
from locust.env import Environment
from locust.event import Events

from locust_llm.runtime import plugin
from locust_llm.runtime.shape import LadderShape
from locust_llm.runtime.users import ClosedLoopUser, OpenLoopUser
from tests.helpers import REPO, assert_run_completed, require_llama_server

LOCUSTFILE = str(REPO / "locustfiles" / "spec_decode.py")


def locust_json(stdout: str) -> list[dict]:
    """Locust's --json stats of the master; forked children print an empty list first."""
    return json.loads(stdout[stdout.index("[\n") :])


@pytest.mark.server
def test_processes_two_records_every_request(tmp_path):
    require_llama_server()
    command = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        LOCUSTFILE,
        "--headless",
        "--processes",
        "2",
        "--json",
        "--skip-log",
        "--scenario",
        "scenarios/tiny-cpu-test.yaml",
        "--variant",
        "spec-k4",
        "--ladder",
        "2,4",
        "--step-duration",
        "3",
        "--warmup",
        "1",
        "--run-id",
        "procs",
        "--report-dir",
        str(tmp_path),
    ]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, env=os.environ.copy())
    assert_run_completed(done)
    made = sum(entry["num_requests"] for entry in locust_json(done.stdout))
    frame = pd.read_parquet(tmp_path / "procs" / "requests.parquet")
    assert len(frame) == made > 0
    assert frame["request_id"].is_unique
    assert set(frame["worker"]) == {0, 1}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.server
def test_in_process_master_and_two_workers(tmp_path, monkeypatch):
    require_llama_server()
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(sys, "argv", ["locust"])  # the web-UI arg parser reads sys.argv
    args = [
        "-f",
        LOCUSTFILE,
        "--headless",
        "--scenario",
        "scenarios/tiny-cpu-test.yaml",
        "--variant",
        "baseline",
        "--ladder",
        "2,4",
        "--step-duration",
        "3",
        "--warmup",
        "1",
        "--run-id",
        "inproc",
        "--report-dir",
        str(tmp_path),
    ]
    port = free_port()
    classes = [ClosedLoopUser, OpenLoopUser]

    def node_environment(**kwargs) -> Environment:
        # Each node gets its own event hooks, as separate processes would, so Locust's stats travel as usual.
        hooks = Events()
        plugin.register(hooks)
        return Environment(user_classes=classes, events=hooks, parsed_options=get_parser().parse_args(args), **kwargs)

    master_env = node_environment(shape_class=LadderShape())
    master = master_env.create_master_runner("127.0.0.1", port)
    master_env.events.init.fire(environment=master_env, runner=master, web_ui=None)
    workers = []
    for _ in range(2):
        env = node_environment()
        worker = env.create_worker_runner("127.0.0.1", port)
        env.events.init.fire(environment=env, runner=worker, web_ui=None)
        workers.append(worker)

    try:
        with gevent.Timeout(60):
            while master.worker_count < 2:
                gevent.sleep(0.1)
        master.start_shape()
        with gevent.Timeout(240):
            master.greenlet.join()  # the shape drains, then quits the master
    finally:
        master_env.events.quitting.fire(environment=master_env, reverse=True)
        for worker in workers:
            worker.quit()
    frame = pd.read_parquet(tmp_path / "inproc" / "requests.parquet")
    recorded_per_worker = frame["worker"].value_counts().to_dict()
    locust_total = master.stats.total.num_requests
    assert len(frame) == locust_total > 0
    assert frame["request_id"].is_unique
    assert set(recorded_per_worker) == {0, 1}
    assert not json.loads((tmp_path / "inproc" / "steps.json").read_text())["events"]

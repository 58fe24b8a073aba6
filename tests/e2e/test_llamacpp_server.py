"""The real CPU llama.cpp server with real speculative decoding on the generated test pair."""

import re
import signal
import subprocess
import sys

import psutil
import pytest
import requests

from locust_llm.scenario import load_scenario
from locust_llm.servers import launch_variant
from tests.helpers import REPO, require_llama_server

SCENARIO = REPO / "scenarios" / "tiny-cpu-test.yaml"
PROMPTS = ["the rest of the day", "once upon a time there", "bo zi wa fi la"]


def spec_counters(base_url: str) -> dict[str, float]:
    values = {}
    for line in requests.get(f"{base_url}/metrics", timeout=10).text.splitlines():
        if line.startswith("llamacpp:spec_decode_num_") and "{" not in line:
            name, value = line.split()
            values[name] = float(value)
    return values


def greedy_tokens(base_url: str, prompt: str) -> tuple[list[int], dict]:
    body = {"prompt": prompt, "n_predict": 48, "temperature": 0, "return_tokens": True, "ignore_eos": True}
    answer = requests.post(f"{base_url}/completion", json=body, timeout=60).json()
    return answer["tokens"], answer["timings"]


@pytest.mark.server
def test_speculation_is_real_and_lossless(tmp_path):
    require_llama_server()
    scenario = load_scenario(SCENARIO)
    outputs: dict[str, list[list[int]]] = {}
    timings: dict[str, list[dict]] = {}
    counters = {}
    for variant in ("baseline", "spec-k4"):
        with launch_variant(scenario, variant, log_dir=tmp_path) as server:
            runs = [greedy_tokens(server.base_url, p) for p in PROMPTS]
            outputs[variant] = [tokens for tokens, _ in runs]
            timings[variant] = [t for _, t in runs]
            counters[variant] = spec_counters(server.base_url)
        assert (tmp_path / f"server-{variant}.log").stat().st_size > 0

    assert outputs["spec-k4"] == outputs["baseline"], "greedy output changed under speculation"
    assert all(len(tokens) == 48 for tokens in outputs["baseline"])
    assert all(t.get("draft_n_accepted", 0) > 0 for t in timings["spec-k4"])
    assert counters["spec-k4"]["llamacpp:spec_decode_num_accepted_tokens_total"] > 0
    assert counters["spec-k4"]["llamacpp:spec_decode_num_accepted_tokens_total"] == sum(
        t["draft_n_accepted"] for t in timings["spec-k4"]
    )
    assert all("draft_n" not in t for t in timings["baseline"])
    assert counters["baseline"].get("llamacpp:spec_decode_num_drafts_total", 0) == 0


@pytest.mark.server
def test_serve_runs_until_ctrl_c(tmp_path):
    require_llama_server()
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "locust_llm.cli",
            "serve",
            "--scenario",
            str(SCENARIO),
            "--variant",
            "spec-k4",
            "--log-dir",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = [serve.stdout.readline() for _ in range(2)]
        url = re.search(r"at (http://127\.0\.0\.1:\d+)", lines[1]).group(1)
        assert requests.get(f"{url}/health", timeout=10).status_code == 200
        server_pids = [p.pid for p in psutil.Process(serve.pid).children(recursive=True)]
        assert server_pids
        serve.send_signal(signal.SIGINT)
        assert serve.wait(timeout=60) == 0
        assert not any(
            psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in server_pids
        )
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()

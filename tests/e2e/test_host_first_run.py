"""``--host`` as a first run: against a server the run did not start, with no ``--scenario``, the checks that cannot
be judged are skipped with one line each, the console says what the numbers rest on, and every request the server
received is accounted for: the reference server's own count (``GET /ref/received``) equals the measured streams
(the rows of ``requests.parquet`` that were sent) plus the requests ``env.json`` lists."""

import json
import socket
import urllib.request
from collections import Counter

import pandas as pd
import pytest

from tests.helpers import assert_run_completed, run_locust


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def received(url: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{url}/ref/received", timeout=10) as answer:
        return json.loads(answer.read())


@pytest.mark.parametrize(("api", "processes", "cache"), [("completions", 1, False), ("chat", 2, True)])
def test_every_request_the_server_received_is_accounted_for(tmp_path, refserver_factory, api, processes, cache):
    # With its prompt cache the reference server reports cached tokens and serves /metrics; without it, neither
    # (its /metrics answers 404, and the scrapes are counted all the same).
    server = refserver_factory() if cache else refserver_factory("--cache-block", "0")
    args = ["--host", server.url, "--api", api, "--ladder", "2", "--repeats", "1", "--step-duration", "2"]
    args += ["--warmup", "0.5", "--run-id", "host"]
    if processes > 1:  # the workers' token counting reaches the master with their records
        port = str(free_port())
        args += ["--processes", str(processes), "--master-bind-port", port, "--master-port", port]
    before = Counter(received(server.url))  # the fixture's own health checks
    done = run_locust(tmp_path, *args)
    assert_run_completed(done)
    run = tmp_path / "host"
    counted = dict(Counter(received(server.url)) - before)
    # Nothing was asked that could not be judged: one line each says why and how to turn it on.
    skipped = [line for line in done.stderr.splitlines() if line.startswith("skipped: ")]
    assert [line.split(":")[1].split()[0] for line in skipped] == ["quality", "consistency", "cost"]
    assert all("give --" in line for line in skipped)
    assert not (run / "quality.json").exists() and not (run / "consistency.json").exists()
    path = "/v1/chat/completions" if api == "chat" else "/v1/completions"
    assert "POST /completion" not in counted and set(counted) >= {f"POST {path}", "POST /tokenize"}
    # The reconciliation: streams sent + every other request listed = what the server counted, path by path.
    frame = pd.read_parquet(run / "requests.parquet")
    env = json.loads((run / "env.json").read_text())
    ours = Counter({f"POST {path}": int(frame["t_send"].notna().sum())})
    for entry in env["server_requests"]:
        ours[f"{entry['method']} {entry['path']}"] += entry["count"]
    assert dict(ours) == counted
    # While a step ran (its warm-up, its window, its last streams arriving): the telemetry scrapes, never token
    # counting (sizing the prompts comes before, splitting totals and checking usage in the pauses).
    steps = {(s["variant"], s["step"]) for s in json.loads((run / "steps.json").read_text())["steps"]}
    running = {e["path"]: e["while_running"] for e in env["server_requests"]}
    assert running["/tokenize"] == [] and running["/metrics"]
    assert {(s["variant"], s["step"]) for s in running["/metrics"]} <= steps
    scraped = sum(s["count"] for s in running["/metrics"])
    assert 0 < scraped < ours["GET /metrics"]  # the first scrapes come before the first step
    assert f"GET /metrics {ours['GET /metrics']:,} (telemetry; {scraped:,} while a step ran)" in done.stderr
    # The summary and the console say the same, in words.
    summary = json.loads((run / "summary.json").read_text())
    facts = summary["detected"]["external"]
    assert facts["accounted"] == counted and facts["launched"] is False
    assert facts["cached_prompt_tokens"] is cache and "cumulative usage on every chunk" in facts["usage"]
    assert f"server of external: {server.url}, already running (--host)" in done.stderr
    metrics = "/metrics found" if cache else "/metrics not found"
    assert "owned_by locust-llm-refserver" in done.stderr and metrics in done.stderr


def test_a_quality_section_that_cannot_be_compared_is_not_judged(tmp_path, refserver):
    """One variant (not the baseline) against --host with an explicit quality: section: its answers are scored and
    shown, the gate is not judged (no baseline to compare with), and the run does not fail on it."""
    scenario = tmp_path / "host-quality.yaml"
    scenario.write_text(
        "name: host-quality\nserver: {engine: external, url: http://127.0.0.1:1}\nvariants: {baseline: {}, mine: {}}\n"
        "load: {ladder: [1], step_duration_s: 2, warmup_s: 0.5, min_requests: 1}\n"
        "quality: {seeds: 1, temperature: 0.5, max_drop_pct: 5}\n"
    )
    args = ["--scenario", str(scenario), "--host", refserver.url, "--variant", "mine", "--run-id", "q"]
    done = run_locust(tmp_path, *args)
    assert_run_completed(done)
    summary = json.loads((tmp_path / "q" / "summary.json").read_text())
    quality = summary["quality"]
    assert quality["judged"] is False and quality["variants"]["mine"]["eligible"] is True
    assert "not judged" in quality["variants"]["mine"]["text"]
    assert "3" not in json.loads((tmp_path / "q" / "verdict.json").read_text())["reasons"]

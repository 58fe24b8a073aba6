"""Probes and faults in real headless runs: the probe table of the CPU llama.cpp test server with a pause and a
restart while the ladder holds its level, and a server that crashes on a probe failing the run with exit 6."""

import json

import pandas as pd
import pytest
import yaml

from locust_llm.client.probes import PROBES
from tests.helpers import REPO, require_llama_server, run_locust

PAUSE_S = 5.0
STEP_S = 10.0


def events_of(run, kind: str) -> list[dict]:
    return [e for e in json.loads((run / "steps.json").read_text())["events"] if e["kind"] == kind]


@pytest.mark.server
def test_probe_table_pause_and_restart_on_the_cpu_server(tmp_path):
    require_llama_server()
    scenario = yaml.safe_load((REPO / "scenarios" / "tiny-cpu-test.yaml").read_text())
    scenario["probes"] = {"faults": ["pause", "restart"], "pause_s": PAUSE_S}
    path = tmp_path / "probes.yaml"
    path.write_text(yaml.safe_dump(scenario))
    done = run_locust(
        tmp_path,
        "--scenario",
        str(path),
        "--variant",
        "baseline",
        "--probes",
        "--ladder",
        "2",
        "--repeats",
        "3",
        "--order",
        "sequential",
        "--step-duration",
        str(STEP_S),
        "--warmup",
        "1",
        "--run-id",
        "p",
        timeout=400,
    )
    run = tmp_path / "p"
    assert done.returncode in (0, 5), done.stderr[-3000:]  # 5: a busy machine left no step clean; never 6
    rows = json.loads((run / "probes.json").read_text())["probes"]
    probes = {r["probe"]: r for r in rows if r["kind"] == "probe"}
    assert list(probes) == [p.name for p in PROBES]
    # llama.cpp's own answers: a 400 with its message for what it refuses, a completion for what it accepts.
    assert {name: r["verdict"] for name, r in probes.items()} == {name: "ok" for name in probes}
    assert all(r["recovered"] and r["recover_ms"] < 30_000 for r in rows)
    context = json.loads((run / "env.json").read_text())["servers"]["baseline"]["context_size"]
    assert context == 512  # -c 2048 over -np 4 slots
    assert probes["prompt_at_context"]["status"] == 200
    assert probes["prompt_at_context"]["note"].startswith(f"prompt {context - 4} + output 4 of a {context}")
    assert probes["prompt_over_context"]["status"] == 400
    assert "exceeds the available context size" in probes["prompt_over_context"]["error"]
    assert probes["output_to_context"]["answer"].endswith("finish length")
    for name in ("invalid_utf8", "temperature_not_a_number", "negative_max_tokens"):
        assert probes[name]["status"] == 400 and probes[name]["error"], name
    assert probes["burst"]["answer"].startswith("4 x 200")  # twice the highest ladder level

    steps = json.loads((run / "steps.json").read_text())["steps"]
    (paused,) = events_of(run, "server_paused")
    assert paused["t_end"] - paused["t_start"] == pytest.approx(PAUSE_S, abs=0.5)
    window = next(s for s in steps if s["step"] == paused["step"])
    assert window["t_steady"] < paused["t_start"] < paused["t_end"] < window["t_end"]
    (restarted,) = events_of(run, "server_restarted")
    assert restarted["step"] != paused["step"]
    summary = json.loads((run / "summary.json").read_text())
    statuses = {s["step"]: s["status"] for s in summary["variants"]["baseline"]["steps"]}
    assert statuses[paused["step"]] == statuses[restarted["step"]] == "fault-injected"
    pause_row = next(r for r in summary["probes"]["rows"] if r["probe"] == "pause")
    # Closed loop: the streams in flight when the server stopped waited the whole pause (no new one was sent).
    assert pause_row["figures"]["in_flight"] >= 1
    assert pause_row["figures"]["in_flight_e2e_max_ms"] >= 1000 * (PAUSE_S - 0.5)
    others = [s for s in summary["variants"]["baseline"]["steps"] if s["status"] != "fault-injected"]
    assert others and all(s["e2e_all_ms"]["p99"] < 1000 * (PAUSE_S - 0.5) for s in others)
    # After the restart the users sent to the new server (a new port is told to them) and were answered.
    frame = pd.read_parquet(run / "requests.parquet")
    after = frame[(frame["step"] == restarted["step"]) & (frame["t_send"] > restarted["t_end"])]
    assert len(after) > 0 and after["error_class"].isna().all()
    html = (run / "report.html").read_text()
    assert 'id="probes"' in html and "exceeds the available context size" in html
    assert "probes: 13 ok of 13 probes and faults" in done.stderr


def test_a_server_that_crashes_on_a_probe_fails_the_run_with_exit_6(tmp_path, refserver_factory):
    server = refserver_factory("--ttft-s", "0.005", "--gap-s", "0.002", "--exit-on", "\\u0000")
    scenario = tmp_path / "ref.yaml"
    scenario.write_text(
        "name: ref\nserver: {engine: external, url: 'http://127.0.0.1:9'}\nvariants: {ref: {}}\n"
        "load: {ladder: [1], step_duration_s: 2, warmup_s: 0, prompt_tokens: 16, max_tokens: 8}\n"
        "probes: {recover_s: 3}\n"
    )
    done = run_locust(
        tmp_path, "--host", server.url, "--scenario", str(scenario), "--probes", "--run-id", "c", timeout=120
    )
    assert done.returncode == 6, done.stderr[-3000:]
    assert "[exit 6] probe_server_failed: variant ref at probe control_characters" in done.stderr
    verdict = json.loads((tmp_path / "c" / "verdict.json").read_text())
    assert verdict["exit_code"] == 6
    rows = json.loads((tmp_path / "c" / "summary.json").read_text())["probes"]["rows"]
    assert [r["verdict"] for r in rows if r["probe"] == "control_characters"] == ["server-failed"]
    assert server.proc.wait(5) == 70

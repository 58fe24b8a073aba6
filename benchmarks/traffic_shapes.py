"""Conversations and trace replay against the reference server, whose log is the truth: what each request carried
and when it arrived.

1. A 3-turn conversation run (chat, 4 users, 10 s; ``--unique-answers``, so every answer is its own): how many
   messages each conversation's requests carried (1, 3, 5), whether each assistant message is exactly the answer
   the server sent for that turn, and TTFT by turn from ``summary.json``.
2. ``scenarios/traces/bursty-mooncake.jsonl`` (68 records in 39.5 s: bursts of 8 every 6.5 s, shared
   system-prompt blocks of 64 tokens, three prompts over a 512-token context) replayed at 1x: the server's receipt
   time of each record after the first against the trace's, prompt and output lengths against the trace, and the
   prompt text shared by records that share leading hash ids.

    python benchmarks/traffic_shapes.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import urllib.request
from collections import defaultdict
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))

from peer_accuracy import RefServer  # noqa: E402

from locust_llm.runtime.session import workload_for  # noqa: E402
from locust_llm.scenario import load_scenario  # noqa: E402

TRACE = REPO / "scenarios" / "traces" / "bursty-mooncake.jsonl"
BLOCK = 64
CONTEXT = 512


def logs_of(server: RefServer) -> list[dict]:
    with urllib.request.urlopen(server.url + "/ref/logs", timeout=30) as response:
        return json.loads(response.read())["logs"]


def headless(server: RefServer, work: Path, scenario_text: str, run_id: str) -> dict:
    scenario = work / f"{run_id}.yaml"
    scenario.write_text(textwrap.dedent(scenario_text))
    command = [sys.executable, "-m", "locust", "-f", "locustfiles/spec_decode.py", "--headless", "--skip-log"]
    command += ["--host", server.url, "--scenario", str(scenario), "--report-dir", str(work), "--run-id", run_id]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    print(f"  {run_id}: exit {done.returncode} (5: the shared machine left a step unclean; the figures stand)")
    return json.loads((work / run_id / "summary.json").read_text())


def conversations(work: Path, seconds: float) -> None:
    server = RefServer(["--ttft-s", "0.02", "--gap-s", "0.005", "--unique-answers"])
    try:
        summary = headless(
            server,
            work,
            f"""
            name: conversations
            server: {{engine: external, url: "http://127.0.0.1:9"}}
            variants: {{ref: {{}}}}
            load: {{api: chat, ladder: [4], step_duration_s: {seconds}, warmup_s: 1, prompt_tokens: 32,
                   max_tokens: 16, conversation: {{turns: 3, think_s: 0.1}}}}
            """,
            "conversations",
        )
        sessions = defaultdict(list)
        for log in sorted(logs_of(server), key=lambda entry: entry["t_recv"]):
            sessions[log["headers"].get("x-session-id")].append(log)
    finally:
        server.stop()
    shapes = defaultdict(int)
    matched = checked = 0
    for logs in sessions.values():
        shapes[tuple(len(log["messages"]) for log in logs)] += 1
        final = logs[-1]["messages"]
        for turn, log in enumerate(logs[:-1]):
            checked += 1
            matched += final[2 * turn + 1]["content"] == log["answer"]
    print(f"  {len(sessions)} conversations; messages per request, by conversation: {dict(shapes)}")
    print(f"  assistant messages equal to the answer the server sent for that turn: {matched} of {checked}")
    for step in summary["variants"]["ref"]["steps"]:
        turns = ", ".join(f"turn {t['turn']} {t['ttft_p50_ms']:.1f} ms (n={t['requests']})" for t in step["by_turn"])
        print(f"  TTFT P50 by turn: {turns}; conversations: {step['conversations']}")


def replay(work: Path) -> None:
    records = [json.loads(line) for line in TRACE.read_text().splitlines() if line.strip()]
    server = RefServer(["--ttft-s", "0.01", "--gap-s", "0.002", "--max-model-len", str(CONTEXT)])
    try:
        text = f"""
            name: replay
            server: {{engine: external, url: "http://127.0.0.1:9"}}
            variants: {{ref: {{}}}}
            load: {{warmup_s: 0, trace: {{path: {TRACE}, format: mooncake, block_tokens: {BLOCK}}}}}
            """
        summary = headless(server, work, text, "replay")
        prompts = workload_for(load_scenario(work / "replay.yaml").load, server.url, work).trace
        by_prompt = defaultdict(list)  # records with the same hash ids and length have the same prompt
        for log in sorted(logs_of(server), key=lambda entry: entry["t_recv"]):
            by_prompt[log["prompt"]].append(log)
    finally:
        server.stop()
    (step,) = summary["variants"]["ref"]["steps"]
    fits = [i for i, r in enumerate(records) if r["input_length"] + r["output_length"] <= CONTEXT]
    received = {}
    for i in fits:  # in trace order: the k-th record with a prompt is the k-th request the server got with it
        same = by_prompt.get(prompts.item(i, step["step"]).prompt)
        if same:
            received[i] = same.pop(0)
    lengths = sum(
        len(log["prompt"].split()) == records[i]["input_length"]
        and sum(c[1] for c in log["chunks"]) == log["max_tokens"] == records[i]["output_length"]
        for i, log in received.items()
    )
    first = min(received)
    errors = [
        ((log["t_recv"] - received[first]["t_recv"]) - (records[i]["timestamp"] - records[first]["timestamp"]) / 1e3)
        * 1e3
        for i, log in received.items()
        if i != first
    ]
    pairs = wrong = 0
    for a in received:
        for b in received:
            if a < b:
                shared = len(os.path.commonprefix([records[a]["hash_ids"], records[b]["hash_ids"]]))
                common = len(os.path.commonprefix([received[x]["prompt"].split() for x in (a, b)]))
                pairs += shared > 0
                wrong += not shared * BLOCK <= common < (shared + 1) * BLOCK
    over = len(records) - len(fits)
    print(f"  {len(received)} of {len(records)} records reached the server ({over} over the {CONTEXT}-token context)")
    print(f"  prompt and output lengths equal to the trace's: {lengths} of {len(received)}")
    p50, p99 = np.percentile(errors, [50, 99])
    print(f"  server receipt after the first vs the trace: error P50 {p50:+.2f} ms, P99 {p99:+.2f} ms")
    print(
        f"  record pairs sharing leading hash ids: {pairs}; pairs (of all) whose text shares other than those: {wrong}"
    )
    print(f"  the step's own figures: {step['trace']['text']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        print("conversations (reference server):")
        conversations(Path(work), args.seconds)
        print("Mooncake replay (reference server):")
        replay(Path(work))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Production-shaped load in real headless runs. The reference server's own log is the truth: what each request
carried (its messages and their roles, its prompt's words, its session header), when it arrived, and the answer
the server sent; trace files are read here with json/csv, independently of the code under test."""

import csv
import json
import os
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locust_llm.runtime.session import workload_for
from locust_llm.scenario import load_scenario
from tests.helpers import assert_run_completed, pair_scenario, require_llama_server, run_locust

CONVERSATION = """
name: conversation
server: {engine: external, url: "http://127.0.0.1:9"}
variants: {ref: {}}
load:
  api: chat
  ladder: [3]
  step_duration_s: 3
  warmup_s: 0.5
  min_requests: 5
  prompt_tokens: 12
  max_tokens: 6
  conversation: {turns: 3, think_s: 0.05}
"""


def run(tmp_path: Path, server, text: str, run_id: str, *args: str):
    scenario = tmp_path / f"{run_id}.yaml"
    scenario.write_text(text)
    return run_locust(tmp_path, "--host", server.url, "--scenario", str(scenario), "--run-id", run_id, *args)


def test_each_turn_carries_the_history_with_the_answers_the_server_sent(tmp_path, refserver_factory):
    server = refserver_factory("--ttft-s", "0.01", "--gap-s", "0.003", "--unique-answers")
    done = run(tmp_path, server, CONVERSATION, "conv")
    assert_run_completed(done)
    frame = pd.read_parquet(tmp_path / "conv" / "requests.parquet")
    assert frame["error_class"].isna().all(), frame["error_class"].value_counts()

    # The server's log, one conversation per session header, in the order it received them.
    sessions = defaultdict(list)
    for log in sorted(server.all_logs(), key=lambda entry: entry["t_recv"]):
        sessions[log["headers"]["x-session-id"]].append(log)
    assert len(sessions) == frame.groupby(["worker", "conversation"]).ngroups > 5
    complete = 0
    for logs in sessions.values():
        counts = [len(log["messages"]) for log in logs]
        assert counts == [1, 3, 5][: len(logs)], counts  # 1, 3 and 5 messages: the whole history each time
        complete += counts == [1, 3, 5]
        final = logs[-1]["messages"]
        assert [m["role"] for m in final] == ["user", "assistant"] * (len(logs) - 1) + ["user"]
        for turn, log in enumerate(logs[:-1]):
            # the assistant message of each later request is exactly what the server sent for that turn
            assert final[2 * turn + 1]["content"] == log["answer"]
            assert log["answer"].split()[0].endswith(log["tag"])  # that stream's own answer, not another one's
            assert final[2 * turn]["content"] == log["messages"][-1]["content"]  # the same user message again
        # each user message has the exact length asked for, and the client counted the whole request as sent
        assert all(len(final[i]["content"].split()) == 12 for i in range(0, len(final), 2))
    assert complete > 5

    turns = frame.set_index(["worker", "conversation", "turn"])
    for session, logs in sessions.items():
        worker, number = int(session.split("-w")[1].split("-")[0]), int(session.rsplit("-c", 1)[1])
        for turn, log in enumerate(logs, start=1):
            assert turns.loc[(worker, number, turn), "prompt_tokens"] == len(log["prompt"].split())

    summary = json.loads((tmp_path / "conv" / "summary.json").read_text())
    step = summary["variants"]["ref"]["steps"][0]
    steady = frame[frame["phase"] == "steady"]
    assert [t["turn"] for t in step["by_turn"]] == [1, 2, 3]
    for figures in step["by_turn"]:
        mine = steady[steady["turn"] == figures["turn"]]
        assert figures["requests"] == len(mine) > 0 and figures["ttft_p50_ms"] > 0
        assert figures["prompt_tokens"] == 12 * figures["turn"] + 6 * (figures["turn"] - 1)  # the server's words
    outcome = step["conversations"]
    assert outcome["started"] == outcome["completed"] + outcome["cut_short"] + outcome["failed"] + outcome["dropped"]
    assert outcome["turns_sent"] == len(frame) and outcome["failed"] == outcome["dropped"] == 0
    assert "Conversations by turn" in (tmp_path / "conv" / "report.html").read_text()


def test_open_loop_conversations_start_on_the_schedule_and_answer_then_think(tmp_path, refserver_factory):
    server = refserver_factory("--ttft-s", "0.01", "--gap-s", "0.003", "--unique-answers")
    text = CONVERSATION.replace("api: chat", "api: chat\n  mode: open\n  arrival: constant").replace(
        "think_s: 0.05", "think_s: 0.2"
    )
    done = run(tmp_path, server, text, "open")
    assert_run_completed(done)
    frame = pd.read_parquet(tmp_path / "open" / "requests.parquet")
    assert frame["error_class"].isna().all(), frame["error_class"].value_counts()
    turns = frame.set_index(["worker", "conversation", "turn"]).sort_index()
    firsts = turns.xs(1, level="turn")["t_intended"].sort_values().diff().dropna()
    assert firsts.to_numpy() == pytest.approx(1 / 3, abs=1e-6)  # a conversation arrives every 1/3 s
    later = 0
    for (worker, number, turn), row in turns.iterrows():
        if turn > 1:
            before = turns.loc[(worker, number, turn - 1)]
            assert row["t_intended"] == pytest.approx(before["t_done"] + 0.2, abs=1e-6)  # the answer, then think
            assert row["t_send"] >= row["t_intended"]
            later += 1
    assert later > 5
    sessions = defaultdict(list)
    for log in server.all_logs():
        sessions[log["headers"]["x-session-id"]].append(len(log["messages"]))
    assert {tuple(sorted(counts)) for counts in sessions.values()} <= {(1,), (1, 3), (1, 3, 5)}


BLOCK = 16


def bursty_trace() -> list[dict]:
    """Four bursts of 16 records 10 ms apart, 0.8 s between bursts; every other record starts with the shared
    chain of hash ids 1, 2 (whole 16-token blocks); two prompts too long for a 150-token context."""
    records, fresh = [], 100
    for burst in range(4):
        for i in range(16):
            n = [20, 33, 48, 64, 90][(burst + i) % 5]
            if (burst, i) in ((1, 3), (2, 9)):
                n = 200
            blocks = -(-n // BLOCK)
            ids = [1, 2][: min(2, n // BLOCK)] if i % 2 == 0 else []
            while len(ids) < blocks:
                ids.append(fresh)
                fresh += 1
            records.append(
                {"timestamp": burst * 800 + i * 10, "input_length": n, "output_length": 3 + i % 4, "hash_ids": ids}
            )
    return records


def test_a_mooncake_trace_is_replayed_at_its_times_lengths_and_shared_prefixes(tmp_path, refserver_factory):
    server = refserver_factory("--ttft-s", "0.005", "--gap-s", "0.002", "--max-model-len", "150")
    trace = bursty_trace()
    (tmp_path / "mooncake.jsonl").write_text("".join(json.dumps(r) + "\n" for r in trace))
    text = f"""
name: trace
server: {{engine: external, url: "http://127.0.0.1:9"}}
variants: {{ref: {{}}}}
load:
  ladder: [1, 2]
  warmup_s: 0
  min_requests: 5
  same_prompts_every_run: true  # no nonce of the run's own: the test rebuilds the prompts the run sent
  trace: {{path: mooncake.jsonl, format: mooncake, block_tokens: {BLOCK}}}
"""
    done = run(tmp_path, server, text, "trace")
    assert_run_completed(done)
    frame = pd.read_parquet(tmp_path / "trace" / "requests.parquet")
    assert frame["error_class"].isna().all(), frame["error_class"].value_counts()
    fits = [i for i, r in enumerate(trace) if r["input_length"] + r["output_length"] <= 150]
    summary = json.loads((tmp_path / "trace" / "summary.json").read_text())
    steps = summary["variants"]["ref"]["steps"]
    assert [s["trace"]["speed"] for s in steps] == pytest.approx([1.0, 2.0])

    # The same prompts the run built, to link each request to its server log entry (the checks below compare the
    # server's log with the trace file, not with the code).
    load = load_scenario(tmp_path / "trace.yaml").load
    prompts = workload_for(load, server.url, tmp_path).trace
    logs = {log["prompt"]: log for log in server.all_logs()}
    assert len(logs) == 2 * len(fits)  # over-context prompts never reached the server
    errors_ms = []
    for s in steps:
        figures, speed = s["trace"], s["trace"]["speed"]
        assert (figures["records"], figures["over_context"], figures["replayed"]) == (64, 2, len(fits))
        assert figures["dropped"] == figures["not_sent"] == 0
        sent = frame[frame["step"] == s["step"]].set_index("seq")
        assert sorted(sent.index) == fits
        received = {i: logs[prompts.item(i, s["step"]).prompt] for i in fits}
        for i, log in received.items():
            assert len(log["prompt"].split()) == trace[i]["input_length"]  # exact prompt tokens
            assert log["max_tokens"] == trace[i]["output_length"]
            assert sum(tokens for _, tokens, _ in log["chunks"]) == trace[i]["output_length"]
        # Arrival times: the server's receipt of each record after the first, against the trace's times / speed.
        first = fits[0]
        t0 = trace[first]["timestamp"] / 1000
        for i in fits[1:]:
            intended = (trace[i]["timestamp"] / 1000 - t0) / speed
            assert sent.loc[i, "t_intended"] - sent.loc[first, "t_intended"] == pytest.approx(intended, abs=1e-6)
            errors_ms.append(((received[i]["t_recv"] - received[first]["t_recv"]) - intended) * 1000)
        # Records that share leading hash ids share that many whole blocks of the text the server received.
        for a in fits:
            for b in fits:
                if a < b:
                    shared = len(os.path.commonprefix([trace[a]["hash_ids"], trace[b]["hash_ids"]]))
                    words = [received[x]["prompt"].split() for x in (a, b)]
                    common = len(os.path.commonprefix(words))
                    assert shared * BLOCK <= common < (shared + 1) * BLOCK, (a, b, shared, common)
        # The server's prefix cache (blocks of BLOCK words, filled as each prefill begins) holds what the trace's
        # hash ids say it should: a request's cached tokens are the whole blocks it shares with a record whose
        # prefill began before its own (a block is cached once its record held it whole), never its last token.
        order = sorted(fits, key=lambda i: received[i]["t_slot"])
        for n, i in enumerate(order):
            held = [
                min(
                    len(os.path.commonprefix([trace[i]["hash_ids"], trace[j]["hash_ids"]])),
                    trace[j]["input_length"] // BLOCK,
                )
                for j in order[:n]
            ]
            expected = BLOCK * min(max(held, default=0), (trace[i]["input_length"] - 1) // BLOCK)
            assert received[i]["cached_tokens"] == expected, (i, received[i]["cached_tokens"], expected)
            assert sent.loc[i, "cached_tokens"] == expected  # what the client recorded from the stream
    p50, p99 = np.percentile(np.abs(errors_ms), [50, 99])
    print(f"arrival error vs the trace, server receipt after the first: |P50| {p50:.2f} ms, |P99| {p99:.2f} ms")
    # A wrong speed or origin would be off by hundreds of ms to seconds; a loaded 2-core host adds tens.
    assert p99 < 250, errors_ms
    # The same record in the two steps shares less than a block: the second speed replays cold prompts.
    step0, step1 = (s["step"] for s in steps)
    for i in fits:
        pair = [prompts.item(i, step).prompt.split() for step in (step0, step1)]
        assert len(os.path.commonprefix(pair)) < BLOCK
    assert "Trace replay" in (tmp_path / "trace" / "report.html").read_text()
    assert "62 of 64 records replayed, 2 skipped" in (tmp_path / "trace" / "summary.md").read_text()


@pytest.mark.parametrize(
    ("fmt", "rows", "failed"),
    [
        (
            "azure",
            ["TIMESTAMP,ContextTokens,GeneratedTokens"]
            + [f"2023-11-16 18:15:{46 + i // 4:02d}.{i % 4 * 25:02d}00000,{20 + i},{2 + i % 3}" for i in range(12)],
            0,
        ),
        (
            "burstgpt",
            ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
            + [f"{i // 4},GPT-4,{30 + i},{0 if i in (2, 7) else 3 + i % 2},0,Conversation log" for i in range(12)],
            2,
        ),
    ],
)
def test_azure_and_burstgpt_traces_are_replayed_with_their_lengths(tmp_path, refserver_factory, fmt, rows, failed):
    server = refserver_factory("--ttft-s", "0.005", "--gap-s", "0.002")
    (tmp_path / "trace.csv").write_text("\n".join(rows) + "\n")
    text = f"""
name: {fmt}
server: {{engine: external, url: "http://127.0.0.1:9"}}
variants: {{ref: {{}}}}
load:
  warmup_s: 0
  min_requests: 1
  trace: {{path: trace.csv, format: {fmt}, speed: 2}}
"""
    done = run(tmp_path, server, text, fmt)
    assert_run_completed(done)
    table = list(csv.DictReader(rows))
    columns = {"azure": ("ContextTokens", "GeneratedTokens"), "burstgpt": ("Request tokens", "Response tokens")}[fmt]
    expected = sorted((int(r[columns[0]]), int(r[columns[1]])) for r in table if int(r[columns[1]]) > 0)
    assert len(expected) == 12 - failed
    received = sorted((len(log["prompt"].split()), log["max_tokens"]) for log in server.all_logs())
    assert received == expected
    (step,) = json.loads((tmp_path / fmt / "summary.json").read_text())["variants"]["ref"]["steps"]
    assert (step["trace"]["records"], step["trace"]["replayed"], step["trace"]["speed"]) == (12 - failed,) * 2 + (2.0,)
    skipped = json.loads((tmp_path / fmt / "env.json").read_text())["workload"]["trace"]["skipped_rows"]
    assert skipped == ({"failed (Response tokens 0)": failed} if failed else {})


def test_a_malformed_trace_stops_the_run_before_the_first_request(tmp_path, refserver_factory):
    server = refserver_factory()
    (tmp_path / "bad.jsonl").write_text(
        '{"timestamp": 0, "input_length": 10, "output_length": 2}\n{"timestamp": 5, "input_length": 10}\n'
    )
    text = """
name: bad
server: {engine: external, url: "http://127.0.0.1:9"}
variants: {ref: {}}
load: {trace: {path: bad.jsonl, format: mooncake}}
"""
    done = run(tmp_path, server, text, "bad")
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"{tmp_path / 'bad.jsonl'}:2: missing field 'output_length'" in done.stderr
    assert server.all_logs() == []


LLAMA_CONVERSATION = pair_scenario(
    "conversation-llamacpp",
    {
        "api": "chat",
        "ladder": [2],
        "step_duration_s": 4,
        "warmup_s": 1,
        "min_requests": 4,
        "prompt_tokens": 24,
        "max_tokens": 16,
        "conversation": {"turns": 2},
    },
)


@pytest.mark.server
def test_greedy_variants_carry_the_same_histories_on_llamacpp(tmp_path):
    require_llama_server()
    scenario = tmp_path / "conv.yaml"
    scenario.write_text(LLAMA_CONVERSATION)
    done = run_locust(tmp_path, "--scenario", str(scenario), "--run-id", "llama", timeout=300)
    assert_run_completed(done)
    frame = pd.read_parquet(tmp_path / "llama" / "requests.parquet")
    ok = frame[frame["error_class"].isna()]
    assert len(ok) == len(frame) and set(ok["turn"]) == {1, 2}
    # The server counts turn 2's whole history (its chat template around every message) as the prompt.
    by_turn = ok.set_index(["variant", "worker", "conversation", "turn"])
    for (variant, worker, number, turn), row in by_turn.iterrows():
        if turn == 2 and (variant, worker, number, 1) in by_turn.index:
            first = by_turn.loc[(variant, worker, number, 1)]
            assert row["prompt_tokens"] > first["prompt_tokens"] + first["output_tokens"] + 24
    (histories,) = json.loads((tmp_path / "llama" / "summary.json").read_text())["conversations"]["histories"]
    assert histories["variant"] == "spec-k4" and histories["compared"] > 0
    assert histories["diverged"] == 0, histories  # lossless speculation answers alike, so histories stay alike

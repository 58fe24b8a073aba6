"""Conversations and trace replay in the figures, from hand-built records whose answers are known: turn figures,
what became of each conversation, diverged histories, a replay's counts and its arrival error."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from locust_llm.analysis.conversations import by_turn, histories, step_conversations
from locust_llm.analysis.metrics import request_metrics
from locust_llm.analysis.traces import trace_step
from locust_llm.pipeline import finish_run
from locust_llm.records import ErrorClass, RequestRecord
from locust_llm.rundir.env import RunEnv
from tests.synthetic import write_requests


def turn_record(worker, conversation, turn, turns, t_send, ttft_s, error=None, history=None, variant="base", **kw):
    tokens = 5
    return RequestRecord(
        variant=variant,
        step=0,
        phase="steady",
        worker=worker,
        seq=conversation * 3 + turn - 1,
        conversation=conversation,
        turn=turn,
        turns=turns,
        history=history,
        prompt_tokens=10 * turn,
        output_tokens=0 if error else tokens,
        t_send=t_send,
        t_first=math.nan if error else t_send + ttft_s,
        t_end=math.nan if error else t_send + ttft_s + 0.04,
        t_done=t_send + ttft_s + 0.04,
        error_class=error,
        **kw,
    ).to_dict()


def frame_of(rows) -> pd.DataFrame:
    return pd.DataFrame(rows)


def test_by_turn_splits_the_window_by_turn_with_each_turns_own_figures():
    rows = [
        turn_record(0, 0, 1, 3, 0.0, 0.010),
        turn_record(0, 0, 2, 3, 1.0, 0.020),
        turn_record(0, 0, 3, 3, 2.0, 0.030),
        turn_record(1, 0, 1, 3, 0.1, 0.012),
        turn_record(1, 0, 2, 3, 1.1, 0.024, error=ErrorClass.HTTP_ERROR),
    ]
    sent = frame_of(rows)
    turns = by_turn(sent, request_metrics(sent), "closed")
    assert [t["turn"] for t in turns] == [1, 2, 3]
    assert [(t["requests"], t["errors"]) for t in turns] == [(2, 0), (2, 1), (1, 0)]
    assert turns[0]["ttft_p50_ms"] == pytest.approx(11.0)  # 10 and 12 ms
    assert turns[1]["ttft_p50_ms"] == pytest.approx(20.0)  # the failed turn has no TTFT
    assert turns[2]["tpot_p50_ms"] == pytest.approx(10.0)  # 40 ms over 4 tokens after the first
    assert [t["prompt_tokens"] for t in turns] == [10, 20, 30]
    assert all(t["cached_tokens"] is None for t in turns)  # no cached_tokens column: not reported
    sent["cached_tokens"] = [0, 8, 16, 0, 0]
    assert [t["cached_tokens"] for t in by_turn(sent, request_metrics(sent), "closed")] == [0, 8, 16]
    assert by_turn(sent.assign(turn=0), request_metrics(sent), "closed") is None


def test_what_became_of_each_conversation():
    rows = [
        # worker 0, conversation 0: all three turns answered
        *[turn_record(0, 0, t, 3, t, 0.01) for t in (1, 2, 3)],
        # conversation 1: the step ended after turn 2
        *[turn_record(0, 1, t, 3, t, 0.01) for t in (1, 2)],
        # conversation 2: turn 2 failed, turn 3 never sent
        turn_record(0, 2, 1, 3, 1, 0.01),
        turn_record(0, 2, 2, 3, 2, 0.01, error=ErrorClass.IDLE_TIMEOUT),
        # a dataset conversation of two turns, both answered
        *[turn_record(1, 0, t, 2, t, 0.01) for t in (1, 2)],
    ]
    dropped = turn_record(1, 1, 1, 3, math.nan, 0.0, error=ErrorClass.DROPPED)
    counts = step_conversations(frame_of([*rows, dropped]))
    assert counts == {
        "started": 5,
        "completed": 2,
        "cut_short": 1,
        "failed": 1,
        "dropped": 1,
        "turns_sent": len(rows),
        "turns_planned": 3 + 3 + 3 + 2 + 3,
    }


def test_histories_count_the_paired_turns_whose_earlier_answers_differed():
    rows = []
    for variant, second in (("base", "h1"), ("spec", "h1"), ("diff", "zz")):
        for k in range(2):
            rows += [
                turn_record(0, k, 1, 3, 0, 0.01, variant=variant),
                turn_record(0, k, 2, 3, 1, 0.01, variant=variant, history=f"a{k}"),
                turn_record(0, k, 3, 3, 2, 0.01, variant=variant, history=second if k == 0 else "b1"),
            ]
    frame = frame_of(rows)
    assert histories(frame, "base", "spec") | {"text": ""} == {
        "variant": "spec",
        "compared": 4,
        "diverged": 0,
        "text": "",
    }
    diff = histories(frame, "base", "diff")
    assert (diff["compared"], diff["diverged"]) == (4, 1)
    assert "1 of 4 paired turns" in diff["text"]


def test_a_trace_step_counts_replayed_skipped_dropped_and_unsent_records_and_the_arrival_error():
    t0 = 1000.0
    lags_ms = [1.0, 2.0, 3.0, 4.0, 50.0]
    rows = [
        RequestRecord(step=2, seq=i, t_intended=t0 + i, t_send=t0 + i + lag / 1000).to_dict()
        for i, lag in enumerate(lags_ms)
    ]
    rows.append(RequestRecord(step=2, seq=9, t_intended=t0 + 9, error_class=ErrorClass.DROPPED).to_dict())
    env = RunEnv.model_validate({"workload": {"trace": {"records": 10, "over_context": 2, "rate_rps": 4.0}}})
    figures = trace_step(frame_of(rows), 8.0, env)
    assert figures["speed"] == 2.0
    assert (figures["replayed"], figures["dropped"], figures["over_context"], figures["not_sent"]) == (5, 1, 2, 2)
    assert figures["arrival_error_p50_ms"] == pytest.approx(3.0, abs=1e-3)
    assert figures["arrival_error_p99_ms"] == pytest.approx(np.percentile(lags_ms, 99), abs=1e-3)
    assert figures["arrival_error_max_ms"] == pytest.approx(50.0, abs=1e-3)
    assert "5 of 10 records replayed, 2 skipped (over the server's context)" in figures["text"]
    assert trace_step(frame_of(rows), 8.0, RunEnv()) is None


def conversation_run(path, rng) -> None:
    """Two variants, closed loop at 2 users, 3-turn conversations. TTFT of turn t: 20 t ms (baseline) and 10 t ms
    (spec), jittered; TPOT 10 and 5 ms. Spec's history differs from the baseline's in conversation 0 only."""
    rows, steps, tokens = [], [], 20
    for variant, (ttft_s, tpot_s) in {"baseline": (0.020, 0.010), "spec": (0.010, 0.005)}.items():
        t0 = 1_000_000.0 if variant == "baseline" else 1_000_100.0
        steps.append(
            {"variant": variant, "step": 0, "level": 2.0, "mode": "closed", "users": 2}
            | {"t_start": t0, "t_steady": t0, "t_end": t0 + 30.0}
        )
        for user in range(2):
            send, k = t0 + 0.01 * user, user
            while send < t0 + 29.0:
                for turn in (1, 2, 3):
                    ttft = ttft_s * turn * rng.uniform(0.95, 1.05)
                    offsets = ttft + tpot_s * np.arange(tokens)
                    history = None if turn == 1 else f"{k}-{turn}" + ("x" if variant == "spec" and k == 0 else "")
                    rows.append(
                        RequestRecord(
                            run_id="conv",
                            variant=variant,
                            level=2.0,
                            step=0,
                            phase="steady",
                            mode="closed",
                            user=user,
                            request_id=f"{variant}-{len(rows)}",
                            seq=k * 3 + turn - 1,
                            conversation=k,
                            turn=turn,
                            turns=3,
                            history=history,
                            prompt_tokens=30 * turn,
                            output_tokens=tokens,
                            token_source="usage_deltas",
                            t_send=send,
                            t_first=send + offsets[0],
                            t_end=send + offsets[-1],
                            t_done=send + offsets[-1],
                            chunk_offsets=offsets.tolist(),
                            chunk_tokens=[1] * tokens,
                            finish_reason="length",
                        ).to_dict()
                    )
                    send += offsets[-1] + 0.05
                k += 2
    write_requests(path, rows)
    (path / "steps.json").write_text(json.dumps({"steps": steps, "events": []}))
    env = {"run_id": "conv", "baseline": "baseline", "load": {"conversation": {"turns": 3, "think_s": 0.05}}}
    (path / "env.json").write_text(json.dumps(env))


def test_ttft_and_speed_ups_by_turn_and_the_report_chart(tmp_path):
    conversation_run(tmp_path, np.random.default_rng(5))
    finish_run(tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    doc = summary["conversations"]
    assert {(r["variant"], r["turn"]) for r in doc["levels"]} == {
        (v, t) for v in ("baseline", "spec") for t in (1, 2, 3)
    }
    for row in doc["levels"]:
        truth = (20.0 if row["variant"] == "baseline" else 10.0) * row["turn"]
        assert row["ttft_p50_ms"] == pytest.approx(truth, rel=0.05)
        assert row["prompt_tokens"] == 30 * row["turn"]
    for c in doc["comparisons"]:
        assert c["ttft_p50_speedup"]["value"] == pytest.approx(2.0, rel=0.1)  # half the TTFT at every turn
        assert c["decode_tps_speedup"]["value"] == pytest.approx(2.0, rel=1e-6)  # half the TPOT
        lo, hi = c["ttft_p50_speedup"]["ci95"]
        assert lo <= c["ttft_p50_speedup"]["value"] <= hi and c["ttft_p50_speedup"]["pairs"] > 10
    (histories,) = doc["histories"]
    # conversation 0 of worker 0: turns 2 and 3 differ; every other paired turn carries the same history
    assert (histories["diverged"], histories["variant"]) == (2, "spec")
    report = (tmp_path / "report.html").read_text()
    assert "TTFT by turn" in report and "spec at 2" in report and "Histories: spec: 2 of" in report
    assert "TTFT P50 speed-up 2." in (tmp_path / "summary.md").read_text()

"""Reasoning figures on a synthetic step whose streams are set token by token: 30 requests think for 40 tokens
(10 ms apart) and answer 20 (20 ms apart); 10 think for 30 tokens and are cut by max_tokens with no answer. The
time to first output token, its all-requests form, the token split, the speeds over each part, the TTFOT gate and
the TTFOT goodput SLO follow from the construction."""

import json

import numpy as np
import pytest

from locust_llm.analysis.documents.summary import Summary, Verdict
from locust_llm.analysis.summary import build_summary
from locust_llm.pipeline import finish_run
from locust_llm.records import RequestRecord
from locust_llm.report.console import verdict_table
from locust_llm.rundir import load_run
from tests.synthetic import patch_env, window, write_run

TTFT, THINK_GAP, ANSWER_GAP = 0.05, 0.010, 0.020
START, WINDOW_S = 1_800_000_000.0, 30.0


def request(seq: int, answered: bool) -> dict:
    thought = 40 if answered else 30
    answer = 20 if answered else 0
    gaps = [THINK_GAP] * (thought - 1) + [ANSWER_GAP] * answer
    offsets = TTFT + np.concatenate([[0.0], np.cumsum(gaps)])
    send = START + 0.75 * seq
    return RequestRecord(
        run_id="reasoning",
        variant="baseline",
        level=1,
        step=0,
        phase="steady",
        seq=seq,
        request_id=f"r{seq}",
        output_tokens=thought + answer,
        reasoning_tokens=thought,
        token_source="server_events",
        t_send=send,
        t_first=send + TTFT,
        t_first_output=send + offsets[thought] if answered else float("nan"),
        t_end=send + offsets[-1],
        t_done=send + offsets[-1] + 0.001,
        chunk_offsets=offsets.tolist(),
        chunk_tokens=[1] * (thought + answer),
        finish_reason="length",
        http_status=200,
    ).to_dict()


def reasoning_run(path):
    rows = [request(seq, answered=seq % 4 != 3) for seq in range(40)]
    return write_run(
        path,
        rows,
        [window("baseline", 0, 1, START, WINDOW_S)],
        gates={"ttft_p99_ms": 100, "ttfot_p99_ms": 400, "error_rate": None},
        slo={"ttfot_ms": 500},
    )


@pytest.fixture(scope="module")
def step(tmp_path_factory):
    run = reasoning_run(tmp_path_factory.mktemp("reasoning"))
    return build_summary(load_run(run)).model_dump(mode="json")["variants"]["baseline"]["steps"][0]


ANSWERED_MS = (TTFT + 39 * THINK_GAP + ANSWER_GAP) * 1000  # the first answer token follows the 40th thought
CUT_MS = (TTFT + 29 * THINK_GAP + 0.001) * 1000  # a request with no answer waited until it ended


def test_time_to_first_output_token_and_its_all_requests_form(step):
    assert step["ttft_ms"]["p50"] == pytest.approx(TTFT * 1000)
    ttfot = step["ttfot_ms"]
    assert ttfot["n"] == 30 and ttfot["p50"] == pytest.approx(ANSWERED_MS)
    every = step["ttfot_all_ms"]
    assert every["n"] == 40
    assert every["mean"] == pytest.approx((30 * ANSWERED_MS + 10 * CUT_MS) / 40)
    assert every["p99"] == pytest.approx(ANSWERED_MS)


def test_the_token_split_the_speeds_and_the_requests_without_an_answer(step):
    r = step["reasoning"]
    assert (r["requests"], r["reasoning_requests"], r["no_answer"]) == (40, 40, 10)
    assert r["no_answer_share"] == pytest.approx(0.25)
    assert r["reasoning_tokens"]["mean"] == pytest.approx((30 * 40 + 10 * 30) / 40)
    assert r["answer_tokens"]["mean"] == pytest.approx(30 * 20 / 40)
    assert r["reasoning_share"] == pytest.approx((30 * 40 + 10 * 30) / (30 * 60 + 10 * 30))
    assert r["reasoning_tps"]["mean"] == pytest.approx(1 / THINK_GAP)
    assert r["reasoning_tps"]["n"] == 40
    assert r["answer_tps"]["mean"] == pytest.approx(1 / ANSWER_GAP)  # (20 - 1) tokens over 19 gaps
    assert r["answer_tps"]["n"] == 30


def test_the_ttfot_gate_and_the_ttfot_slo(tmp_path):
    run = reasoning_run(tmp_path)
    finish_run(run)
    verdict = json.loads((run / "verdict.json").read_text())
    checks = {c["gate"]: c for c in verdict["checks"]}
    assert checks["ttft_p99_ms"]["ok"] is True
    assert checks["ttfot_p99_ms"]["ok"] is False and checks["ttfot_p99_ms"]["value"] == pytest.approx(ANSWERED_MS)
    assert verdict["exit_code"] == 3
    summary = json.loads((run / "summary.json").read_text())
    # 30 answered within the 500 ms SLO; the 10 without an answer are never good
    assert summary["variants"]["baseline"]["steps"][0]["goodput_rps"] == pytest.approx(30 / WINDOW_S)
    html = (run / "report.html").read_text()
    assert "Reasoning streams" in html and "ttfot_p99_ms 400 ms" in html
    assert (
        "- reasoning: baseline at 1 (step 0): 10 of 40 requests gave no answer after reasoning"
        in (run / "summary.md").read_text()
    )


def test_runs_without_reasoning_have_ttfot_equal_to_ttft(tmp_path):
    rows = [request(seq, True) for seq in range(30)]
    for row in rows:
        row.update(reasoning_tokens=0, t_first_output=row["t_first"])
    write_run(tmp_path, rows, [window("baseline", 0, 1, START, WINDOW_S)])
    step = build_summary(load_run(tmp_path)).variants["baseline"].steps[0]
    assert step.reasoning is None
    assert step.ttfot_ms.p50 == step.ttft_ms.p50 and step.ttfot_all_ms.mean == step.ttft_all_ms.mean


def test_the_headline_can_read_the_first_answer_token(tmp_path):
    run = patch_env(reasoning_run(tmp_path), "load", reasoning={"headline_ttft": "first_output"})
    finish_run(run)
    summary = Summary.model_validate_json((run / "summary.json").read_text())
    assert summary.headline_ttft == "ttfot"
    table = verdict_table(summary, Verdict.model_validate_json((run / "verdict.json").read_text()))
    assert "TTFOT p50" in table and f"{ANSWERED_MS:.1f}ms" in table
    assert "TTFOT P50/P95 ms" in (run / "summary.md").read_text()
    assert "The headline (the console" in (run / "report.html").read_text()
    assert "reads TTFOT (the first answer token)" in (run / "report.html").read_text()

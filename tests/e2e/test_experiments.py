"""The speculative-decoding experiments on the real llama.cpp server: a draft-length sweep with a context length,
short. Each figure is checked against what the server itself says (its prompt token counts, its per-request
timings, the prefix rule of its per-position counters); the known-answer checks of the schedule and the
breakdown arithmetic are in tests/unit/analysis.
"""

import json

import pandas as pd
import pytest

from locust_llm.analysis.metrics import request_metrics
from tests.helpers import REPO, assert_run_completed, require_llama_server, run_locust

CONTEXT = 256


def sweep_scenario(tmp_path):
    text = (REPO / "scenarios" / "tiny-cpu-test.yaml").read_text()
    text = text.replace("  spec-k4:\n", "  spec:\n").replace("n_max: 4", "n_max: [1, 4]")
    text = text.replace(
        "  mode: closed\n",
        f"  mode: closed\n  repeats: 2\n  context_tokens: [{CONTEXT}]\n  context_levels: [1]\n  min_requests: 5\n",
    )
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return path


@pytest.mark.server
def test_a_sweep_over_draft_lengths_with_a_long_context_on_the_real_server(tmp_path):
    require_llama_server()
    done = run_locust(
        tmp_path,
        "--scenario",
        str(sweep_scenario(tmp_path)),
        "--ladder",
        "1",
        "--step-duration",
        "4",
        "--warmup",
        "1",
        "--run-id",
        "sweep",
        timeout=600,
    )
    assert_run_completed(done)
    run = tmp_path / "sweep"
    summary = json.loads((run / "summary.json").read_text())
    assert set(summary["variants"]) == {"baseline", "spec-k1", "spec-k4"}
    frame = pd.read_parquet(run / "requests.parquet")
    steps = json.loads((run / "steps.json").read_text())["steps"]
    context_steps = {s["step"] for s in steps if s["context"] == CONTEXT}
    assert context_steps and {s["variant"] for s in steps if s["context"]} == set(summary["variants"])

    # The server's own prompt counts (usage.prompt_tokens, BOS included on both sides): the context steps'
    # prompts are exactly CONTEXT - 32 tokens longer than the ladder's 32-token prompts.
    ok = frame[frame["error_class"].isna() & (frame["phase"] == "steady")]
    in_context = ok["step"].isin(context_steps)
    (ladder_count,) = set(ok.loc[~in_context, "prompt_tokens"])
    assert set(ok.loc[in_context, "prompt_tokens"]) == {ladder_count + CONTEXT - 32}

    # The server's timings fit inside the client's own E2E of every request (nothing outside is negative).
    split = request_metrics(ok)
    assert split["server_prefill_ms"].notna().all() and split["server_decode_ms"].notna().all()
    assert (split["outside_ms"] > -1.0).all(), split["outside_ms"].min()
    (comparison,) = [c for c in summary["comparisons"] if c["variant"] == "spec-k4"]
    judged = [s for s in comparison["steps"] if s["breakdown"]]
    for step in judged:
        assert step["breakdown"]["variant"]["source"] == "server per-request timings"

    # Per-position acceptance from the server's counters: a position is accepted only after the one before it.
    for step in summary["variants"]["spec-k4"]["steps"]:
        per_position = ((step.get("server") or {}).get("acceptance") or {}).get("per_position")
        if per_position:
            assert len(per_position) == 4
            assert all(a >= b for a, b in zip(per_position, per_position[1:], strict=False)), per_position

    (schedule,) = summary["schedules"]
    assert schedule["variants"] == ["spec-k1", "spec-k4"] and schedule["label"] == "k"
    for level in schedule["levels"]:
        if isinstance(level["choice"], int):  # a chosen k is clearly faster than the baseline
            assert level["speedup"]["ci95"][0] > 1
    assert json.loads((run / "schedule.json").read_text())[0]["text"] == schedule["text"]
    ladder, context = summary["contexts"]  # the ladder's own 32-token prompts first
    assert (ladder["context_tokens"], ladder["ladder"]) == (32, True)
    assert context["context_tokens"] == CONTEXT and set(context["variants"]) == set(summary["variants"])
    assert "Context length" in (run / "report.html").read_text()

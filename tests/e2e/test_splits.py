"""What the gain depends on, through real headless runs: reasoning streams against the reference server (its own
stamps and counts are the truth), and per-token draft counts, decode speed by position and categories against the
real llama.cpp server (its final ``timings`` totals are the truth for the per-token series)."""

import json

import numpy as np
import pandas as pd
import pytest

from locust_llm.analysis.metrics import Chunks
from locust_llm.analysis.positions import bin_columns, request_positions
from tests.helpers import assert_run_completed, pair_scenario, require_llama_server, run_locust

REASONING = 30  # the reference server thinks for 30 tokens before it answers

REASONING_SCENARIO = """
name: reasoning
server: {engine: external, url: "http://127.0.0.1:9"}
variants: {ref: {}}
load:
  api: chat
  ladder: [1]
  step_duration_s: 4
  warmup_s: 1
  min_requests: 5
  dataset: prompts.jsonl
  unique_prefix: true
"""
# one prompt is answered after the reasoning, the other is cut by max_tokens while still thinking
REASONING_PROMPTS = [
    {"prompt": "think then answer", "max_tokens": 40, "bucket": "answered"},
    {"prompt": "think for too long", "max_tokens": 20, "bucket": "cut"},
]


def test_reasoning_streams_match_the_reference_servers_stamps_and_counts(tmp_path, refserver_factory):
    server = refserver_factory("--ttft-s", "0.02", "--gap-s", "0.002", "--reasoning-tokens", str(REASONING))
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in REASONING_PROMPTS))
    (tmp_path / "reasoning.yaml").write_text(REASONING_SCENARIO)
    done = run_locust(
        tmp_path, "--host", server.url, "--scenario", str(tmp_path / "reasoning.yaml"), "--run-id", "r", timeout=180
    )
    assert_run_completed(done)
    run = tmp_path / "r"
    frame = pd.read_parquet(run / "requests.parquet").sort_values("t_send").reset_index(drop=True)
    assert frame["error_class"].isna().all(), frame["error_class"].value_counts()
    # one user sends one request after the other: the server's last streams are the recorded ones, in order
    logs = [log for log in server.all_logs() if log["api"] == "chat"][-len(frame) :]
    assert [log["max_tokens"] for log in logs] == frame["max_tokens"].tolist()
    lags = []
    for row, log in zip(frame.itertuples(), logs, strict=True):
        assert row.reasoning_tokens == log["reasoning_tokens"] == min(REASONING, row.max_tokens)
        assert row.output_tokens == row.max_tokens
        if log["t_first_answer"] is None:
            assert np.isnan(row.t_first_output)
            continue
        # time to the first answer token as the client measured it, against the server's from its own receipt
        client = row.t_first_output - row.t_send
        lags.append(client - (log["t_first_answer"] - log["t_recv"]))
    assert len(lags) >= 3 and abs(float(np.median(lags))) < 0.001, sorted(lags)
    print(f"TTFOT client minus server: median {np.median(lags) * 1e3:.3f} ms over {len(lags)} answered requests")

    summary = json.loads((run / "summary.json").read_text())
    (step,) = summary["variants"]["ref"]["steps"]
    steady = frame[frame["phase"] == "steady"]
    answered = steady[steady["t_first_output"].notna()]
    assert step["reasoning"]["no_answer"] == int(steady["t_first_output"].isna().sum()) > 0
    assert step["reasoning"]["reasoning_requests"] == len(steady)
    assert step["ttfot_ms"]["n"] == len(answered) and step["ttfot_all_ms"]["n"] == len(steady)
    assert step["ttfot_ms"]["p50"] == pytest.approx(
        float(np.median((answered["t_first_output"] - answered["t_send"]) * 1000))
    )
    html = (run / "report.html").read_text()
    assert "Reasoning streams" in html and "TTFOT P50 / P95 ms" in html
    assert "requests gave no answer after reasoning" in done.stdout + done.stderr


LLAMACPP_SCENARIO = pair_scenario(
    "splits",
    {
        "ladder": [1],
        "step_duration_s": 5,
        "warmup_s": 1,
        "min_requests": 5,
        "dataset": "prompts.jsonl",
        "unique_prefix": True,
        "positions": {"bin_tokens": 8, "acceptance": True},
    },
)
TOKENS, BIN = 40, 8  # five whole bins a request


@pytest.mark.server
def test_per_token_draft_counts_add_up_to_the_servers_totals(tmp_path):
    require_llama_server()
    prompts = [{"prompt": f"def f{i}(x): return x + {i}", "max_tokens": TOKENS, "bucket": "code"} for i in range(8)]
    prompts += [
        {"prompt": f"Tell me about day {i} of the trip.", "max_tokens": TOKENS, "bucket": "chat"} for i in range(8)
    ]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    (tmp_path / "splits.yaml").write_text(LLAMACPP_SCENARIO)
    done = run_locust(tmp_path, "--scenario", str(tmp_path / "splits.yaml"), "--run-id", "s", timeout=300)
    assert_run_completed(done)
    run = tmp_path / "s"
    frame = pd.read_parquet(run / "requests.parquet")
    spec = frame[(frame["variant"] == "spec-k4") & frame["error_class"].isna()].reset_index(drop=True)
    assert len(spec) >= 5 and set(spec["bucket"]) == {"code", "chat"}
    # llama.cpp's per-token timings, as recorded, end at the totals of its final timings
    assert all(len(r.chunk_drafted) == len(r.chunk_offsets) for r in spec.itertuples())
    assert [r.chunk_drafted[-1] for r in spec.itertuples()] == spec["draft_n"].astype(int).tolist()
    assert [r.chunk_accepted[-1] for r in spec.itertuples()] == spec["draft_accepted"].astype(int).tolist()
    # so the drafts of the five bins of a 40-token answer add up to them too
    bins = request_positions(len(spec), Chunks.of(spec), BIN)
    drafted = sum(bins[bin_columns(k)[1]] for k in range(TOKENS // BIN))
    accepted = sum(bins[bin_columns(k)[2]] for k in range(TOKENS // BIN))
    assert drafted.tolist() == spec["draft_n"].tolist() and accepted.tolist() == spec["draft_accepted"].tolist()
    baseline = frame[frame["variant"] == "baseline"]
    assert baseline["chunk_drafted"].map(len).eq(0).all()  # no drafting, no draft counts

    summary = json.loads((run / "summary.json").read_text())
    for name in ("baseline", "spec-k4"):
        (step,) = summary["variants"][name]["steps"]
        assert [b["first_token"] for b in step["decode_by_position"]] == list(range(0, TOKENS, BIN))
        rates = [b["acceptance_rate"] for b in step["decode_by_position"]]
        assert all(r is None for r in rates) if name == "baseline" else all(0 <= r <= 1 for r in rates)
    (comp,) = summary["comparisons"]
    if comp["steps"][0]["status"] in ("clean", "inconclusive"):  # a busy shared machine may leave it unjudged
        (categories,) = summary["categories"]
        assert categories["categories"] == ["chat", "code"]
        assert {e["category"]: e["acceptance"]["source"] for e in categories["levels"]} == {
            "chat": "per-request timings (llama.cpp draft_n / draft_n_accepted)",
            "code": "per-request timings (llama.cpp draft_n / draft_n_accepted)",
        }

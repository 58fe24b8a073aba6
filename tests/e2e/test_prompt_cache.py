"""The prompt cache, measured by real headless runs against the reference server, whose block prefix cache knows every
hit: cold prompts by default, a replayed-prompt run (flagged), and shared prefixes with a known hit ratio. The server's
log (per request: its prompt's fingerprint and cached tokens) and its counters are the truth."""

import json
from collections import defaultdict

import pandas as pd
import pytest

from tests.helpers import run_locust

TTFT_S, GAP_S, PREFILL_S = 0.005, 0.002, 0.002  # each uncached prompt token adds 2 ms to TTFT
PROMPT, BLOCK = 32, 4


def scenario(tmp_path, name: str, load: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"name: {name}\nserver: {{engine: external, url: 'http://127.0.0.1:9'}}\nvariants: {{ref: {{}}}}\n"
        f"load: {{mode: closed, ladder: [2], step_duration_s: 3, warmup_s: 1, prompt_tokens: {PROMPT}, "
        f"max_tokens: 8, {load}}}\n"
        # The counters' window edges are the samples nearest them: polled often, so that the primers and the
        # warm-up stay outside the window.
        "telemetry: {interval_s: 0.25}\n"
    )
    return str(path)


def run(tmp_path, server, name: str, load: str):
    done = run_locust(
        tmp_path, "--host", server.url, "--scenario", scenario(tmp_path, name, load), "--run-id", name, timeout=180
    )
    run_dir = tmp_path / name
    assert (run_dir / "summary.json").exists(), done.stderr[-3000:]
    frame = pd.read_parquet(run_dir / "requests.parquet")
    ok = frame[frame["error_class"].isna()]
    assert len(ok) == len(frame) > 5, frame["error_class"].value_counts()
    step = json.loads((run_dir / "summary.json").read_text())["variants"]["ref"]["steps"][0]
    return done, run_dir, ok, step


def load_requests(server) -> list[dict]:
    return [log for log in server.all_logs() if log["complete"] and log["max_tokens"] == 8]


@pytest.fixture
def cache_server(refserver_factory):
    return refserver_factory(
        "--ttft-s", str(TTFT_S), "--gap-s", str(GAP_S), "--prefill-s-per-token", str(PREFILL_S),
        "--cache-block", str(BLOCK), "--metrics-style", "llamacpp",
    )  # fmt: skip


def test_by_default_no_request_repeats_a_prompt_and_the_servers_cache_finds_nothing(tmp_path, cache_server):
    done, run_dir, ok, step = run(tmp_path, cache_server, "cold", "seed: 3")
    logs = load_requests(cache_server)
    assert len(logs) == len(ok) and all(log["cached_tokens"] == 0 for log in logs)  # the server's own word
    assert ok["prompt_hash"].is_unique and (ok["cached_tokens"] == 0).all()  # warm-up and steady alike
    cache = step["prompt_cache"]
    assert cache["mode"] == "cold" and cache["cached_fraction"] == 0 and cache["flag"] is None
    assert cache["server"]["cached_fraction"] == 0 and cache["repeated_prompts"] == 0
    env = json.loads((run_dir / "env.json").read_text())
    assert env["workload"]["prompt_cache"] == "cold" and env["workload"]["unique_prefix_tokens"] > 0


def test_a_replayed_run_measures_each_requests_hits_as_the_server_counted_them_and_is_flagged(tmp_path, cache_server):
    # 40 prompts of 32 words, drawn again and again: each prompt's first request is cold (some in the steady
    # window), every later one a repeat.
    dataset = tmp_path / "forty.jsonl"
    dataset.write_text(
        "".join(json.dumps({"prompt": " ".join(f"p{i}w{j}" for j in range(PROMPT))}) + "\n" for i in range(40))
    )
    done, run_dir, ok, step = run(tmp_path, cache_server, "replayed", f"unique_prefix: false, dataset: {dataset}")
    # Per request: the cached tokens recorded are the server's, prompt by prompt (the same prompt's requests are
    # compared as sorted lists: which of two equal prompts the server admitted first is not recorded).
    logged, recorded = defaultdict(list), defaultdict(list)
    for log in load_requests(cache_server):
        logged[log["prompt_hash"]].append(log["cached_tokens"])
    for row in ok.itertuples():
        recorded[row.prompt_hash].append(row.cached_tokens)
    assert {h: sorted(v) for h, v in recorded.items()} == {h: sorted(v) for h, v in logged.items()}
    assert set(ok["cached_tokens"]) == {0, PROMPT - BLOCK}  # whole blocks, at most 31 of 32: 28 cached
    assert (ok["cached_tokens"] > 0).sum() == len(ok) - ok["prompt_hash"].nunique()  # every repeat is a hit
    cache = step["prompt_cache"]
    steady = ok[ok["phase"] == "steady"]
    truth = steady["cached_tokens"].sum() / steady["prompt_tokens"].sum()
    assert cache["requests"]["cached_fraction"] == pytest.approx(truth)
    assert_counters_cover_their_span(cache["server"], ok)
    assert cache["repeated_prompts"] == int((steady["cached_tokens"] > 0).sum())  # a repeat is exactly a hit here
    # Cached and cold TTFT apart: the server adds 2 ms per uncached prompt token (32 cold, 4 cached), 56 ms apart.
    cold, cached = cache["ttft_cold_ms"], cache["ttft_cached_ms"]
    assert cold["n"] + cached["n"] == len(steady) and cold["n"] > 0 and cached["n"] > 0
    assert cold["p50"] - cached["p50"] == pytest.approx(1000 * (PROMPT - BLOCK) * PREFILL_S, abs=3.0)
    assert cache["flag"].startswith("prompts replayed (load.unique_prefix: false)")
    html = (run_dir / "report.html").read_text()
    assert "prompts replayed (load.unique_prefix: false)" in html and "prompt cache" in done.stderr


def assert_counters_cover_their_span(server: dict, rows: pd.DataFrame, edge_s: float = 0.02) -> None:
    """The server's counters count a request when its prefill begins, a moment after it was sent: over the span
    between the two samples used, they hold every request sent inside it, and of those sent within ``edge_s`` of
    an edge (sent before a sample, admitted after it), some or none."""
    start, end = server["span"]
    sent = rows["t_send"]
    sure = rows[(sent > start + edge_s) & (sent <= end - edge_s)]
    near = rows[(sent > start - edge_s) & (sent <= end + edge_s)]
    for column in ("cached_tokens", "prompt_tokens"):
        assert sure[column].sum() <= server[column] <= near[column].sum(), (column, server, len(sure), len(near))


def test_shared_prefixes_are_primed_and_the_measured_share_is_the_intended_one(tmp_path, cache_server):
    done, run_dir, ok, step = run(tmp_path, cache_server, "shared", "shared_prefix: {tokens: 16, groups: 3}")
    primers = [log for log in cache_server.all_logs() if log["max_tokens"] == 1]
    assert len(primers) >= 3 and {p["prompt_tokens"] for p in primers} == {16}
    first_load = min(log["t_recv"] for log in load_requests(cache_server))
    assert sum(p["t_recv"] < first_load for p in primers) == 3  # every group primed before the step's requests
    assert (ok["cached_tokens"] == 16).all()  # the shared prefix, and nothing after it
    cache = step["prompt_cache"]
    assert cache["mode"] == "shared" and cache["intended_fraction"] == pytest.approx(16 / PROMPT)
    assert abs(cache["cached_fraction"] - cache["intended_fraction"]) < 0.01
    assert abs(cache["server"]["cached_fraction"] - cache["intended_fraction"]) < 0.01
    assert cache["ttft_cached_ms"]["n"] == (ok["phase"] == "steady").sum() and cache["ttft_cold_ms"] is None
    assert cache["flag"] is None
    html = (run_dir / "report.html").read_text()
    assert "shared prefixes: every prompt starts with one of 3 shared prefixes of 16 tokens" in html

"""The prompt cache in summary.json and the report, from synthetic run directories whose cached tokens, repeated
prompts and TTFTs are set by hand: the figures, the flags, and an old run directory that never recorded any of it."""

import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from locust_llm.analysis.documents.summary import Summary, Verdict
from locust_llm.analysis.prompt_cache import finish_prompt_cache
from locust_llm.pipeline import finish_run
from locust_llm.records import REQUESTS_SCHEMA
from locust_llm.report.console import verdict_table
from tests.synthetic import patch_env, stream_record, window, write_run

T0 = 1_800_000_000.0
PROMPT = 100
LEVELS = (1, 2)


def requests_of(variant: str, step: int, level: float, start: float, cached_every: int, cached: int) -> list[dict]:
    """Back-to-back requests of ``PROMPT`` tokens: every ``cached_every``-th has ``cached`` tokens from the cache and a
    10 ms TTFT, the others 1 token (a BOS) and 50 ms (0: none is cached). Warm-up requests first, then 8 s steady."""
    rows, send, k = [], start - 1.0, 0
    while send < start + 8.0:
        hit = cached_every and k % cached_every == 0
        ttft = 0.010 if hit else 0.050
        row = stream_record("cache", variant, level, step, send, ttft, 0.005, 10, worker=0, seq=k)
        row.update(
            phase="steady" if send >= start else "warmup",
            request_id=f"{variant}-{step}-{k}",
            prompt_tokens=PROMPT,
            cached_tokens=cached if hit else 1,
            prompt_hash=hash((variant, step, k)) & (2**62 - 1),
        )
        rows.append(row)
        send += ttft + 0.005 * 9 + 0.002
        k += 1
    return rows


def cache_run(path, cached_every: dict) -> tuple[list[dict], list[dict]]:
    """Two variants at levels 1 and 2; ``cached_every[(variant, level)]`` sets which requests hit (80 tokens)."""
    rows, steps, t = [], [], T0
    for variant in ("baseline", "spec"):
        for step, level in enumerate(LEVELS):
            rows += requests_of(variant, step, level, t, cached_every.get((variant, level), 0), 80)
            steps.append(window(variant, step, level, t, 8.0))
            t += 12.0
    write_run(path, rows, steps)
    patch_env(path, "load", unique_prefix=True)
    patch_env(path, "workload", prompt_cache="cold", unique_prefix_tokens=7)
    return rows, steps


def steady(rows, variant, step):
    return [r for r in rows if r["variant"] == variant and r["step"] == step and r["phase"] == "steady"]


def test_a_cold_step_with_cache_hits_is_measured_flagged_and_its_level_flagged(tmp_path):
    rows, _ = cache_run(tmp_path, {("baseline", 1): 4})
    outcome = finish_run(tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    base = summary["variants"]["baseline"]["steps"][0]["prompt_cache"]
    sent = steady(rows, "baseline", 0)
    hits = [r for r in sent if r["cached_tokens"] == 80]
    truth = sum(r["cached_tokens"] for r in sent) / (PROMPT * len(sent))
    assert base["mode"] == "cold" and base["source"] == "requests"
    assert base["cached_fraction"] == pytest.approx(truth) and base["requests_reporting"] == len(sent)
    assert base["cached_requests"] == len(hits) and base["repeated_prompts"] == 0
    assert base["ttft_cached_ms"]["p50"] == pytest.approx(10.0) and base["ttft_cached_ms"]["n"] == len(hits)
    assert base["ttft_cold_ms"]["p50"] == pytest.approx(50.0) and base["ttft_cold_ms"]["n"] == len(sent) - len(hits)
    # Recorded without a per-run marker: the likely cause is an earlier run that sent the same prompts.
    assert truth > 0.05 and "an earlier run sent these same prompts" in base["flag"]
    assert base["across_runs"] == "repeated"
    spec = summary["variants"]["spec"]["steps"][0]["prompt_cache"]
    assert spec["cached_fraction"] == pytest.approx(0.01) and spec["flag"] is None  # a BOS per request: cold
    (comparison,) = summary["comparisons"]
    by_level = {s["level"]: s["prompt_cache"] for s in comparison["steps"]}
    assert by_level[1]["baseline"] == pytest.approx(truth) and by_level[1]["variant"] == pytest.approx(0.01)
    assert "different cache hits" in by_level[1]["flag"]
    assert by_level[2]["flag"] is None and by_level[2]["difference"] == pytest.approx(0.0)
    html = outcome.report.read_text()
    assert f"{100 * truth:.1f}% / 1.0%" in html  # both sides' shares in the speed-up table
    assert html.count('title="cached prompt share') >= 3  # the level's latency speed-ups carry the flag
    assert "step(s) whose TTFT may be prompt-cache hits" in html


def test_a_run_with_prompts_of_its_own_blames_a_shared_beginning_not_an_earlier_run(tmp_path):
    cache_run(tmp_path, {("baseline", 1): 4})
    patch_env(tmp_path, "workload", across_runs="unique")
    finish_run(tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    base = summary["variants"]["baseline"]["steps"][0]["prompt_cache"]
    assert base["across_runs"] == "unique"
    assert "unique to this run" in base["flag"] and "earlier run" not in base["flag"]


@pytest.mark.parametrize(
    "workload, mode",
    [({"conversation": {"turns": 3, "think_s": 0.5}}, "conversation"), ({"trace": {"shared_blocks": 50}}, "trace")],
)
def test_hits_a_conversation_or_a_trace_asks_for_are_measured_and_not_flagged_as_a_cold_run_s(tmp_path, workload, mode):
    """A conversation's history and a trace's shared blocks are cache hits on purpose: the cached share is measured
    as in a cold run, without the cold run's warning that TTFT is partly cache hits."""
    rows, _ = cache_run(tmp_path, {("baseline", 1): 4})
    patch_env(tmp_path, "workload", **workload)
    finish_run(tmp_path)
    base = json.loads((tmp_path / "summary.json").read_text())["variants"]["baseline"]["steps"][0]["prompt_cache"]
    sent = steady(rows, "baseline", 0)
    truth = sum(r["cached_tokens"] for r in sent) / (PROMPT * len(sent))
    assert base["mode"] == mode and base["cached_fraction"] == pytest.approx(truth) and truth > 0.05
    assert base["flag"] is None


def test_a_replayed_prompt_run_is_flagged_with_how_many_requests_repeated_a_prompt(tmp_path):
    """The old behaviour, asked for explicitly (unique_prefix: false): 8 prompts cycled, no cached-token reports."""
    rows, _ = cache_run(tmp_path, {})
    for row in rows:
        row["cached_tokens"] = None
        row["prompt_hash"] = 1000 + int(row["request_id"].rsplit("-", 1)[1]) % 8
    steps = json.loads((tmp_path / "steps.json").read_text())["steps"]
    write_run(tmp_path, rows, steps)
    patch_env(tmp_path, "load", unique_prefix=False)
    patch_env(tmp_path, "workload", prompt_cache="replayed", unique_prefix_tokens=0)
    outcome = finish_run(tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    step = summary["variants"]["baseline"]["steps"][0]
    seen, repeats = set(), 0
    for row in sorted((r for r in rows if r["variant"] == "baseline"), key=lambda r: r["t_send"]):
        repeats += row["prompt_hash"] in seen and row["step"] == 0 and row["phase"] == "steady"
        seen.add(row["prompt_hash"])
    cache = step["prompt_cache"]
    assert cache["repeated_prompts"] == repeats > 0 and cache["cached_fraction"] is None
    assert cache["flag"].startswith("prompts replayed (load.unique_prefix: false)")
    assert "the prompt cache was not measured" in cache["flag"]
    html = outcome.report.read_text()
    assert "prompts replayed (load.unique_prefix: false)" in html and "replayed: the pool&#39;s prompts" in html
    table = verdict_table(Summary.model_validate(summary), Verdict.model_validate(outcome.verdict.model_dump()))
    assert "prompt cache: prompts replayed" in table


def test_an_old_run_directory_says_prompt_cache_not_measured(tmp_path):
    """requests.parquet without the cached_tokens and prompt_hash columns, env.json without a workload description:
    ``locust-llm report`` still works and says the cache was not measured."""
    rows, _ = cache_run(tmp_path, {})
    table = pq.read_table(tmp_path / "requests.parquet").drop_columns(["cached_tokens", "prompt_hash"])
    assert "cached_tokens" in REQUESTS_SCHEMA.names and "cached_tokens" not in table.schema.names
    pq.write_table(table, tmp_path / "requests.parquet")
    env = json.loads((tmp_path / "env.json").read_text())
    env.pop("workload")
    env["load"]["unique_prefix"] = False  # the old default
    (tmp_path / "env.json").write_text(json.dumps(env))
    done = subprocess.run(
        [sys.executable, "-m", "locust_llm.cli", "report", str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode in (0, 5), done.stderr[-2000:]
    step = json.loads((tmp_path / "summary.json").read_text())["variants"]["baseline"]["steps"][0]
    assert step["prompt_cache"]["source"] == "not measured" and step["prompt_cache"]["repeated_prompts"] is None
    assert step["ttft_ms"]["n"] > 0  # everything else is still measured
    html = (tmp_path / "report.html").read_text()
    assert "prompt cache: not measured" in html
    assert "not recorded (a run recorded before the prompt cache was measured)" in html


def test_the_servers_counters_stand_in_when_no_response_reported():
    server = {"cached_fraction": 0.4, "cached_tokens": 40.0, "prompt_tokens": 100.0, "source": "server counters"}
    cache = finish_prompt_cache({"mode": "cold", "requests_reporting": 0}, server)
    assert cache["cached_fraction"] == 0.4 and cache["source"] == "server" and "40.0%" in cache["flag"]
    both = finish_prompt_cache(
        {"mode": "shared", "requests": {**server, "cached_fraction": 0.3}, "requests_reporting": 9}, server
    )
    assert both["cached_fraction"] == 0.3 and both["source"] == "requests" and both["server"] == server
    assert both.get("flag") is None  # hits on purpose
    nothing = finish_prompt_cache({"mode": "cold"}, None)  # a cold step nobody measured: no figure, no flag
    assert "cached_fraction" not in nothing and nothing.get("flag") is None


def test_a_comparison_with_a_run_whose_prompts_were_replayed_says_so(tmp_path):
    """A nightly baseline saved before prompts were cold by default replayed them: its TTFT had cache hits."""
    from locust_llm.analysis.regression import compare_runs
    from locust_llm.rundir import load_run

    old, new, again = tmp_path / "old", tmp_path / "new", tmp_path / "again"
    for path in (old, new, again):
        path.mkdir()
        cache_run(path, {})
    patch_env(old, "workload", prompt_cache="replayed")
    result = compare_runs(load_run(old), load_run(new))
    assert result.prompt_cache.startswith("the runs' prompts differ: replayed in old, cold in new")
    assert compare_runs(load_run(new), load_run(again)).prompt_cache is None

"""A replayed-prompt run (the old behaviour, asked for) against the real CPU llama.cpp server: its prompt cache
serves the repeats, the run measures them as llama.cpp counts them, and the report flags the steps."""

import json

import pandas as pd

from tests.helpers import REPO, assert_run_completed, require_llama_server, run_locust


def test_a_replayed_run_on_llamacpp_is_measured_as_the_server_counts_it_and_flagged(tmp_path):
    require_llama_server()
    scenario = tmp_path / "replayed.yaml"
    text = (REPO / "scenarios" / "tiny-cpu-test.yaml").read_text()
    # Counters are read at the telemetry samples nearest the window's edges: polled often, the counters' span is
    # the window's within a quarter second (a replayed run's hit rate climbs over time, so the span matters).
    # Four prompts, replayed: from the fifth request on, each prompt is one the server has seen.
    dataset = tmp_path / "four.jsonl"
    dataset.write_text(
        "".join(json.dumps({"prompt": f"story {i}: once upon a time there was a"}) + "\n" for i in range(4))
    )
    text = text.replace("  prompt_tokens: 32\n", f"  unique_prefix: false\n  dataset: {dataset}\n")
    scenario.write_text(text + "telemetry: {interval_s: 0.25}\n")
    done = run_locust(
        tmp_path,
        "--scenario",
        str(scenario),
        "--variant",
        "baseline",
        "--ladder",
        "2",
        "--step-duration",
        "4",
        "--warmup",
        "2",
        "--run-id",
        "replayed",
    )
    assert_run_completed(done)
    run_dir = tmp_path / "replayed"
    frame = pd.read_parquet(run_dir / "requests.parquet")
    ok = frame[frame["error_class"].isna()]
    hits = ok["cached_tokens"] >= ok["prompt_tokens"] / 2
    assert hits.sum() >= (len(ok) - 4) / 2  # four prompts again and again: most come from a cache
    (step,) = json.loads((run_dir / "summary.json").read_text())["variants"]["baseline"]["steps"]
    cache = step["prompt_cache"]
    print(
        f"replayed on llama.cpp: {len(ok)} requests, {hits.sum()} mostly cached; cached share "
        f"{cache['cached_fraction']:.3f} (responses) vs {cache['server']['cached_fraction']:.3f} (counters)"
    )
    assert cache["mode"] == "replayed" and cache["cached_fraction"] > 0.3 and cache["repeated_prompts"] > 0
    # The responses' sum and llama.cpp's own counters over the window: one figure, two sources.
    assert abs(cache["cached_fraction"] - cache["server"]["cached_fraction"]) < 0.01
    assert cache["flag"].startswith("prompts replayed (load.unique_prefix: false)")
    html = (run_dir / "report.html").read_text()
    assert "prompts replayed (load.unique_prefix: false)" in html
    env = json.loads((run_dir / "env.json").read_text())
    assert "--cache-ram" not in env["servers"]["baseline"]["command"]  # a replay keeps the server's own cache

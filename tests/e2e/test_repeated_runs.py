"""Cold across runs: a second identical run sends prompts of its own, so a server's prompt cache from the first
serves none of them; with ``load.same_prompts_every_run`` it sends the same bytes, and the cache's hits are
flagged with their likely cause. Against the reference server's prefix cache, which counts every hit."""

import json

import pytest

from tests.helpers import run_locust


def scenario(tmp_path, same: bool):
    path = tmp_path / f"repeat-{same}.yaml"
    path.write_text(
        "name: repeat\nserver: {engine: external, url: 'http://127.0.0.1:9'}\nvariants: {ref: {}}\n"
        "load: {ladder: [1], step_duration_s: 2, warmup_s: 0.5, max_tokens: 4, prompt_tokens: 64, "
        f"same_prompts_every_run: {str(same).lower()}}}\n"
    )
    return path


def cache_of(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    (step,) = summary["variants"]["ref"]["steps"]
    return step["prompt_cache"], json.loads((run_dir / "env.json").read_text())["workload"]


@pytest.mark.parametrize("same", [False, True])
def test_a_second_identical_run_is_cold_unless_it_asks_for_the_same_prompts(tmp_path, refserver_factory, same):
    server = refserver_factory("--ttft-s", "0.005", "--gap-s", "0.002")
    path = scenario(tmp_path, same)
    for run_id in ("first", "second"):
        done = run_locust(tmp_path, "--host", server.url, "--scenario", str(path), "--run-id", run_id, timeout=120)
        assert (tmp_path / run_id / "summary.json").exists(), done.stderr[-3000:]
    first, _ = cache_of(tmp_path / "first")
    second, workload = cache_of(tmp_path / "second")
    assert first["cached_fraction"] == 0 and first["flag"] is None  # the first run found an empty cache
    if not same:
        assert workload["across_runs"] == "unique" and second["across_runs"] == "unique"
        assert second["cached_fraction"] == 0 and second["flag"] is None
    else:
        # 3 of each prompt's 4 blocks of 16 words were the first run's (the last block is never reused).
        assert workload["across_runs"] == "repeated" and second["cached_fraction"] > 0.5
        assert "an earlier run sent these same prompts" in second["flag"]
        report = (tmp_path / "second" / "report.html").read_text()
        assert "the same bytes as every other run with this seed" in report

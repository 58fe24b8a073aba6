"""A headless Locust run against the real CPU llama.cpp server writes the whole run directory."""

import json

import pandas as pd
import pytest

from tests.helpers import assert_run_completed, require_llama_server, run_locust

SECRET = "sk-test-never-in-a-file-7c1e"
CONTRACT_COLUMNS = [
    "run_id",
    "variant",
    "level",
    "worker",
    "request_id",
    "bucket",
    "prompt_tokens",
    "output_tokens",
    "token_source",
    "t_intended",
    "t_send",
    "t_first",
    "t_end",
    "chunk_offsets",
    "chunk_tokens",
    "finish_reason",
    "error_class",
    "error_message",
    "http_status",
    "draft_n",
    "draft_accepted",
]
METRICS = ["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "decode_tps"]


@pytest.fixture(scope="module")
def headless_run(tmp_path_factory):
    require_llama_server()
    tmp_path = tmp_path_factory.mktemp("runs")
    done = run_locust(
        tmp_path,
        "--json",
        "--scenario",
        "scenarios/tiny-cpu-test.yaml",
        "--ladder",
        "1,2",
        "--step-duration",
        "3",
        "--warmup",
        "1",
        "--run-id",
        "headless",
        env={"LOCUST_LLM_API_KEY": SECRET},
    )
    assert_run_completed(done)
    return tmp_path / "headless", json.loads(done.stdout)


def test_run_directory_is_complete(headless_run):
    run_dir, _ = headless_run
    for name in (
        "requests.parquet",
        "env.json",
        "summary.json",
        "steps.json",
        "server-baseline.log",
        "server-spec-k4.log",
    ):
        assert (run_dir / name).stat().st_size > 0, name
    assert not (run_dir / "requests.parts").exists()


def test_every_request_locust_counted_is_recorded(headless_run):
    run_dir, locust_stats = headless_run
    frame = pd.read_parquet(run_dir / "requests.parquet")
    assert len(frame) == sum(entry["num_requests"] for entry in locust_stats) > 0
    assert frame["request_id"].is_unique
    assert set(CONTRACT_COLUMNS) <= set(frame.columns)
    assert str(frame["chunk_offsets"].iloc[0].dtype) == "float32"


def test_tokens_are_counted_per_chunk(headless_run):
    run_dir, _ = headless_run
    frame = pd.read_parquet(run_dir / "requests.parquet")
    ok = frame[frame["error_class"].isna()]
    assert (ok["token_source"] == "server_events").all()
    assert (ok["chunk_tokens"].map(sum) == ok["output_tokens"]).all()
    assert (ok["output_tokens"] == ok["max_tokens"]).all()  # ignore_eos holds output lengths
    first_offsets = ok["chunk_offsets"].map(lambda offsets: offsets[0])
    assert ((ok["t_first"] - ok["t_send"]) - first_offsets).abs().max() < 1e-3


def test_speculation_shows_in_records(headless_run):
    run_dir, _ = headless_run
    frame = pd.read_parquet(run_dir / "requests.parquet")
    spec = frame[(frame["variant"] == "spec-k4") & frame["error_class"].isna()]
    base = frame[(frame["variant"] == "baseline") & frame["error_class"].isna()]
    assert (spec["draft_n"] > 0).all() and spec["draft_accepted"].sum() > 0
    assert base["draft_n"].isna().all()


def test_summary_has_every_variant_and_level(headless_run):
    run_dir, _ = headless_run
    summary = json.loads((run_dir / "summary.json").read_text())
    frame = pd.read_parquet(run_dir / "requests.parquet")
    assert summary["records"] == len(frame)
    for variant in ("baseline", "spec-k4"):
        steps = summary["variants"][variant]["steps"]
        assert [s["level"] for s in steps] == [1.0, 2.0]
        for step in steps:
            steady = frame[
                (frame["variant"] == variant) & (frame["step"] == step["step"]) & (frame["phase"] == "steady")
            ]
            assert step["requests"] == len(steady) > 0
            assert step["errors"] == steady["error_class"].notna().sum()
            assert step["output_tps"] > 0
            for metric in METRICS:
                assert {"p50", "p95", "p99", "mean", "n", "ci95"} <= set(step[metric])
                assert step[metric]["n"] > 0


def test_conditions_recorded_and_no_secret_written(headless_run):
    run_dir, _ = headless_run
    env = json.loads((run_dir / "env.json").read_text())
    for variant in ("baseline", "spec-k4"):
        server = env["servers"][variant]
        assert "--metrics" in server["command"] and server["version"]
        assert server["model"].endswith("target.gguf")
    assert env["servers"]["spec-k4"]["speculative"]["n_max"] == 4
    assert env["client"]["packages"]["locust"]
    # the prompts were sized by the server's own /tokenize, so the report can call their lengths exact
    assert env["workload"]["exact"] is True and env["workload"]["buckets"]
    for path in run_dir.iterdir():
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path.name


def test_prompts_are_cold_on_the_real_server_and_its_counters_agree(headless_run):
    """Unique prompts by default, and llama.cpp says they were cold: per request (timings.cache_n) and in its own
    counters (prompt_tokens_cached / prompt_tokens), which the two figures of every step compare; its host-RAM
    prompt cache is off (--cache-ram 0)."""
    run_dir, _ = headless_run
    frame = pd.read_parquet(run_dir / "requests.parquet")
    ok = frame[frame["error_class"].isna()]
    assert ok["cached_tokens"].notna().all()  # llama.cpp always says
    # A slot reuses what every prompt shares (a BOS token), and now and then an accidental shared first word.
    assert (ok["cached_tokens"] <= 1).mean() > 0.9
    assert all(group["prompt_hash"].is_unique for _, group in frame.groupby("variant"))
    summary = json.loads((run_dir / "summary.json").read_text())
    for entry in summary["variants"].values():
        for step in entry["steps"]:
            cache = step["prompt_cache"]
            assert cache["mode"] == "cold" and cache["source"] == "requests" and cache["flag"] is None
            assert cache["cached_fraction"] < 0.05 and cache["repeated_prompts"] == 0
            assert abs(cache["cached_fraction"] - cache["server"]["cached_fraction"]) < 0.01
    env = json.loads((run_dir / "env.json").read_text())
    assert all("--cache-ram" in server["command"] for server in env["servers"].values())

"""A run as ``vllm bench serve --save-result`` files: every field vLLM's writer puts in one, with its meaning, checked
field by field against the writer's key list (recorded from vllm/benchmarks/serve.py, tests/fixtures/vllm/) and
against a run whose answers are computed by hand here."""

import json
import re

import numpy as np

from locust_llm.cli import main
from locust_llm.records import RequestRecord
from locust_llm.report.vllm_bench import PERCENTILES, bench_results
from locust_llm.rundir import load_run
from tests.helpers import REPO
from tests.synthetic import patch_env, stream_record, window, write_run

WRITER = json.loads((REPO / "tests" / "fixtures" / "vllm" / "bench-serve-result.json").read_text())
WINDOW_S = 10.0
TTFT_S, GAP_S, TOKENS = 0.1, 0.02, 5
START = 1_800_000_000.0


def run_dir(tmp_path):
    """Variant ``base`` at 2 users: 6 successful streams (TTFT 0.1 s, then a token every 0.02 s: 5 tokens, one per
    chunk, prompts of 16 tokens) and one refused request; one warm-up stream outside the window."""
    rows = [
        stream_record("r", "base", 2, 0, START + i, TTFT_S, GAP_S, TOKENS, prompt_tokens=16, seq=i, request_id=f"s{i}")
        for i in range(6)
    ]
    rows.append(
        RequestRecord(
            run_id="r",
            variant="base",
            level=2,
            step=0,
            phase="steady",
            request_id="failed",
            prompt_tokens=16,
            t_send=START + 7,
            t_done=START + 7.001,
            error_class="connect_error",
        ).to_dict()
    )
    warm = stream_record("r", "base", 2, 0, START - 0.5, TTFT_S, GAP_S, TOKENS, prompt_tokens=16, request_id="w")
    rows.append({**warm, "phase": "warmup"})
    (tmp_path / "r").mkdir()
    path = write_run(tmp_path / "r", rows, [window("base", 0, 2, START, WINDOW_S)], slo={"ttft_ms": 150.0})
    patch_env(path, "servers", base={"served_model": "org/tiny-model", "url": "http://127.0.0.1:1"})
    patch_env(path, "load", api="completions", tokenizer="server")
    return path


def writer_keys(percentiles=PERCENTILES, metrics=("ttft", "tpot", "itl", "e2el")) -> set[str]:
    keys = set(WRITER["setup"]) | set(WRITER["traffic"]) | set(WRITER["result"])
    for m in metrics:
        keys |= {f"mean_{m}_ms", f"median_{m}_ms", f"std_{m}_ms"} | {f"p{p}_{m}_ms" for p in percentiles}
    return keys


def test_every_field_of_vllms_writer_and_only_metadata_besides(tmp_path):
    ((key, result),) = bench_results(load_run(run_dir(tmp_path))).items()
    assert key == ("base", 2.0)
    extra = set(result) - writer_keys()
    assert writer_keys() <= set(result), writer_keys() - set(result)
    # Anything else is --metadata KEY=VALUE: a string, as vLLM writes metadata.
    assert extra == {"locust_llm_run_id", "locust_llm_variant", "locust_llm_level", "locust_llm_mode"}
    assert all(isinstance(result[k], str) for k in extra)
    assert not set(result) & set(WRITER["removed_without_save_detailed"])
    assert re.fullmatch(r"\d{8}-\d{6}", result["date"])
    for name, kind in {**WRITER["result"], "num_prompts": "int", "max_concurrency": "int"}.items():
        value = result[name]
        assert isinstance(value, int if kind == "int" else (int, float)) and not isinstance(value, bool), name


def test_the_figures_are_vllms_definitions_computed_by_hand(tmp_path):
    ((_, r),) = bench_results(load_run(run_dir(tmp_path))).items()
    assert (r["label"], r["model_id"], r["tokenizer_id"], r["backend"]) == (
        "base",
        "org/tiny-model",
        "org/tiny-model",
        "openai",
    )
    assert (r["request_rate"], r["max_concurrency"], r["burstiness"]) == ("inf", 2, 1.0)  # closed loop of 2 users
    assert (r["num_prompts"], r["completed"], r["failed"], r["duration"]) == (7, 6, 1, WINDOW_S)
    assert (r["total_input_tokens"], r["total_output_tokens"]) == (6 * 16, 6 * TOKENS)  # successful ones only
    assert r["request_throughput"] == 6 / WINDOW_S and r["output_throughput"] == 6 * TOKENS / WINDOW_S
    assert r["total_token_throughput"] == 6 * (16 + TOKENS) / WINDOW_S
    assert r["request_goodput"] == 6 / WINDOW_S  # TTFT 100 ms <= the 150 ms SLO, for each
    e2el_ms = (TTFT_S + (TOKENS - 1) * GAP_S) * 1000
    for name, ms in (("ttft", TTFT_S * 1000), ("tpot", GAP_S * 1000), ("itl", GAP_S * 1000), ("e2el", e2el_ms)):
        for stat in ["mean", "median"] + [f"p{p}" for p in PERCENTILES]:
            assert np.isclose(r[f"{stat}_{name}_ms"], ms, rtol=1e-4), (stat, name, r[f"{stat}_{name}_ms"])
        assert np.isclose(r[f"std_{name}_ms"], 0, atol=1e-3)
    # One stream a second, each over in 0.18 s: 5 tokens in its second, one request active.
    assert (r["max_output_tokens_per_s"], r["max_concurrent_requests"]) == (float(TOKENS), 1)


def test_the_command_writes_one_file_per_variant_and_level_named_as_vllm_names_them(tmp_path, capsys):
    path = run_dir(tmp_path)
    assert main(["export-vllm", str(path), "--out", str(tmp_path / "out")]) == 0
    (written,) = (tmp_path / "out").iterdir()
    assert re.fullmatch(r"base-infqps-concurrency2-tiny-model-\d{8}-\d{6}\.json", written.name)
    assert json.loads(written.read_text())["completed"] == 6
    assert str(written) in capsys.readouterr().out

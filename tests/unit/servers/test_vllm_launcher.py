"""The vLLM launcher's choices without vLLM: which command, the CPU environment's preload, the built-in real model
resolved to its cached Hugging Face directory, and --per-request-spec-decode-metrics only where vLLM has it."""

import json
import sys
from pathlib import Path

import pytest

from locust_llm import realmodel_hf
from locust_llm.scenario import load_scenario
from locust_llm.servers import ServerError, plan_variant
from locust_llm.servers.vllm import API_SERVER, PER_REQUEST_SPEC_FLAG, PYTHON_ENV

SCENARIO = """
name: v
server:
  engine: vllm
  model: {model}
  env: {{VLLM_TARGET_DEVICE: cpu}}
variants:
  baseline: {{}}
  self:
    speculative: {{method: draft_model, model: "{model}", num_speculative_tokens: 3}}
  ngram:
    speculative: {{method: ngram, num_speculative_tokens: 4, prompt_lookup_min: 2, prompt_lookup_max: 4}}
"""


@pytest.fixture
def vllm_env(tmp_path, monkeypatch):
    """A stand-in for vLLM's environment: a ``bin/python`` (this interpreter) beside a ``lib/libiomp5.so``."""
    env = tmp_path / "vllm-env"
    (env / "bin").mkdir(parents=True)
    (env / "lib").mkdir()
    (env / "lib" / "libiomp5.so").write_bytes(b"")
    python = env / "bin" / "python"
    python.symlink_to(sys.executable)
    monkeypatch.setenv(PYTHON_ENV, str(python))
    monkeypatch.setenv("LOCUST_LLM_CACHE", str(tmp_path / "cache"))
    return env


def scenario(tmp_path: Path, model: str = "org/model"):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(model=model))
    return load_scenario(path)


def test_a_python_runs_the_api_server_with_the_cpu_preload(tmp_path, vllm_env):
    plan = plan_variant(scenario(tmp_path), "baseline", port=8000)
    assert plan.argv[:5] == [str(vllm_env / "bin" / "python"), "-m", API_SERVER, "--model", "org/model"]
    assert plan.env["LD_PRELOAD"] == str(vllm_env / "lib" / "libiomp5.so")
    assert plan.version_argv[:2] == [str(vllm_env / "bin" / "python"), "-c"]


def test_the_per_request_flag_only_where_vllm_has_it(tmp_path, vllm_env, monkeypatch):
    assert PER_REQUEST_SPEC_FLAG not in plan_variant(scenario(tmp_path), "ngram", port=8000).argv
    fake = tmp_path / "site" / "vllm"
    (fake / "config").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "config" / "observability.py").write_text("per_request_spec_decode_metrics = 'none'\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    argv = plan_variant(scenario(tmp_path), "ngram", port=8000).argv
    assert argv[argv.index(PER_REQUEST_SPEC_FLAG) + 1] == "summary"
    assert PER_REQUEST_SPEC_FLAG not in plan_variant(scenario(tmp_path), "baseline", port=8000).argv


def test_the_real_model_resolves_to_its_cached_directory_for_target_and_draft(tmp_path, vllm_env, monkeypatch):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF stand-in")
    monkeypatch.setattr(realmodel_hf, "gguf_path", lambda: gguf)
    digest = realmodel_hf.sha256_of(gguf)
    converted = realmodel_hf.hf_dir(digest)
    converted.mkdir(parents=True)  # as a finished conversion leaves it: source.json written last
    (converted / realmodel_hf.SOURCE_FILE).write_text(json.dumps({"gguf": gguf.name, "sha256": digest}))
    plan = plan_variant(scenario(tmp_path, "locust-llm:smollm2-135m-instruct"), "self", port=8000)
    assert plan.argv[plan.argv.index("--model") + 1] == str(converted) == plan.model
    config = json.loads(plan.argv[plan.argv.index("--speculative-config") + 1])
    assert config == {"method": "draft_model", "model": str(converted), "num_speculative_tokens": 3}
    assert digest in plan.notes["real_model"]


def test_an_unknown_built_in_model_is_named(tmp_path, vllm_env):
    with pytest.raises(ServerError, match="the one built in is locust-llm:smollm2-135m-instruct"):
        plan_variant(scenario(tmp_path, "locust-llm:other"), "baseline", port=8000)


def test_no_vllm_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.delenv(PYTHON_ENV, raising=False)
    monkeypatch.setenv("LOCUST_LLM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ServerError, match=r"vLLM not found; .*install\.sh --vllm"):
        plan_variant(scenario(tmp_path), "baseline", port=8000)

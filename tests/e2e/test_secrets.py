"""No secret reaches a file of the run: a password in --host, an API key in the environment and in a server's
arguments, a token in a server's environment. The run directory is searched byte by byte afterwards."""

import json
import urllib.request

import pytest

from tests.helpers import REPO, assert_run_completed, require_llama_server, run_locust

PASSWORD = "S3cretPass-e2e-9f1"
API_KEY = "sk-fake-e2e-key-77aa"
HF_TOKEN = "hf_fake_e2e_token_31"


def files_with(run_dir, *secrets: str) -> list[str]:
    hits = []
    for path in run_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            hits += [f"{path.name}: {s}" for s in secrets if s.encode() in data]
    return hits


def test_a_password_in_the_host_url_is_never_written_and_the_key_goes_on_every_request(tmp_path, refserver_factory):
    # No prompt cache, so no /metrics: the console's warning about it shows the URL, masked.
    server = refserver_factory("--ttft-s", "0.005", "--gap-s", "0.002", "--api-key", API_KEY, "--cache-block", "0")
    host = server.url.replace("http://", f"http://alice:{PASSWORD}@")
    scenario = tmp_path / "ext.yaml"
    scenario.write_text(
        "name: ext\nserver: {engine: external, url: 'http://127.0.0.1:9'}\nvariants: {ref: {}}\n"
        "load: {ladder: [1], step_duration_s: 2, warmup_s: 0.5, max_tokens: 8, prompt_tokens: 16}\n"
    )
    done = run_locust(
        tmp_path,
        "--host",
        host,
        "--scenario",
        str(scenario),
        "--run-id",
        "pw",
        env={"LOCUST_LLM_API_KEY": API_KEY},
        timeout=120,
    )
    assert_run_completed(done)
    assert files_with(tmp_path / "pw", PASSWORD, API_KEY) == []
    assert "http://alice:***@127.0.0.1" in (tmp_path / "pw" / "env.json").read_text()
    # The console masks it too (log records are masked as they are made, whatever the handler: --logfile and the
    # web UI's /logs alike); the refserver has no /metrics, so the telemetry warning quotes the URL.
    console = done.stdout + done.stderr
    assert PASSWORD not in console and API_KEY not in console
    assert "http://alice:***@127.0.0.1" in console and "/metrics answered HTTP 404" in console
    # The refserver refuses a request without the key (401) and counts it: none came.
    with urllib.request.urlopen(f"{server.url}/ref/auth", timeout=10) as answer:
        seen = json.loads(answer.read())
    assert seen["without_key"] == {}
    assert {"GET /v1/models", "POST /tokenize", "POST /v1/completions", "GET /metrics"} <= set(seen["with_key"])


@pytest.mark.server
def test_secrets_in_server_arguments_and_environment_are_never_written(tmp_path):
    require_llama_server()
    scenario = tmp_path / "keyed.yaml"
    scenario.write_text(
        (REPO / "scenarios" / "tiny-cpu-test.yaml")
        .read_text()
        .replace(
            'args: ["-c", "2048", "-np", "4"]',
            f'args: ["-c", "2048", "-np", "4", "--api-key", "{API_KEY}"]\n  env: {{HF_TOKEN: "{HF_TOKEN}"}}',
        )
    )
    done = run_locust(
        tmp_path,
        "--scenario",
        str(scenario),
        "--variant",
        "baseline",
        "--ladder",
        "1",
        "--step-duration",
        "2",
        "--warmup",
        "0.5",
        "--run-id",
        "keyed",
        env={"LOCUST_LLM_API_KEY": API_KEY},
    )
    assert_run_completed(done)  # the key reached the server on every request, or it would have refused them
    assert files_with(tmp_path / "keyed", API_KEY, HF_TOKEN) == []
    assert "--api-key ***" in (tmp_path / "keyed" / "server-baseline.log").read_text()

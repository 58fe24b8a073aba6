"""``LOCUST_LLM_API_KEY`` goes on every request our code sends to a server: streams, /v1/models, /tokenize, the
consistency prompts and the direct /metrics scrape, also when ``--host`` holds a password (which would otherwise
become Basic auth). The reference server, run with ``--api-key``, counts who came with and without the key."""

import json
import urllib.request
from types import SimpleNamespace

import pytest

from locust_llm.client.engines import API_KEY_ENV
from locust_llm.client.greedy import greedy_outputs
from locust_llm.client.stream import RequestSpec, StreamingClient
from locust_llm.client.tokenizer import ServerTokenizer
from locust_llm.records import RequestRecord
from locust_llm.runtime import session as session_module
from locust_llm.scenario import TelemetrySpec
from locust_llm.servers.base import context_size, served_model
from locust_llm.telemetry.maps import map_for
from locust_llm.telemetry.sources import ScrapeSource
from locust_llm.workload import PromptItem

KEY = "sk-fake-unit-key-5c1d"


def auth_counts(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/ref/auth", timeout=10) as answer:
        return json.loads(answer.read())


def test_every_request_to_the_server_carries_the_key(refserver_factory, monkeypatch):
    server = refserver_factory("--api-key", KEY)
    monkeypatch.setenv(API_KEY_ENV, KEY)
    url = server.url.replace("http://", "http://alice:S3cretPass@")

    assert served_model(url)[0] == "refserver-model"  # GET /v1/models
    context_size(url)  # GET /v1/models, then GET /props
    assert ServerTokenizer(url).count("one two three") == 3  # POST /tokenize
    prompts = [PromptItem("b", "one two", 2, 4, True, "b/0")]
    assert "HTTP 400" in greedy_outputs(url, "external", "m", prompts)[0].error  # the refserver only streams
    assert ScrapeSource("scrape", f"{url}/metrics", map_for("external"), 5).poll()  # its prompt-cache counters
    client = StreamingClient(url, engine="external")
    record = RequestRecord()
    try:
        client.stream(RequestSpec(prompt="one two", max_tokens=4, api="completions"), record)
    finally:
        client.close()
    assert record.ok and sum(record.chunk_tokens) == 4, record.error_message

    counts = auth_counts(server.url)
    assert counts["without_key"] == {}
    assert {"GET /v1/models", "GET /props", "POST /tokenize", "POST /v1/completions", "GET /metrics"} <= set(
        counts["with_key"]
    )


def test_the_reference_server_refuses_and_counts_a_request_without_the_key(refserver_factory):
    server = refserver_factory("--api-key", KEY)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{server.url}/v1/models", timeout=10)
    assert refused.value.code == 401
    assert auth_counts(server.url) == {"with_key": {}, "without_key": {"GET /v1/models": 1}}


def test_with_a_key_auto_scrapes_directly_instead_of_through_our_keyless_prometheus(monkeypatch):
    """Our Prometheus cannot carry the key (it would have to be written to its config or a file)."""
    started = []
    monkeypatch.setenv(API_KEY_ENV, KEY)
    monkeypatch.setattr(session_module, "prometheus_binary", lambda: "/usr/bin/prometheus")
    monkeypatch.setattr(
        session_module, "PrometheusServer", lambda **kw: SimpleNamespace(start=lambda: started.append(kw))
    )
    stub = SimpleNamespace(
        plan=SimpleNamespace(telemetry=TelemetrySpec(prometheus="auto")), run=SimpleNamespace(file=lambda name: name)
    )
    assert session_module.ServerSession._start_prometheus(stub) is None and started == []
    monkeypatch.delenv(API_KEY_ENV)
    session_module.ServerSession._start_prometheus(stub)
    assert len(started) == 1  # without a key, "auto" uses it where installed

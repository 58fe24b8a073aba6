"""What each engine's requests look like (pure): length pinning, tokenize shapes, greedy calls, the API key."""

import pytest

from locust_llm.client.engines import (
    API_KEY_ENV,
    auth_headers,
    greedy_answer,
    greedy_request,
    request_extra,
    tokenize_body,
)


def test_request_extra():
    assert request_extra("vllm", 128) == {"ignore_eos": True, "min_tokens": 128}
    assert request_extra("sglang", 64) == {"ignore_eos": True, "min_tokens": 64}
    assert request_extra("llamacpp", 64) == {"ignore_eos": True}
    assert request_extra("external", 64) == {}
    assert request_extra("vllm", 64, ignore_eos=False) == {}


def test_tokenize_bodies_per_shape():
    assert tokenize_body("llamacpp", "hi there") == {"content": "hi there", "add_special": False}
    assert tokenize_body("vllm", "hi", "m") == {"prompt": "hi", "add_special_tokens": False, "model": "m"}
    assert "model" not in tokenize_body("vllm", "hi")


def test_greedy_requests_and_answers_per_engine():
    path, body = greedy_request("llamacpp", "m", "p", 8)
    assert path == "/completion" and body["n_predict"] == 8 and body["return_tokens"] and body["temperature"] == 0
    assert greedy_answer("llamacpp", {"content": "x", "tokens": [1, 2]}) == {"text": "x", "tokens": [1, 2]}
    path, body = greedy_request("vllm", "m", "p", 8)
    assert path == "/v1/completions" and body["model"] == "m" and body["ignore_eos"] and body["max_tokens"] == 8
    assert "ignore_eos" not in greedy_request("external", "", "p", 8)[1]
    answer = {"choices": [{"text": "y", "token_ids": [3]}]}
    assert greedy_answer("vllm", answer) == {"text": "y", "tokens": [3]}
    assert greedy_answer("vllm", {"choices": ["odd"]}) == {"text": "", "tokens": None}
    with pytest.raises(ValueError):
        greedy_answer("vllm", ["not", "an", "object"])


def test_api_key_header_only_when_set(monkeypatch):
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    assert auth_headers() == {}
    monkeypatch.setenv(API_KEY_ENV, "sk-x")
    assert auth_headers() == {"Authorization": "Bearer sk-x"}


def test_a_seeded_sample_with_natural_stopping_per_engine():
    path, body = greedy_request("llamacpp", "m", "p", 8, temperature=0.7, seed=3, ignore_eos=False)
    assert path == "/completion" and body["temperature"] == 0.7 and body["seed"] == 3 and body["ignore_eos"] is False
    path, body = greedy_request("vllm", "m", "p", 8, temperature=0.7, seed=3, ignore_eos=False)
    assert path == "/v1/completions" and body["seed"] == 3 and "ignore_eos" not in body
    assert "seed" not in greedy_request("llamacpp", "m", "p", 8)[1]  # greedy: no seed needed

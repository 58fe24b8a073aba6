"""What each engine's requests look like: body fields that pin output lengths, tokenize shapes, greedy calls.

Pure: no I/O. The one place that knows how llama.cpp, vLLM and SGLang differ on the request side.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = [
    "API_KEY_ENV",
    "OMITS_ZERO_CACHED",
    "PATHS",
    "TOKENIZE_SHAPES",
    "auth_headers",
    "cache_extra",
    "greedy_answer",
    "greedy_request",
    "request_extra",
    "tokenize_body",
    "use_key_env",
]

API_KEY_ENV = "LOCUST_LLM_API_KEY"
# Launched with cache reports on (``servers.vllm``, ``servers.sglang``), these may leave
# ``usage.prompt_tokens_details`` out when no prompt token came from the cache (SGLang; vLLM 0.32 sends 0): absent
# there means 0.
OMITS_ZERO_CACHED = ("vllm", "sglang")
PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
# POST /tokenize shapes, tried in this order: llama.cpp, then vLLM/SGLang.
TOKENIZE_SHAPES = ("llamacpp", "vllm")


# Servers whose key is in a variable of their own (``variants.<name>.api_key_env``: a running server per variant), by
# base URL; every other server's is in ``LOCUST_LLM_API_KEY``.
KEY_ENVS: dict[str, str] = {}


def use_key_env(base_url: str, name: str) -> None:
    """Requests to ``base_url`` carry the key in ``$name`` (set in every process that sends them)."""
    KEY_ENVS[base_url.rstrip("/")] = name


def auth_headers(url: str | None = None) -> dict[str, str]:
    """The bearer token for a request to ``url`` (``LOCUST_LLM_API_KEY``, or its server's own variable), for every
    request to the server (never written anywhere)."""
    name = next(
        (env for base, env in KEY_ENVS.items() if url and (url == base or url.startswith(base + "/"))), API_KEY_ENV
    )
    key = os.environ.get(name)
    return {"Authorization": f"Bearer {key}"} if key else {}


def request_extra(
    engine: str, max_tokens: int | None = None, ignore_eos: bool = True, timings_per_token: bool = False
) -> dict[str, Any]:
    """Body fields that pin the output length on ``engine``, beyond ``max_tokens``; with ``timings_per_token``
    (``load.positions.acceptance``) llama.cpp also sends its timings, draft counts included, on every token.

    * vLLM and SGLang: ``ignore_eos`` and ``min_tokens`` (both are extra sampling parameters of
      their OpenAI-compatible endpoints), so every request produces exactly ``max_tokens``.
    * llama.cpp: ``ignore_eos`` (it has no ``min_tokens``; ``max_tokens`` maps to ``n_predict``).
    * external / unknown servers: nothing, since strict OpenAI-compatible servers reject unknown
      fields; their output lengths are whatever the model produces (recorded per request).

    ``ignore_eos=False`` (the scenario's ``load.ignore_eos``) leaves them out: natural stopping.
    """
    timings = {"timings_per_token": True} if timings_per_token and engine == "llamacpp" else {}
    if not ignore_eos:
        return timings
    if engine in ("vllm", "sglang"):
        extra: dict[str, Any] = {"ignore_eos": True}
        if max_tokens:
            extra["min_tokens"] = int(max_tokens)
        return extra
    if engine == "llamacpp":
        return {"ignore_eos": True, **timings}
    return {}


def cache_extra(engine: str, salt: str) -> dict[str, Any]:
    """Body fields that keep a cold request (``load.prompt_cache`` cold) out of the server's prompt cache, beyond its
    unique prefix: vLLM and SGLang get ``cache_salt`` (a salt of its own: its blocks share nothing with another
    request's, a chat template's header included; servers without it ignore the field). llama.cpp gets nothing:
    ``cache_prompt: false`` made cold TTFT no truer there (``benchmarks/cold_prompt_levers.py``)."""
    return {"cache_salt": salt} if engine in ("vllm", "sglang") else {}


def tokenize_body(shape: str, text: str, model: str | None = None) -> dict[str, Any]:
    """``POST /tokenize`` body: llama.cpp ``{"content", "add_special"}``; vLLM/SGLang ``{"prompt", ...}``."""
    if shape == "llamacpp":
        return {"content": text, "add_special": False}
    body: dict[str, Any] = {"prompt": text, "add_special_tokens": False}
    if model:
        body["model"] = model
    return body


def greedy_request(
    engine: str,
    model: str,
    prompt: str,
    max_tokens: int,
    temperature: float = 0.0,
    seed: int | None = None,
    ignore_eos: bool = True,
) -> tuple[str, dict[str, Any]]:
    """Path and body of a non-streaming completion that returns token ids where the engine can: greedy, or with a
    ``temperature`` and ``seed`` one seeded sample (the quality check's sampled answers)."""
    if engine == "llamacpp":
        body: dict[str, Any] = {
            "prompt": prompt,
            "n_predict": max_tokens,
            "temperature": temperature,
            "return_tokens": True,
            "ignore_eos": ignore_eos,
            "cache_prompt": False,
        }
    else:
        body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": temperature, "return_token_ids": True}
        if model:
            body["model"] = model
        if engine in ("vllm", "sglang") and ignore_eos:
            body["ignore_eos"] = True
    if seed is not None:
        body["seed"] = seed
    return ("/completion" if engine == "llamacpp" else "/v1/completions"), body


def greedy_answer(engine: str, data: Any) -> dict[str, Any]:
    """``{"text", "tokens"}`` from a greedy completion's JSON answer."""
    if not isinstance(data, dict):
        raise ValueError(f"answer is not a JSON object: {str(data)[:80]!r}")
    if engine == "llamacpp":
        return {"text": data.get("content", ""), "tokens": data.get("tokens")}
    choices = data.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    return {"text": choice.get("text", ""), "tokens": choice.get("token_ids")}

"""Greedy outputs of fixed prompts per variant, for the baseline-vs-speculative agreement check.

Under greedy decoding speculation must not change a single token; a divergence is a defect of the
server configuration. Token ids are used where the server returns them (llama.cpp ``/completion``
with ``return_tokens``, vLLM ``return_token_ids``); otherwise the text is compared.
"""

from __future__ import annotations

import json

import gevent

from ..workload import PromptItem
from .engines import greedy_answer, greedy_request
from .http import requests, session

__all__ = ["greedy_output", "greedy_outputs"]


MAX_ANSWER_BYTES = 1 << 20


class _Deadline(Exception):
    """Not a TimeoutError: the HTTP stack must not mistake it for (and swallow it as) a socket timeout."""


def greedy_output(http: requests.Session, base_url: str, engine: str, model: str, prompt: str, max_tokens: int,
                  timeout_s: float = 120.0, **sampling) -> dict:
    """One greedy answer (or, with ``sampling``: ``temperature``, ``seed``, ``ignore_eos``, one seeded sample),
    within ``timeout_s`` in all (a server that trickles or never ends is cut off)."""
    path, body = greedy_request(engine, model, prompt, max_tokens, **sampling)
    try:
        with gevent.Timeout(timeout_s, _Deadline(f"no complete answer within {timeout_s:g} s")):
            answer = http.post(f"{base_url}{path}", json=body, timeout=timeout_s, stream=True)
            raw = answer.raw.read(MAX_ANSWER_BYTES + 1, decode_content=True)
            answer.close()
        if answer.status_code != 200:
            raise ValueError(f"HTTP {answer.status_code}: {raw[:200].decode('utf-8', 'replace')}")
        if len(raw) > MAX_ANSWER_BYTES:
            raise ValueError(f"answer longer than {MAX_ANSWER_BYTES} bytes")
        return greedy_answer(engine, json.loads(raw))
    except Exception as exc:  # any failure of the probe is recorded, and the run goes on
        return {"text": None, "tokens": None, "error": f"{type(exc).__name__}: {exc}"[:300]}


def greedy_outputs(base_url: str, engine: str, model: str, prompts: list[PromptItem]) -> list[dict]:
    with session() as http:
        return [{"prompt_id": item.prompt_id or str(i), "max_tokens": item.max_tokens,
                 **greedy_output(http, base_url, engine, model, item.prompt, item.max_tokens)}
                for i, item in enumerate(prompts)]

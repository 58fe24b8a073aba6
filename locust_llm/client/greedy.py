"""Greedy outputs of fixed prompts per variant, for the baseline-vs-speculative agreement check.

Under greedy decoding speculation must not change a single token; a divergence is a defect of the
server configuration. Token ids are used where the server returns them (llama.cpp ``/completion``
with ``return_tokens``, vLLM ``return_token_ids``); otherwise the text is compared.
"""

from __future__ import annotations

from ..workload import PromptItem
from .engines import greedy_answer, greedy_request
from .http import requests, session

__all__ = ["greedy_output", "greedy_outputs"]


def greedy_output(http: requests.Session, base_url: str, engine: str, model: str, prompt: str, max_tokens: int,
                  timeout_s: float = 120.0) -> dict:
    path, body = greedy_request(engine, model, prompt, max_tokens)
    try:
        answer = http.post(f"{base_url}{path}", json=body, timeout=timeout_s)
        answer.raise_for_status()
        return greedy_answer(engine, answer.json())
    except (requests.RequestException, ValueError) as exc:
        return {"text": None, "tokens": None, "error": f"{type(exc).__name__}: {exc}"[:300]}


def greedy_outputs(base_url: str, engine: str, model: str, prompts: list[PromptItem]) -> list[dict]:
    with session() as http:
        return [{"prompt_id": item.prompt_id or str(i), "max_tokens": item.max_tokens,
                 **greedy_output(http, base_url, engine, model, item.prompt, item.max_tokens)}
                for i, item in enumerate(prompts)]

"""Greedy outputs of fixed prompts per variant, for the baseline-vs-speculative agreement check.

Under greedy decoding speculation must not change a single token; a divergence is a defect of the
server configuration. Token ids are used where the server returns them (llama.cpp ``/completion``
with ``return_tokens``, vLLM ``return_token_ids``); otherwise the text is compared.
"""

from __future__ import annotations

import locust  # noqa: F401  (gevent must patch sockets before requests is imported)
import requests

from .workload import PromptItem


def greedy_output(base_url: str, engine: str, model: str, prompt: str, max_tokens: int,
                  timeout_s: float = 120.0) -> dict:
    try:
        if engine == "llamacpp":
            body = {"prompt": prompt, "n_predict": max_tokens, "temperature": 0, "return_tokens": True,
                    "ignore_eos": True, "cache_prompt": False}
            answer = requests.post(f"{base_url}/completion", json=body, timeout=timeout_s)
            answer.raise_for_status()
            data = answer.json()
            return {"text": data.get("content", ""), "tokens": data.get("tokens")}
        body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "return_token_ids": True}
        if model:
            body["model"] = model
        if engine in ("vllm", "sglang"):
            body["ignore_eos"] = True
        answer = requests.post(f"{base_url}/v1/completions", json=body, timeout=timeout_s)
        answer.raise_for_status()
        choice = (answer.json().get("choices") or [{}])[0]
        return {"text": choice.get("text", ""), "tokens": choice.get("token_ids")}
    except (requests.RequestException, ValueError) as exc:
        return {"text": None, "tokens": None, "error": f"{type(exc).__name__}: {exc}"[:300]}


def greedy_outputs(base_url: str, engine: str, model: str, prompts: list[PromptItem]) -> list[dict]:
    return [{"prompt_id": item.prompt_id or str(i), "max_tokens": item.max_tokens,
             **greedy_output(base_url, engine, model, item.prompt, item.max_tokens)}
            for i, item in enumerate(prompts)]

"""What a stream's final usage says beyond the token counts. Pure.

Today one thing: how many prompt tokens the server served from its prompt cache, where it says so (OpenAI's
``usage.prompt_tokens_details.cached_tokens``, which vLLM and SGLang send when enabled; llama.cpp's
``timings.cache_n``). ``seen_in`` tells the ledger (``client.ledger``) that a server reports it; the values
themselves are the prompt cache's business.
"""

from __future__ import annotations

__all__ = ["CACHED_PROMPT_TOKENS", "cached_prompt_tokens", "seen_in"]

CACHED_PROMPT_TOKENS = "cached_prompt_tokens"
FINAL_EVENTS = 2  # the usage and timings come with the last event or the one before [DONE]


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def cached_prompt_tokens(data: dict) -> int | None:
    """Prompt tokens this event says came from the server's cache; None when it does not say."""
    usage = data.get("usage")
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    if isinstance(details, dict) and _count(details.get("cached_tokens")) is not None:
        return details["cached_tokens"]
    timings = data.get("timings")
    return _count(timings.get("cache_n")) if isinstance(timings, dict) else None


def seen_in(datas: list[dict]) -> list[str]:
    """What the last events of a stream show about the server (``CACHED_PROMPT_TOKENS`` when they report it)."""
    tail = datas[-FINAL_EVENTS:]
    return [CACHED_PROMPT_TOKENS] if any(cached_prompt_tokens(d) is not None for d in tail) else []

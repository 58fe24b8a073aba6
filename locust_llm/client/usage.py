"""What a stream's final usage says beyond the token counts. Pure.

Today one thing: whether the server says how many prompt tokens it served from its prompt cache (OpenAI's
``usage.prompt_tokens_details.cached_tokens``, which vLLM and SGLang send when enabled; llama.cpp's
``timings.cache_n``, read by ``accounting.cached_tokens``). ``seen_in`` tells the ledger (``client.ledger``) that a
server reports it; the values themselves are each record's ``cached_tokens``.
"""

from __future__ import annotations

from .accounting import Event, Malformed, cached_tokens

__all__ = ["CACHED_PROMPT_TOKENS", "seen_in"]

CACHED_PROMPT_TOKENS = "cached_prompt_tokens"
FINAL_EVENTS = 2  # the usage and timings come with the last event or the one before [DONE]


def seen_in(events: list[Event]) -> list[str]:
    """What the last events of a stream show about the server (``CACHED_PROMPT_TOKENS`` when they say it)."""
    try:
        said = cached_tokens(events[-FINAL_EVENTS:], done=False) is not None
    except Malformed:  # a bad value is the record's malformed_event, not a report
        said = False
    return [CACHED_PROMPT_TOKENS] if said else []

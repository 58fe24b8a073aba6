"""``--goodput ttft:500 tpot:50 e2el:3000`` (vLLM's ``vllm bench serve --goodput`` spelling) -> the scenario's ``slo``
section: a request is good when it succeeded and met every limit given, in milliseconds."""

from __future__ import annotations

import math

from ..scenario import ScenarioError, SloSpec

__all__ = ["GOODPUT_KEYS", "goodput_slo"]

# vLLM's names (and ours for the time to the first answer token) -> SloSpec's fields.
GOODPUT_KEYS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2el": "e2e_ms", "ttfot": "ttfot_ms"}


def goodput_slo(words: str | list[str]) -> SloSpec:
    """The SLOs ``words`` name (a list of ``KEY:MS``, or one string of them separated by spaces or commas)."""
    text = " ".join(words) if isinstance(words, list) else words
    limits: dict[str, float] = {}
    for entry in text.replace(",", " ").split():
        key, colon, value = entry.partition(":")
        if key not in GOODPUT_KEYS or not colon:
            raise ScenarioError(
                f"--goodput {entry!r}: give KEY:MS with KEY one of {', '.join(GOODPUT_KEYS)} (e.g. 'ttft:500 tpot:50')"
            )
        try:
            limit = float(value)
        except ValueError:
            limit = math.nan
        if not math.isfinite(limit) or limit <= 0:
            raise ScenarioError(f"--goodput {entry!r}: the limit must be a number of milliseconds > 0")
        if GOODPUT_KEYS[key] in limits:
            raise ScenarioError(f"--goodput names {key!r} twice")
        limits[GOODPUT_KEYS[key]] = limit
    return SloSpec(**limits)

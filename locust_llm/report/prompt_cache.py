"""The prompt cache in the report: the section with every step's cached share (both sources), the intended share of
a shared-prefix run, TTFT of cached and cold requests apart, the flags; and the short cell shown beside every TTFT.
From the ``RunView`` alone; a run recorded before the cache was measured says "not measured".
"""

from __future__ import annotations

from ..analysis.documents.summary import StepFigures
from ..fmt import lvl, num, pct
from .view import RunView

__all__ = ["NOT_MEASURED_TEXT", "cache_cell", "cache_section", "cache_warnings", "mode_text"]

NOT_MEASURED_TEXT = "prompt cache: not measured"
MODES = {
    "cold": "cold: every prompt starts with a unique marker of {marker} tokens (load.unique_prefix), so no request "
    "repeats a prompt its server has seen in the run",
    "replayed": "replayed: the pool's prompts are sent again and again (load.unique_prefix: false); the prompt cache "
    "serves the repeats, so TTFT mixes prefill and cache hits",
    "shared": "shared prefixes: every prompt starts with one of {groups} shared prefixes of {tokens} tokens (primed "
    "before each step), then a unique marker of {marker} tokens and its own text",
}


ACROSS_RUNS = {
    "unique": "; the markers carry a nonce of this run's own, so no earlier run sent these prompts",
    "repeated": "; the same bytes as every other run with this seed (load.same_prompts_every_run, or a release "
    "without per-run markers): a server's cache from an earlier run can serve them",
}


def mode_text(view: RunView) -> str | None:
    """The run's prompt-cache mode in words (None for a run that recorded none of it)."""
    workload = view.workload
    mode = workload.prompt_cache
    if mode is None:
        return None
    shared = workload.shared_prefix or {}
    marker = "?" if workload.unique_prefix_tokens is None else workload.unique_prefix_tokens
    text = MODES.get(mode, mode).format(marker=marker, groups=shared.get("groups"), tokens=shared.get("tokens"))
    text += "; each request also has a cache_salt of its own" if workload.cache_salt else ""
    if mode in ("cold", "shared"):
        text += ACROSS_RUNS.get(workload.across_runs or "", ACROSS_RUNS["repeated"])
    return text


def cache_cell(step: StepFigures) -> dict:
    """What the ladder table shows beside a step's TTFT: the cached share, its source, and the flag."""
    cache = step.prompt_cache
    if cache is None or cache.cached_fraction is None:
        why = NOT_MEASURED_TEXT + (f"; {cache.flag}" if cache and cache.flag else "")
        return {"value": None, "why": why, "flag": cache.flag if cache else None}
    return {"value": pct(cache.cached_fraction), "why": f"from the {cache.source}", "flag": cache.flag}


def _split(split) -> str | None:
    return f"{num(split.p50)} (n={split.n})" if split is not None and split.n else None


def cache_section(view: RunView) -> dict:
    rows = []
    for name in view.names:
        for s in view.steps_of(name):
            cache = s.prompt_cache
            if cache is None:
                continue
            requests, server = cache.requests, cache.server
            rows.append(
                {
                    "variant": name,
                    "level": lvl(s.level),
                    "step": s.step,
                    "requests": pct(requests.cached_fraction) if requests else None,
                    "reporting": f"{cache.requests_reporting} of {s.requests}",
                    "server": pct(server.cached_fraction) if server else None,
                    "server_why": server.source if server else "no prompt-cache counters in the telemetry",
                    "intended": pct(cache.intended_fraction),
                    "cached_requests": cache.cached_requests,
                    "repeated": cache.repeated_prompts,
                    "ttft_cached": _split(cache.ttft_cached_ms),
                    "ttft_cold": _split(cache.ttft_cold_ms),
                    "flag": cache.flag,
                }
            )
    measured = any(r["requests"] or r["server"] for r in rows)
    return {
        "mode": mode_text(view),
        "shared": any(r["intended"] for r in rows),
        "rows": rows,
        "measured": measured,
        "note": None
        if measured
        else NOT_MEASURED_TEXT
        + ": no response said how many prompt tokens were cached and the telemetry holds no cache counters"
        + (" (a run recorded before they were)" if not rows or all(r["repeated"] is None for r in rows) else ""),
        "conditions": view.conditions_line(),
    }


def cache_warnings(view: RunView) -> list[str]:
    """The headline's warning for steps whose TTFT may be prompt-cache hits (one line, every such step)."""
    flagged = [
        f"{view.where(name, s)} ({s.prompt_cache.flag})"
        for name in view.names
        for s in view.steps_of(name)
        if s.prompt_cache is not None and s.prompt_cache.flag
    ]
    if not flagged:
        return []
    more = f"; and {len(flagged) - 4} more" if len(flagged) > 4 else ""
    return [
        f"{len(flagged)} step(s) whose TTFT may be prompt-cache hits, not prefill: " + "; ".join(flagged[:4]) + more
    ]

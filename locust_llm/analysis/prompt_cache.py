"""The prompt cache in each step (``StepFigures.prompt_cache``) and at each compared level: how much of the prompts
the server took from its cache, measured two ways, and the flags that keep a cache hit from passing for prefill. Pure.

* **From the requests**: the server's own count per request (``cached_tokens``: llama.cpp ``timings.cache_n``,
  OpenAI ``usage.prompt_tokens_details.cached_tokens``), summed over the steady window's successful requests that
  reported it, over their prompt tokens.
* **From the server's counters** over the steady window (``server_metrics``; ``server_cache``): llama.cpp
  Δ``prompt_tokens_cached`` / (Δ``prompt_tokens`` + Δ``prompt_tokens_cached``) (its ``prompt_tokens`` are the
  computed ones), vLLM Δ``prefix_cache_hits`` / Δ``prefix_cache_queries``, SGLang Δ``cached_tokens`` /
  Δ``prompt_tokens``. Both are kept when both exist; the step's ``cached_fraction`` is the requests' figure when a
  request reported one, else the counters'.
* **Repeated prompts** (``repeated_prompts``): steady requests whose exact prompt text their server had been sent
  earlier in the run (warm-up included), from the ``prompt_hash`` column; a count that needs no server report.

A step of a cold run (``load.prompt_cache`` cold: unique prompts) with more than ``CACHED_SHARE`` of its prompt
tokens cached is flagged, as is every step of a run that replayed its prompts; a compared level whose variants'
cached fractions differ by more than ``LEVEL_GAP`` (or with a flagged step on either side) carries the flag on its
latency speed-ups. Runs recorded before any of this say "not measured".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..rundir.env import RunEnv, WorkloadEnv
from .stats import summarize

__all__ = [
    "CACHED_SHARE",
    "LEVEL_GAP",
    "across_runs",
    "cache_mode",
    "finish_prompt_cache",
    "level_caches",
    "pooled_fraction",
    "repeated_prompts",
    "request_cache",
]

CACHED_SHARE = 0.05  # a cold step with more of its prompt tokens cached is flagged; a request with more is "cached"
LEVEL_GAP = 0.10  # variants of one level whose cached fractions differ by more are not compared on equal terms
N_BOOT = 200
REQUESTS_SOURCE = "requests: usage.prompt_tokens_details.cached_tokens or timings.cache_n / usage.prompt_tokens"


def across_runs(env: RunEnv) -> str:
    """Whether the run's prompts were its own (``unique``) or the bytes of every run (``repeated``: opted in, or
    recorded before per-run markers)."""
    workload = env.workload or WorkloadEnv()
    return workload.across_runs or "repeated"


def cache_mode(env: RunEnv) -> str:
    """The run's prompt-cache mode: a conversation's history and a trace's shared blocks are hits on purpose; else
    the workload's own word, else the scenario's switches (runs recorded before the unique prefix was on by default
    have ``unique_prefix: false``: they replayed their prompts)."""
    workload = env.workload or WorkloadEnv()
    if workload.conversation:
        return "conversation"
    if workload.trace is not None and workload.trace.shared_blocks:
        return "trace"
    mode = workload.prompt_cache
    if mode:
        return str(mode)
    load = env.recorded_load
    if load.shared_prefix:
        return "shared"
    if "unique_prefix" not in load.model_fields_set:
        return "unknown"  # a run directory that does not say (written by hand, or by a tool of our own)
    return "cold" if load.unique_prefix else "replayed"


def repeated_prompts(frame: pd.DataFrame) -> pd.Series | None:
    """Per request (index of ``frame``, one variant's requests): whether a request sent earlier in the run to the same
    server carried the same prompt. None when the run did not record prompt fingerprints."""
    if "prompt_hash" not in frame or not frame["prompt_hash"].notna().any():
        return None
    sent = frame[frame["t_send"].notna() & frame["prompt_hash"].notna()].sort_values("t_send", kind="stable")
    keys = [c for c in ("server", "prompt_hash") if c in sent]
    return sent.duplicated(subset=keys, keep="first").reindex(frame.index, fill_value=False)


def _figure(cached: float, prompt: float, source: str, reporting: int | None = None) -> dict | None:
    if not prompt > 0:
        return None
    out = {"cached_fraction": cached / prompt, "cached_tokens": cached, "prompt_tokens": prompt, "source": source}
    if reporting is not None:
        out["requests_reporting"] = reporting
    return out


def _split(values: pd.Series) -> dict | None:
    figures = summarize(values.to_numpy(dtype=float), n_boot=N_BOOT)
    return {k: figures[k] for k in ("p50", "p95", "mean", "n")} if figures["n"] else None


def request_cache(
    sent: pd.DataFrame,
    ttft: pd.Series,
    mode: str,
    repeated: pd.Series | None,
    shared_tokens: int,
    across_runs: str | None = None,
) -> dict:
    """A step's prompt cache from its steady requests (``sent``) and their TTFT (the mode's headline, NaN for
    failures); ``finish_prompt_cache`` adds the server's counters and the verdict."""
    ok = sent["error_class"].isna()
    prompt = sent["prompt_tokens"].astype(float).where(lambda p: p > 0)
    cached = sent["cached_tokens"].astype(float) if "cached_tokens" in sent else pd.Series(np.nan, index=sent.index)
    reporting = ok & cached.notna() & prompt.notna()
    out: dict = {"mode": mode, "across_runs": across_runs, "requests_reporting": int(reporting.sum())}
    if reporting.any():
        out["requests"] = _figure(
            float(cached[reporting].sum()), float(prompt[reporting].sum()), REQUESTS_SOURCE, int(reporting.sum())
        )
        hit = reporting & (cached > CACHED_SHARE * prompt)
        out["cached_requests"] = int(hit.sum())
        out["ttft_cached_ms"] = _split(ttft[hit])
        out["ttft_cold_ms"] = _split(ttft[reporting & ~hit])
    if repeated is not None:
        out["repeated_prompts"] = int(repeated.reindex(sent.index, fill_value=False).sum())
    if mode == "shared" and shared_tokens and prompt[ok].notna().any():
        out["intended_fraction"] = shared_tokens * int(prompt[ok].notna().sum()) / float(prompt[ok].sum())
    return out


def finish_prompt_cache(cache: dict, server: dict | None) -> dict:
    """The step's headline figure (the requests' when they reported, else the server's counters) and its flag."""
    cache["server"] = server
    chosen = cache.get("requests") or server
    if chosen is not None:
        cache["cached_fraction"] = chosen["cached_fraction"]
        cache["source"] = "requests" if cache.get("requests") else "server"
    fraction, mode = cache.get("cached_fraction"), cache["mode"]
    share = f"{100 * fraction:.1f}% of the prompt tokens came from the server's cache" if fraction is not None else ""
    if mode == "replayed":
        repeated = cache.get("repeated_prompts")
        said = [f"{repeated} requests repeated a prompt their server had been sent"] if repeated else []
        said += [share] if share else ["the prompt cache was not measured"]
        if repeated or fraction is None or fraction > CACHED_SHARE:
            cache["flag"] = "prompts replayed (load.unique_prefix: false): " + "; ".join(said)
    elif mode == "cold" and fraction is not None and fraction > CACHED_SHARE:
        if cache.get("across_runs") == "unique":
            cause = (
                "although every prompt was unique to this run: the cache served a beginning they share (a chat "
                "template's header, a system prompt)"
            )
        else:
            cause = (
                "although no prompt repeated within the run: an earlier run sent these same prompts (the same seed, "
                "no per-run marker: load.same_prompts_every_run or an older release) and the server still caches them"
            )
        cache["flag"] = f"{share} {cause}: TTFT here is partly cache hits, not prefill"
    return cache


def pooled_fraction(steps: list[dict]) -> float | None:
    """The cached share of several steps' prompt tokens together (each step's headline source)."""
    figures = [f for s in steps for f in [_chosen(s)] if f is not None]
    prompt = sum(f["prompt_tokens"] for f in figures)
    return sum(f["cached_tokens"] for f in figures) / prompt if prompt > 0 else None


def _chosen(step: dict) -> dict | None:
    cache = step.get("prompt_cache") or {}
    return cache.get("requests") or cache.get("server")


def level_caches(comparisons: list[dict], variants: dict[str, dict]) -> None:
    """Each compared level's ``prompt_cache``: both sides' cached fractions (their steps at the level pooled) and the
    flag its latency speed-ups carry."""
    for comp in comparisons:
        for level in comp["steps"]:
            sides = {
                name: [s for s in variants[name]["steps"] if s.get("context") is None and s["level"] == level["level"]]
                for name in (comp["baseline"], comp["variant"])
            }
            base, var = (pooled_fraction(steps) for steps in sides.values())
            entry: dict = {"baseline": base, "variant": var}
            reasons = []
            if base is not None and var is not None:
                entry["difference"] = var - base
                if abs(var - base) > LEVEL_GAP:
                    reasons.append(
                        f"cached prompt share {100 * base:.0f}% ({comp['baseline']}) vs {100 * var:.0f}% "
                        f"({comp['variant']}): the latency speed-ups compare different cache hits"
                    )
            flagged = [
                f"{name}: {s['prompt_cache']['flag']}"
                for name, steps in sides.items()
                for s in steps
                if (s.get("prompt_cache") or {}).get("flag")
            ]
            if flagged:
                reasons.append(flagged[0])
            entry["flag"] = "; ".join(reasons) or None
            level["prompt_cache"] = entry

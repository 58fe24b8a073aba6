"""Reasoning streams per request and per step: time to first output token, reasoning and answer tokens, the
decode speed over each part, and the requests that thought without answering. Pure.

Per request (docs/experiments.md, "Reasoning streams"):

* TTFOT = ``t_first_output - t_send`` (open loop also from ``t_intended``): the first answer token, after any
  reasoning; TTFT stays the first token of any kind. Over all requests (``ttfot_all_ms``, what the TTFOT gate
  reads) a request that gave no answer counts at the time it ended, like a failure: thinking until ``max_tokens``
  ran out is a wait with no answer, never left out of the percentiles;
* reasoning tokens (``reasoning_tokens``) and answer tokens (the rest of the output);
* decode tok/s over the reasoning, ``(reasoning - 1) / (last reasoning chunk - t_first)``, and over the answer,
  ``(answer - 1) / (t_end - t_first_output)``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .comparison import request_speedup
from .metrics import Chunks
from .samples import LevelSamples
from .stats import finite, percentile_stat, summarize

__all__ = ["add_reasoning_speedups", "reasoning_metrics", "step_reasoning"]

N_BOOT = 1000


def reasoning_metrics(
    frame: pd.DataFrame, chunks: Chunks, ok_rows: pd.Index, first_token_timeout_s: float
) -> pd.DataFrame:
    """One row per request of ``frame``: TTFOT in its forms, the token split and the speeds over each part.
    ``chunks`` are the chunks of the successful requests ``ok_rows`` (in that order)."""
    ok = frame["error_class"].isna()
    t_send, t_intended = frame["t_send"], frame["t_intended"]
    t_first, t_end = frame["t_first"], frame["t_end"]
    # runs recorded before reasoning was read: the first token was the answer's, and nothing was reasoning
    t_output = frame.get("t_first_output", t_first).astype(float)
    t_done = frame.get("t_done", t_end).fillna(t_end)
    n = frame["output_tokens"].astype(float)
    reasoning = frame.get("reasoning_tokens", pd.Series(0.0, index=frame.index)).astype(float).fillna(0.0)
    answer = n - reasoning
    out = pd.DataFrame(index=frame.index)
    answered = t_output.notna()
    out["ttfot_ms"] = ((t_output - t_send) * 1000).where(ok)
    out["ttfot_sched_ms"] = ((t_output - t_intended) * 1000).where(ok)
    waited = ((t_output.where(answered, t_done)) - t_send) * 1000
    out["ttfot_all_ms"] = waited.where(t_send.notna(), first_token_timeout_s * 1000)
    out["ttfot_sched_all_ms"] = out["ttfot_all_ms"] + (t_send - t_intended).fillna(0.0) * 1000
    out["reasoning_tokens"] = reasoning.where(ok)
    out["answer_tokens"] = answer.where(ok)
    out["no_answer"] = (ok & (reasoning > 0) & ~answered).astype(float).where(ok)
    out["reasoning_tps"] = _reasoning_speed(frame, chunks, ok_rows, reasoning, t_output)
    answer_s = t_end - t_output
    out["answer_tps"] = ((answer - 1) / answer_s).where(ok & (answer >= 2) & (answer_s > 0))
    return out


def _reasoning_speed(
    frame: pd.DataFrame, chunks: Chunks, ok_rows: pd.Index, reasoning: pd.Series, t_output: pd.Series
) -> pd.Series:
    """``(reasoning - 1) / (last reasoning chunk - first chunk)``: the reasoning chunks are those before the first
    answer chunk (every chunk of a request that gave no answer). The first answer chunk is the one stamped nearest
    to ``t_first_output`` (the lists keep offsets as float32, and epoch times carry a quarter of a microsecond of
    rounding, so an exact match cannot be relied on), the first of chunks that share that stamp."""
    speed = pd.Series(np.nan, index=frame.index)
    rows = frame.loc[ok_rows]
    # Only requests with 2 reasoning tokens or more have a speed: a run without any skips the chunk arrays (a
    # quarter of the analysis of 500,000 requests of 256 tokens).
    if not len(rows) or not chunks.request.size or not (reasoning.loc[ok_rows] >= 2).any():
        return speed
    n = len(rows)
    target = (t_output.loc[ok_rows] - rows["t_send"]).to_numpy(dtype=float)
    distance = np.abs(chunks.offset.astype(float) - target[chunks.request])  # NaN: no answer
    nearest = np.full(n, np.inf)
    answered = ~np.isnan(distance)
    np.minimum.at(nearest, chunks.request[answered], distance[answered])
    index = np.arange(chunks.request.size)
    first = np.full(n, chunks.request.size)  # no answer: past the last chunk
    hit = answered & (distance <= nearest[chunks.request])
    np.minimum.at(first, chunks.request[hit], index[hit])
    before = index < first[chunks.request]
    last = np.full(n, -np.inf)
    np.maximum.at(last, chunks.request[before], chunks.offset[before].astype(float))
    span = last - (rows["t_first"] - rows["t_send"]).to_numpy(dtype=float)
    thought = reasoning.loc[ok_rows].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        speed.loc[ok_rows] = np.where((thought >= 2) & (span > 0), (thought - 1) / span, np.nan)
    return speed


def step_reasoning(derived: pd.DataFrame) -> dict | None:
    """A step's reasoning figures over its successful requests, or None when no request reasoned."""
    ok = derived["reasoning_tokens"].notna()
    thought = ok & (derived["reasoning_tokens"] > 0)
    if not thought.any():
        return None
    rows = derived[thought]
    reasoning = derived.loc[ok, "reasoning_tokens"].sum()
    output = reasoning + derived.loc[ok, "answer_tokens"].sum()
    no_answer = int(rows["no_answer"].sum())
    return {
        "requests": int(ok.sum()),
        "reasoning_requests": int(thought.sum()),
        "no_answer": no_answer,
        "no_answer_share": no_answer / int(ok.sum()),
        "reasoning_share": float(reasoning / output) if output else None,
        "reasoning_tokens": summarize(rows["reasoning_tokens"].to_numpy(dtype=float), n_boot=N_BOOT),
        "answer_tokens": summarize(rows["answer_tokens"].to_numpy(dtype=float), n_boot=N_BOOT),
        "reasoning_tps": summarize(rows["reasoning_tps"].to_numpy(dtype=float), n_boot=N_BOOT),
        "answer_tps": summarize(rows["answer_tps"].to_numpy(dtype=float), n_boot=N_BOOT),
    }


def add_reasoning_speedups(
    comparisons: list[dict], samples: dict[str, dict[float, LevelSamples]], modes: dict[str, str]
) -> None:
    """TTFOT P50 and P95 speed-ups (paired; open loop from the intended send) on every judged level where a request
    of either side reasoned."""
    for comp in comparisons:
        column = "ttfot_sched_ms" if modes.get(comp["variant"]) == "open" else "ttfot_ms"
        base, other = samples.get(comp["baseline"], {}), samples.get(comp["variant"], {})
        for seed, step in enumerate(comp["steps"]):
            level = step["level"]
            if step["status"] not in ("clean", "inconclusive") or level not in base or level not in other:
                continue
            b, v = base[level], other[level]
            if not any((finite(side.values("reasoning_tokens")) > 0).any() for side in (b, v)):
                continue
            step["ttfot_p50_speedup"] = request_speedup(v, b, column, percentile_stat(50), False, seed)
            step["ttfot_p95_speedup"] = request_speedup(v, b, column, percentile_stat(95), False, seed)

"""A run as ``vllm bench serve --save-result`` files: one JSON per variant and level, with the field names and meanings
of vLLM's writer (vllm/benchmarks/serve.py, ``main_async`` and ``benchmark``), so dashboards and ``vllm bench sweep
plot`` that read those files read ours. Pure: from the run directory only.

What each field holds, in vLLM's definitions (docs/vllm.md has the table): the requests are those sent in the level's
steady windows (its repeats pooled), ``duration`` the sum of those windows; TTFT, TPOT and E2EL run from the actual
send (vLLM's; our open-loop headline, TTFT_sched, runs from the intended time and is not in these files); ITL is the
gap between streamed chunks (our ICL, not our per-token ITL); ``request_goodput`` counts vLLM's way (TTFT and E2EL
from the send, TPOT 0 for a one-token answer). ``max_output_tokens_per_s`` counts the tokens each chunk carries
(vLLM's own counts one per chunk, which under speculative decoding undercounts). Percentiles: 50, 90, 95, 99 (vLLM's
``--metric-percentiles 50,90,95,99``). A figure with no request behind it is null, never 0.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.metrics import Chunks, request_metrics
from ..analysis.summary import good_requests
from ..rundir import RunData, write_json

__all__ = ["PERCENTILES", "bench_results", "write_bench_results"]

PERCENTILES = (50, 90, 95, 99)
METRICS = ("ttft", "tpot", "itl", "e2el")


def _stats(name: str, values_s: np.ndarray) -> dict[str, float | None]:
    """vLLM's ``mean_/median_/std_/pNN_<name>_ms`` of values in seconds (numpy's population std and linear
    percentiles, as vLLM computes them); null when there is none."""
    values = values_s[np.isfinite(values_s)] * 1000.0
    empty = values.size == 0
    out: dict[str, float | None] = {
        f"mean_{name}_ms": None if empty else float(np.mean(values)),
        f"median_{name}_ms": None if empty else float(np.median(values)),
        f"std_{name}_ms": None if empty else float(np.std(values)),
    }
    for p in PERCENTILES:
        out[f"p{p}_{name}_ms"] = None if empty else float(np.percentile(values, p))
    return out


def _peaks(rows: pd.DataFrame, chunks: Chunks) -> tuple[float, int]:
    """vLLM's ``max_output_tokens_per_s`` and ``max_concurrent_requests``: one-second buckets from the first send,
    tokens by the second they arrived in, requests by every second they were active in."""
    if not len(rows):
        return 0.0, 0
    sends = rows["t_send"].to_numpy(dtype=float)
    start = float(sends.min())
    ends = (rows["t_end"].to_numpy(dtype=float) - start).astype(int)
    seconds = int(math.ceil(float(rows["t_end"].max()) - start)) + 1
    tokens = np.bincount((chunks.arrivals(sends) - start).astype(int), weights=chunks.tokens, minlength=seconds)
    active = np.zeros(seconds + 1)
    np.add.at(active, (sends - start).astype(int), 1)
    np.add.at(active, ends + 1, -1)
    return float(tokens.max()), int(np.cumsum(active)[:seconds].max())


def _level_result(run: RunData, variant: str, level: float, steps: list) -> dict[str, Any]:
    env, load = run.env, run.env.recorded_load
    frame = run.requests
    sent = frame[
        frame["variant"].eq(variant) & frame["step"].isin([s.step for s in steps]) & frame["phase"].eq("steady")
    ]
    duration = float(sum(s.t_end - s.t_steady for s in steps))
    ok = sent["error_class"].isna()
    done = sent[ok]
    chunks = Chunks.of(done, run.lists)
    derived = request_metrics(done)
    gaps, _ = chunks.gaps()
    slo = env.recorded_scenario.slo or {}
    # vLLM's goodput: TTFT and E2EL from the send (our closed-loop keys), whatever the mode.
    good = int(good_requests(done, derived, slo, "closed").sum()) if any(v is not None for v in slo.values()) else None
    model = env.server(variant).served_model or env.server(variant).model or ""
    open_loop = steps[0].mode == "open"
    total_input, total_output = int(done["prompt_tokens"].clip(lower=0).sum()), int(done["output_tokens"].sum())
    peak_tokens, peak_requests = _peaks(done, chunks)
    result: dict[str, Any] = {
        "date": datetime.fromtimestamp(min(s.t_start for s in steps), timezone.utc).strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": "openai-chat" if load.api == "chat" else "openai",
        "backend": "openai-chat" if load.api == "chat" else "openai",
        "label": variant,
        "model_id": model,
        "tokenizer_id": load.tokenizer if load.tokenizer not in (None, "server") else model,
        "num_prompts": int(len(sent)),
        # --metadata KEY=VALUE: where the figures come from.
        "locust_llm_run_id": str(env.run_id or ""),
        "locust_llm_variant": variant,
        "locust_llm_level": f"{level:g}",
        "locust_llm_mode": steps[0].mode,
        "request_rate": float(level) if open_loop else "inf",
        "burstiness": float(load.burstiness or 1.0) if open_loop else 1.0,
        "max_concurrency": int(load.max_inflight or 0) if open_loop else int(level),
        "duration": duration,
        "completed": int(ok.sum()),
        "failed": int((~ok).sum()),
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
        "request_throughput": int(ok.sum()) / duration if duration else None,
        "request_goodput": good / duration if good is not None and duration else None,
        "output_throughput": total_output / duration if duration else None,
        "total_token_throughput": (total_input + total_output) / duration if duration else None,
        "max_output_tokens_per_s": peak_tokens,
        "max_concurrent_requests": peak_requests,
    }
    done_ttft = (done["t_first"] - done["t_send"]).to_numpy(dtype=float)
    for name, values in (
        ("ttft", done_ttft),
        ("tpot", derived["tpot_ms"].to_numpy(dtype=float) / 1000.0),
        ("itl", gaps.astype(float)),
        ("e2el", (done["t_end"] - done["t_send"]).to_numpy(dtype=float)),
    ):
        result.update(_stats(name, values))
    return result


def bench_results(run: RunData) -> dict[tuple[str, float], dict[str, Any]]:
    """Per (variant, level) of the ladder (context-axis, soak and scale-out steps left out), its result document."""
    by_level: dict[tuple[str, float], list] = {}
    for step in run.steps:
        ladder = not step.context and step.window is None and step.servers is None
        if ladder and math.isfinite(step.t_steady) and step.t_end > step.t_steady:
            by_level.setdefault((step.variant, float(step.level)), []).append(step)
    return {key: _level_result(run, *key, steps) for key, steps in sorted(by_level.items())}


def write_bench_results(run: RunData, out_dir: Path) -> list[Path]:
    """The files, named as vLLM names its own (``{label}-{rate}qps[-concurrency{n}]-{model}-{date}.json``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for (variant, _), result in bench_results(run).items():
        concurrency = f"-concurrency{result['max_concurrency']}" if result["max_concurrency"] else ""
        model = re.sub(r"[^A-Za-z0-9._-]", "-", str(result["model_id"]).split("/")[-1]) or "model"
        name = f"{variant}-{result['request_rate']}qps{concurrency}-{model}-{result['date']}.json"
        write_json(out_dir / name, result)
        written.append(out_dir / name)
    return written

"""Baseline versus variant, level by level, on clean steps only: speed-ups with intervals, crossover, the
recommendation, and the levels that were not judged and why. Pure.
"""

from __future__ import annotations

import numpy as np

from ..fmt import lvl
from .rates import block_ratio_ci
from .samples import LevelSamples, paired
from .speedup import crossover_level, paired_ratio_ci, ratio_ci, recommendation
from .stats import percentile_stat

__all__ = ["HEADLINE", "HEADLINE_NAMES", "comparison", "latency_keys"]

N_BOOT = 1000
# What a comparison's crossover and recommendation rest on: in a closed loop the aggregate throughput; in an
# open loop the offered rate fixes throughput below saturation, so the latency users see from their intended
# send time (paired by arrival) decides.
HEADLINE = {"closed": "output_tps", "open": "e2e_sched_p95"}
HEADLINE_NAMES = {"output_tps": "aggregate output tok/s", "e2e_sched_p95": "E2E P95 from the intended send time"}


def latency_keys(mode: str) -> dict[str, str]:
    """The TTFT and E2E figures that are the headline (gates, goodput, knee, speed-ups) in this mode."""
    if mode == "open":
        return {"ttft": "ttft_sched_ms", "e2e": "e2e_sched_ms", "ttft_all": "ttft_sched_all_ms",
                "e2e_all": "e2e_sched_all_ms"}
    return {"ttft": "ttft_ms", "e2e": "e2e_ms", "ttft_all": "ttft_all_ms", "e2e_all": "e2e_all_ms"}


def _latency_speedup(v: LevelSamples, b: LevelSamples, column: str, statistic, higher_is_better: bool,
                     seed: int) -> dict:
    """Paired by request when the runs carry the pairing key; otherwise the two samples independently."""
    pairs = paired(v, b, column)
    if pairs is not None:
        return paired_ratio_ci(*pairs, statistic, higher_is_better, N_BOOT, seed)
    return {**ratio_ci(v.values(column), b.values(column), statistic, higher_is_better, N_BOOT, seed), "pairs": 0}


def level_comparison(level: float, b: LevelSamples, v: LevelSamples, baseline: str, variant: str, mode: str,
                     seed: int) -> dict:
    """One level: the speed-ups from the clean blocks of both sides, or why the level was not judged."""
    excluded = b.not_judged(baseline) + v.not_judged(variant)
    if not (b.clean and v.clean):
        statuses = [status for status, _ in list(b.excluded.values()) + list(v.excluded.values())]
        empty = {"value": None, "ci95": None}
        step = {"level": level, "status": statuses[0] if statuses else "insufficient", "excluded": excluded,
                "output_tps_speedup": empty, "decode_tps_speedup": empty, "tpot_p50_speedup": empty,
                "tpot_p95_speedup": empty, "ttft_p50_speedup": empty, "ttft_p95_speedup": empty}
        if mode == "open":
            step["e2e_sched_p95_speedup"] = step["goodput_speedup"] = empty
        return step
    ttft = latency_keys(mode)["ttft"]
    step = {
        "level": level, "status": "clean", "excluded": excluded,
        "output_tps_speedup": block_ratio_ci(v.token_blocks, b.token_blocks),
        "decode_tps_speedup": _latency_speedup(v, b, "decode_tps", np.mean, True, seed),
        "tpot_p50_speedup": _latency_speedup(v, b, "tpot_ms", percentile_stat(50), False, seed),
        "tpot_p95_speedup": _latency_speedup(v, b, "tpot_ms", percentile_stat(95), False, seed),
        "ttft_p50_speedup": _latency_speedup(v, b, ttft, percentile_stat(50), False, seed),
        "ttft_p95_speedup": _latency_speedup(v, b, ttft, percentile_stat(95), False, seed),
    }
    if mode == "open":
        step["e2e_sched_p95_speedup"] = _latency_speedup(v, b, "e2e_sched_all_ms", percentile_stat(95), False, seed)
        step["goodput_speedup"] = block_ratio_ci(v.good_blocks, b.good_blocks)
    if step["output_tps_speedup"].get("blocks_agree") is False:
        step["status"] = "inconclusive"
    return step


def comparison(baseline: str, variant: str, base: dict[float, LevelSamples], other: dict[float, LevelSamples],
               mode: str) -> dict:
    steps = [level_comparison(level, base[level], other[level], baseline, variant, mode, seed)
             for seed, level in enumerate(sorted(set(base) & set(other)))]
    metric = HEADLINE.get(mode, "output_tps")
    # Blocks that disagree leave the level's interval in place but never let it count as faster or slower.
    headline = [{"level": s["level"], "speedup": s[f"{metric}_speedup"] if s["status"] == "clean" else
                 {"value": s[f"{metric}_speedup"]["value"], "ci95": None}}
                for s in steps if s["status"] in ("clean", "inconclusive")]
    crossover = crossover_level(headline)
    unit = "req/s" if mode == "open" else "concurrent streams"
    sentence = recommendation(variant, baseline, headline, crossover, unit) if headline else \
        f"no verdict on {variant}: no level was measured cleanly on both sides"
    skipped = [s for s in steps if s["status"] not in ("clean", "inconclusive")]
    if skipped:
        sentence += "; not judged: " + ", ".join(f"{lvl(s['level'])} ({s['status']})" for s in skipped)
    return {"baseline": baseline, "variant": variant, "metric": metric, "metric_name": HEADLINE_NAMES[metric],
            "steps": steps, "crossover_level": crossover, "recommendation": sentence}

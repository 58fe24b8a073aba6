"""Baseline versus variant, level by level, on clean steps only: speed-ups with intervals, crossover, the
recommendation, and the levels that were not judged and why. Pure.
"""

from __future__ import annotations

import numpy as np

from ..fmt import lvl
from .cycles import block_throughput_ratio
from .rates import block_ratio_ci
from .samples import LevelSamples, not_judged, paired
from .speedup import crossover_level, paired_ratio_ci, ratio_ci, recommendation, speedup_state
from .stats import percentile_stat
from .validity import widened

__all__ = ["HEADLINE", "HEADLINE_NAMES", "comparison", "latency_keys", "open_loop_verdict", "request_speedup"]

N_BOOT = 1000
# The speed-up a comparison shows first: in a closed loop the aggregate throughput, which also decides; in an
# open loop the offered rate fixes throughput below saturation, so what users see decides (open_loop_verdict)
# and E2E P95 from the intended send time is the figure shown.
HEADLINE = {"closed": "output_tps", "open": "e2e_sched_p95"}
HEADLINE_NAMES = {"output_tps": "aggregate output tok/s", "e2e_sched_p95": "E2E P95 from the intended send time"}
# What an open-loop level's verdict rests on, in the order a reason names them.
OPEN_LOOP_BASIS = (
    ("e2e_sched_p95_speedup", "E2E_sched P95"),
    ("tpot_p50_speedup", "TPOT P50"),
    ("goodput_speedup", "goodput"),
)


def latency_keys(mode: str) -> dict[str, str]:
    """The TTFT and E2E figures that are the headline (gates, goodput, knee, speed-ups) in this mode."""
    if mode == "open":
        return {
            "ttft": "ttft_sched_ms",
            "e2e": "e2e_sched_ms",
            "ttft_all": "ttft_sched_all_ms",
            "e2e_all": "e2e_sched_all_ms",
        }
    return {"ttft": "ttft_ms", "e2e": "e2e_ms", "ttft_all": "ttft_all_ms", "e2e_all": "e2e_all_ms"}


def request_speedup(
    v: LevelSamples, b: LevelSamples, column: str, statistic, higher_is_better: bool, seed: int
) -> dict:
    """Paired by request when the runs carry the pairing key; otherwise the two samples independently."""
    pairs = paired(v, b, column)
    if pairs is not None:
        return paired_ratio_ci(*pairs, statistic, higher_is_better, N_BOOT, seed)
    return {**ratio_ci(v.values(column), b.values(column), statistic, higher_is_better, N_BOOT, seed), "pairs": 0}


def level_comparison(
    level: float, b: LevelSamples, v: LevelSamples, baseline: str, variant: str, mode: str, seed: int
) -> dict:
    """One level: the speed-ups from the clean blocks of both sides, or why the level was not judged."""
    worst, excluded = not_judged((baseline, b), (variant, v))
    if not (b.clean and v.clean):
        empty = {"value": None, "ci95": None}
        step: dict = {
            "level": level,
            "status": worst or "insufficient",
            "excluded": excluded,
            "output_tps_speedup": empty,
            "decode_tps_speedup": empty,
            "tpot_p50_speedup": empty,
            "tpot_p95_speedup": empty,
            "ttft_p50_speedup": empty,
            "ttft_p95_speedup": empty,
        }
        if mode == "open":
            step["e2e_sched_p95_speedup"] = step["goodput_speedup"] = empty
        return step
    ttft = latency_keys(mode)["ttft"]
    step = {
        "level": level,
        "status": "clean",
        "excluded": excluded,
        "output_tps_speedup": throughput_speedup(v, b),
        "decode_tps_speedup": request_speedup(v, b, "decode_tps", np.mean, True, seed),
        "tpot_p50_speedup": request_speedup(v, b, "tpot_ms", percentile_stat(50), False, seed),
        "tpot_p95_speedup": request_speedup(v, b, "tpot_ms", percentile_stat(95), False, seed),
        "ttft_p50_speedup": request_speedup(v, b, ttft, percentile_stat(50), False, seed),
        "ttft_p95_speedup": request_speedup(v, b, ttft, percentile_stat(95), False, seed),
    }
    if mode == "open":
        step["e2e_sched_p95_speedup"] = request_speedup(v, b, "e2e_sched_all_ms", percentile_stat(95), False, seed)
        step["goodput_speedup"] = block_ratio_ci(v.good_blocks, b.good_blocks)
        step["verdict"], step["verdict_basis"] = open_loop_verdict(step)
    else:
        step["verdict"], step["verdict_basis"] = speedup_state(step["output_tps_speedup"]), HEADLINE_NAMES["output_tps"]
    client_check(step, v, b, mode)
    rate = step["goodput_speedup" if mode == "open" else "output_tps_speedup"]
    planned = max(len(v.token_blocks) + len(v.excluded), len(b.token_blocks) + len(b.excluded))
    rate["pairs_planned"] = planned
    used = rate.get("blocks") or 0
    if planned > 1 and used < planned:
        step["pairs_note"] = f"{used} of {planned} pairs: period effect not balanced"
    # Blocks that disagree beyond their noise: the rate the verdict reads drifted between blocks (closed loop: output
    # tok/s; open loop: goodput, as output tok/s there is the offered rate's and says nothing of the variants).
    if rate.get("blocks_agree") is False:
        step["status"], step["verdict"] = "inconclusive", "unclear"
        step["verdict_basis"] = f"the blocks of {'goodput' if mode == 'open' else 'output tok/s'} disagree"
    return step


def throughput_speedup(v: LevelSamples, b: LevelSamples) -> dict:
    """Output tok/s, variant / baseline: over the blocks' request-cycle batches (``cycles.block_throughput_ratio``)
    when every clean block of both sides has them (runs that record users), else over the per-second bins
    (``rates.block_ratio_ci``)."""
    blocks = [*v.throughput_blocks.values(), *b.throughput_blocks.values()]
    if len(blocks) == len(v.token_blocks) + len(b.token_blocks) and all(x.method == "cycles" for x in blocks):
        return block_throughput_ratio(v.throughput_blocks, b.throughput_blocks)
    return block_ratio_ci(v.token_blocks, b.token_blocks)


def client_check(step: dict, v: LevelSamples, b: LevelSamples, mode: str) -> None:
    """Each speed-up's interval widened by how far the load generator could have moved the figure on either side
    (``client_ci95``); a level whose verdict would change within those intervals is client-invalid, any other keeps
    its verdict (docs/verdicts-and-gates.md, "Client validity")."""
    ttft = latency_keys(mode)["ttft"]
    figures = {
        "output_tps_speedup": ("output_tps", "mean", True),
        "decode_tps_speedup": ("decode_tps", "mean", True),
        "tpot_p50_speedup": ("tpot_ms", "p50", False),
        "tpot_p95_speedup": ("tpot_ms", "p95", False),
        "ttft_p50_speedup": (ttft, "p50", False),
        "ttft_p95_speedup": (ttft, "p95", False),
        "e2e_sched_p95_speedup": ("e2e_sched_all_ms", "p95", False),
        "goodput_speedup": ("goodput_rps", "mean", True),
    }
    for key, (figure, stat, higher) in figures.items():
        if key in step:
            step[key].update(widened(step[key], v.client_bound(figure, stat), b.client_bound(figure, stat), higher))
    without_client = {
        key: {"ci95": step[key].get("client_ci95") or step[key].get("ci95")} for key in figures if key in step
    }
    if mode == "open":
        verdict, _ = open_loop_verdict(without_client)
    else:
        verdict = speedup_state(without_client["output_tps_speedup"])
    if verdict != step["verdict"]:
        moved = [
            name
            for key, name in (OPEN_LOOP_BASIS if mode == "open" else (("output_tps_speedup", "output tok/s"),))
            if speedup_state({"ci95": step[key].get("ci95")}) != speedup_state(without_client[key])
        ]
        step["excluded"].append(
            f"the load generator could have moved {' and '.join(moved)} enough to change the verdict "
            f"({step['verdict']}; within the client's bounds it could be {verdict})"
        )
        step["status"], step["verdict"] = "client-invalid", None
        step["verdict_basis"] = f"not judged: the client's bounds on {' and '.join(moved)} span the verdict"


def open_loop_verdict(step: dict) -> tuple[str, str]:
    """An open-loop level's verdict, and why in words: ``better`` when the paired E2E_sched P95 and TPOT P50
    speed-ups are both clearly above 1 and goodput is not clearly worse; ``worse`` when goodput is clearly worse, or
    a latency clearly worse and neither clearly better; otherwise ``unclear``."""
    states = {name: speedup_state(step.get(key) or {}) for key, name in OPEN_LOOP_BASIS}
    better = [name for name, state in states.items() if state == "better"]
    worse = [name for name, state in states.items() if state == "worse"]
    if states["E2E_sched P95"] == states["TPOT P50"] == "better" and states["goodput"] != "worse":
        return "better", "E2E_sched P95 and TPOT P50 clearly better, goodput not clearly worse"
    # Fewer requests served within their SLOs is worse whatever the latency of the rest (failures count).
    if "goodput" in worse or (worse and not better):
        though = f", though {' and '.join(better)} better" if better else ""
        return "worse", " and ".join(worse) + " clearly worse" + though
    if worse:
        return "unclear", f"mixed: {' and '.join(better)} clearly better, {' and '.join(worse)} clearly worse"
    return "unclear", ("only " + " and ".join(better) + " clearly better") if better else "no clear difference"


def _headline(step: dict, metric: str) -> dict:
    """A level as the crossover and recommendation read it: its verdict, and the speed-up that shows it (open loop,
    slower: the first figure clearly worse, named when it is not the headline)."""
    key, basis = f"{metric}_speedup", None
    if step["verdict"] == "worse" and metric != "output_tps":
        key, basis = next((k, name) for k, name in OPEN_LOOP_BASIS if speedup_state(step.get(k) or {}) == "worse")
    ratio = step[key] if step["status"] == "clean" else {"value": step[key]["value"], "ci95": None}
    return {
        "level": step["level"],
        "speedup": ratio,
        "state": step["verdict"],
        "basis": basis if key != f"{metric}_speedup" else None,
    }


def comparison(
    baseline: str, variant: str, base: dict[float, LevelSamples], other: dict[float, LevelSamples], mode: str
) -> dict:
    steps = [
        level_comparison(level, base[level], other[level], baseline, variant, mode, seed)
        for seed, level in enumerate(sorted(set(base) & set(other)))
    ]
    metric = HEADLINE.get(mode, "output_tps")
    headline = [_headline(s, metric) for s in steps if s["status"] in ("clean", "inconclusive")]
    crossover = crossover_level(headline)
    unit = "req/s" if mode == "open" else "concurrent streams"
    sentence = (
        recommendation(variant, baseline, headline, crossover, unit)
        if headline
        else f"no verdict on {variant}: no level was measured cleanly on both sides"
    )
    skipped = [s for s in steps if s["status"] not in ("clean", "inconclusive")]
    if skipped:
        sentence += "; not judged: " + ", ".join(f"{lvl(s['level'])} ({s['status']})" for s in skipped)
    return {
        "baseline": baseline,
        "variant": variant,
        "metric": metric,
        "metric_name": HEADLINE_NAMES[metric],
        "steps": steps,
        "crossover_level": crossover,
        "recommendation": sentence,
    }

"""Scale-out steps -> how goodput grows from one server to N: the slope with its interval, the scaling efficiency,
the spread of the requests over the servers. Pure.

The run measured, per variant, ``pairs`` pairs of steps in ABBA order: one server at ``level`` and N servers at
N x ``level`` (``runtime.scale_out``). Each step's figures are an ordinary step's (``summary.step_summary``); only
clean steps count. The slope is N servers' goodput over one server's, pair ``r`` of one side against pair ``r`` of
the other (``rates.block_ratio_ci``: per-second bins, AR(1)-aware, pairs pooled with random effects), so drift of a
shared machine between pairs widens the interval instead of moving the answer. The efficiency is slope / N.

Scaling is ``linear`` when the slope's CI reaches N, ``sub-linear`` when it lies between 1 and N (a shared
bottleneck: the load balancer, the network, the host's CPU, a shared cache), ``no gain`` when it reaches 1 or less
(the N servers are one server's capacity: one machine behind several URLs, a saturated gateway), ``not judged``
without a clean pair.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..fmt import ci_text, lvl, num
from ..rundir.env import RunEnv
from ..rundir.steps import StepRow
from .documents.scale_out import ScaleOutSummary
from .rates import block_ratio_ci, series_mean_ci
from .status import CLEAN
from .values import json_safe

__all__ = ["ScaleBlock", "scale_out_summary", "scaling_verdict"]

UNJUDGED: dict = {"value": None, "ci95": None, "blocks": 0, "blocks_agree": None}
METHOD = (
    "Per variant, pairs of steps in ABBA order: one server at the level, N servers at N x the level with the "
    "requests spread round-robin. Slope: N servers' goodput (good requests/s, every request counted) over one "
    "server's, pair r against pair r on per-second bins (AR(1)-aware intervals, pairs pooled with random "
    "effects); efficiency = slope / N. Only clean steps count."
)


@dataclass(frozen=True)
class ScaleBlock:
    """One scale-out step of a variant: its ``steps.json`` row, its figures and its per-second bins."""

    row: StepRow
    figures: dict
    token_rates: np.ndarray
    good_rates: np.ndarray

    @property
    def pair(self) -> int:
        assert self.row.pair is not None  # the runtime writes a scale-out step's servers, level and pair together
        return self.row.pair


def scaling_verdict(servers: int, ci95: list[float] | None) -> str:
    if ci95 is None:
        return "not judged"
    if ci95[1] >= servers:
        return "linear"
    return "sub-linear" if ci95[0] > 1.0 else "no gain"


def _p(figures: dict, name: str, key: str):
    return (figures.get(name) or {}).get(key)


def _shares(frame: pd.DataFrame, step: int) -> list[dict]:
    sent = frame[(frame["step"] == step) & (frame["phase"] == "steady")]
    if "server" not in sent or not len(sent):
        return []
    out = []
    for server, rows in sent.groupby(sent["server"].fillna(0).astype(int)):
        failed = rows["error_class"].notna()
        out.append(
            {
                "server": int(server),
                "requests": int(len(rows)),
                "errors": int(failed.sum()),
                "output_tokens": int(rows.loc[~failed, "output_tokens"].sum()),
                "share": len(rows) / len(sent),
            }
        )
    return out


def _step(block: ScaleBlock, frame: pd.DataFrame) -> dict:
    row, figures = block.row, block.figures
    ttft = "ttft_sched_all_ms" if figures["mode"] == "open" else "ttft_all_ms"
    return {
        "step": row.step,
        "pair": row.pair,
        "servers": row.servers,
        "level": row.level,
        "server_level": row.server_level,
        "status": figures["status"],
        "status_reasons": figures["status_reasons"],
        "requests": figures["requests"],
        "errors": figures["errors"],
        "goodput_rps": figures["goodput_rps"],
        "goodput_rps_ci95": series_mean_ci(block.good_rates),
        "output_tps": figures["output_tps"],
        "output_tps_ci95": figures["output_tps_ci95"],
        "ttft_p50_ms": _p(figures, ttft, "p50"),
        "ttft_p99_ms": _p(figures, ttft, "p99"),
        # The responses' count (a scale-out step's telemetry follows only its first server).
        "cached_fraction": ((figures.get("prompt_cache") or {}).get("requests") or {}).get("cached_fraction"),
        "tpot_p50_ms": _p(figures, "tpot_all_ms", "p50"),
        "per_server": _shares(frame, row.step),
    }


def _pooled(blocks: dict[int, np.ndarray]) -> tuple[float | None, list[float] | None]:
    if not blocks:
        return None, None
    joined = np.concatenate(list(blocks.values()))
    return (float(joined.mean()) if joined.size else None), series_mean_ci(joined)


def variant_scale_out(variant: str, blocks: list[ScaleBlock], servers: int, level: float, frame: pd.DataFrame) -> dict:
    """One variant's scale-out: its steps, the slope of goodput and tokens with their intervals, the verdict."""
    mode = blocks[0].row.mode if blocks else "closed"
    unit = "req/s" if mode == "open" else "concurrent streams"
    clean = [b for b in blocks if b.figures["status"] == CLEAN]
    one = {b.pair: b for b in clean if b.row.servers == 1}
    many = {b.pair: b for b in clean if b.row.servers == servers}

    def ratio(rates: str) -> dict:
        return block_ratio_ci(
            {p: getattr(b, rates) for p, b in many.items()}, {p: getattr(b, rates) for p, b in one.items()}
        )

    # Pairs only: without a pair clean on both sides, a ratio would compare steps measured apart.
    paired = bool(set(one) & set(many))
    good, tokens = (ratio("good_rates"), ratio("token_rates")) if paired else (UNJUDGED, UNJUDGED)
    slope, ci = good["value"], good["ci95"]
    one_good, one_ci = _pooled({p: b.good_rates for p, b in one.items()})
    many_good, many_ci = _pooled({p: b.good_rates for p, b in many.items()})
    verdict = scaling_verdict(servers, ci)
    head = f"{variant}: {servers} servers at {lvl(level)} {unit} each"
    if slope is None:
        why = next((reason for b in blocks for reason in b.figures["status_reasons"]), "no step was measured")
        text = f"{head}: not judged, no pair of steps measured cleanly ({why})"
        if one and not many and any(b.row.servers == servers for b in blocks):
            text += (
                f"; one server was measured cleanly and {servers} were not: they may have slowed each other "
                "down (servers on one host share its cores: give each fewer threads, e.g. llama.cpp -t)"
            )
    else:
        words = {
            "linear": "consistent with linear scaling",
            "sub-linear": "below linear: something the servers share limits them",
            "no gain": "no clear gain over one server: the servers share one capacity",
            "not judged": "no interval: too few seconds measured",
        }[verdict]
        text = (
            f"{head} served {num(slope)}x one server's goodput (95% CI {ci_text(ci) or 'none'}; efficiency "
            f"{num(slope / servers)}, CI {ci_text([c / servers for c in ci]) if ci else 'none'}): {words}"
        )
    return {
        "variant": variant,
        "servers": servers,
        "server_level": level,
        "unit": unit,
        "steps": [_step(b, frame) for b in blocks],
        "one_goodput_rps": one_good,
        "one_goodput_rps_ci95": one_ci,
        "many_goodput_rps": many_good,
        "many_goodput_rps_ci95": many_ci,
        "slope": slope,
        "slope_ci95": ci,
        "pairs": good["blocks"],
        "pairs_agree": good["blocks_agree"],
        "efficiency": slope / servers if slope is not None else None,
        "efficiency_ci95": [c / servers for c in ci] if ci else None,
        "tokens_slope": tokens["value"],
        "tokens_slope_ci95": tokens["ci95"],
        "scaling": verdict,
        "excluded": [
            f"{variant} step {b.row.step} ({b.row.servers} server(s)): {reason}"
            for b in blocks
            if b.figures["status"] != CLEAN
            for reason in b.figures["status_reasons"]
        ],
        "text": text,
    }


def scale_out_summary(env: RunEnv, scaled: dict[str, list[ScaleBlock]], frame: pd.DataFrame) -> ScaleOutSummary | None:
    """The scale-out of every variant that had scale-out steps; None when the run had none planned."""
    plan = env.scale_out
    if plan is None:
        return None
    servers, level = int(plan.servers), float(plan.level)
    variants = [
        variant_scale_out(name, blocks, servers, level, frame[frame["variant"] == name] if len(frame) else frame)
        for name, blocks in scaled.items()
    ]
    text = "; ".join(v["text"] for v in variants) or "no scale-out step was measured"
    return ScaleOutSummary.model_validate(
        json_safe(
            {
                "servers": servers,
                "level": level,
                "pairs": plan.pairs,
                "min_efficiency": plan.min_efficiency,
                "method": METHOD,
                "variants": variants,
                "text": text,
            }
        )
    )

"""The report's sections for the speculative-decoding experiments, from the ``RunView`` alone: the draft-length
sweep and its schedule, where the time of a request goes, the context-length axis with its chart, and cost per
million tokens.
"""

from __future__ import annotations

import json
from typing import Any

from ..analysis.speedup import speedup_state
from ..fmt import ci_text, lvl, num, pct, pct_ci, times
from . import charts
from .charts import PALETTE, HLine, Series
from .view import RunView

__all__ = ["breakdowns", "context_charts", "contexts", "cost", "images", "sweeps"]


def _speed(ratio, state: str | None = None) -> dict:
    if ratio is None:
        return {"value": None, "ci": None, "state": "unclear"}
    return {
        "value": times(ratio.value),
        "ci": ci_text(ratio.ci95, times),
        "state": state or speedup_state(ratio),
    }


def sweeps(view: RunView) -> list[dict]:
    """Per sweep: a table level x setting of speed-ups (the chosen one marked), acceptance per position, the
    schedule in words and in vLLM's shape, and where the run stopped climbing."""
    out = []
    for sweep in view.summary.schedules:
        rows, acceptance = [], []
        for level in sweep.levels:
            by_value = {repr(c.value): c for c in level.candidates}
            cells = []
            for value in sweep.values:
                cand = by_value.get(repr(value))
                cells.append(
                    {
                        **_speed(cand.speedup if cand else None, cand.state if cand else None),
                        "status": cand.status if cand else None,
                        "chosen": cand is not None and level.choice == cand.value,
                    }
                )
                acc = cand.acceptance if cand else None
                if acc is not None:
                    acceptance.append(
                        {
                            "level": lvl(level.level),
                            "value": str(value),
                            "rate": pct(acc.rate),
                            "mean_length": num(acc.mean_length),
                            "per_position": " / ".join(f"{p:.2f}" for p in acc.per_position),
                        }
                    )
            rows.append({"level": lvl(level.level), "cells": cells, "choice": str(level.choice), "why": level.why})
        metric = next(
            (c.metric_name for c in view.summary.comparisons if c.variant in sweep.variants), "aggregate output tok/s"
        )
        out.append(
            {
                "name": sweep.name,
                "setting": sweep.setting,
                "label": sweep.label,
                "metric": metric,
                "values": [str(v) for v in sweep.values],
                "rows": rows,
                "acceptance": acceptance,
                "text": sweep.text,
                "vllm": json.dumps({k: v for k, v in sweep.vllm.items() if k != "note"}) if sweep.vllm else None,
                "vllm_note": sweep.vllm.get("note") if sweep.vllm else None,
                "stopped": [st.text for st in sweep.stopped],
            }
        )
    return out


def breakdowns(view: RunView) -> list[dict]:
    """Per comparison and level: both sides' phases, the words, and tokens per target pass against the speed-up."""
    out = []
    for comp in view.comparisons:
        rows = []
        for s in sorted(comp.steps, key=lambda s: s.level):
            if s.breakdown is None:
                continue
            sides = []
            for name, phases in ((comp.baseline, s.breakdown.baseline), (comp.variant, s.breakdown.variant)):
                sides.append(
                    {
                        "name": name,
                        "source": phases.source if phases else None,
                        "statistic": phases.statistic if phases else None,
                        **{
                            k: num(getattr(phases, k)) if phases else None
                            for k in ("queue_ms", "prefill_ms", "decode_ms", "outside_ms", "e2e_ms")
                        },
                        "note": phases.note if phases else None,
                    }
                )
            rows.append({"level": lvl(s.level), "sides": sides, "words": s.breakdown.words, "gap": s.pass_gap})
        if rows:
            out.append(
                {
                    "variant": comp.variant,
                    "baseline": comp.baseline,
                    "rows": rows,
                    "conditions": view.conditions_line(comp.variant),
                }
            )
    return out


def contexts(view: RunView) -> list[dict]:
    """Per context length and level: each variant's figures and the speed-up over the baseline."""
    out = []
    for ctx in view.summary.contexts:
        speed = {(c.variant, s.level): s for c in ctx.comparisons for s in c.steps}
        rows: list[dict[str, Any]] = []
        for name, levels in ctx.variants.items():
            for f in levels:
                step = speed.get((name, f.level))
                srv, cli = f.acceptance_server, f.acceptance_client
                rows.append(
                    {
                        "variant": name,
                        "level": lvl(f.level),
                        "clean": f.clean,
                        "requests": f.requests,
                        "ttft": num(f.ttft_p50_ms),
                        "cached": pct(f.cached_fraction),
                        "tpot": num(f.tpot_p50_ms),
                        "decode": num(f.decode_tps),
                        "e2e": num(f.e2e_tps),
                        "output": num(f.output_tps),
                        "acc_server": pct(srv.rate) if srv else None,
                        "mean_length": num(srv.mean_length) if srv else None,
                        "acc_client": pct(cli.rate) if cli else None,
                        "acc_client_ci": pct_ci(cli.rate_ci95) if cli else None,
                        "length_client": num(cli.mean_length) if cli else None,
                        "length_client_ci": ci_text(cli.mean_length_ci95) if cli else None,
                        "client_source": cli.source if cli else None,
                        "speedup": _speed(step.output_tps_speedup) if step else None,
                        "status": step.status if step else None,
                    }
                )
        out.append(
            {
                "context": ctx.context_tokens,
                "ladder": ctx.ladder,
                "rows": sorted(rows, key=lambda r: (float(r["level"]), r["variant"])),
            }
        )
    return out


def context_charts(view: RunView) -> dict:
    """Speed-up (with its CI) and server acceptance against prompt length, one line per variant and level."""
    if not view.summary.contexts:
        return {}
    speed, accept = [], []
    keys = sorted({(c.variant, s.level) for ctx in view.summary.contexts for c in ctx.comparisons for s in c.steps})
    for i, (variant, level) in enumerate(keys):
        xs, ys, lo, hi, acc = [], [], [], [], []
        cli, cli_lo, cli_hi = [], [], []
        for ctx in view.summary.contexts:
            step = next((s for c in ctx.comparisons if c.variant == variant for s in c.steps if s.level == level), None)
            level_fig = next((f for f in ctx.variants.get(variant, []) if f.level == level), None)
            xs.append(ctx.context_tokens)
            ratio = step.output_tps_speedup if step else None
            ys.append(ratio.value if ratio else None)
            lo.append(ratio.ci95[0] if ratio and ratio.ci95 else None)
            hi.append(ratio.ci95[1] if ratio and ratio.ci95 else None)
            srv = level_fig.acceptance_server if level_fig else None
            acc.append(srv.rate if srv else None)
            rq = level_fig.acceptance_client if level_fig else None
            cli.append(rq.rate if rq else None)
            cli_lo.append(rq.rate_ci95[0] if rq and rq.rate_ci95 else None)
            cli_hi.append(rq.rate_ci95[1] if rq and rq.rate_ci95 else None)
        color = PALETTE[(i + 1) % len(PALETTE)]
        name = f"{variant} at {lvl(level)}"
        speed.append(Series(name, xs, ys, lo=lo, hi=hi, color=color))
        accept.append(Series(f"{name} (server)", xs, acc, color=color))
        if any(v is not None for v in cli):
            accept.append(Series(f"{name} (requests)", xs, cli, lo=cli_lo, hi=cli_hi, color=color, dash="4 3"))
    x_label = "prompt tokens"
    return {
        "context_speedup": {
            "title": "Speed-up vs prompt length",
            "caption": "Variant / baseline aggregate output tok/s per prompt length, one line per level; bars = "
            "95% CI. A small draft model proposes worse as the context grows.",
            "svg": charts.line_chart(
                speed,
                charts.Chart(
                    title="Speed-up vs prompt length",
                    x_label=x_label,
                    y_label="speed-up (aggregate tok/s)",
                    log2_x=True,
                    hlines=[HLine(1.0, "1x = no gain")],
                    y_from_zero=False,
                    empty_note="no level measured cleanly on both sides",
                ),
            ),
        },
        "context_acceptance": {
            "title": "Acceptance vs prompt length",
            "caption": "Accepted / drafted tokens per prompt length: solid, the server's counters over each level's "
            "clean steps; dashed, the per-request timings with a 95% interval over requests.",
            "svg": charts.line_chart(
                accept,
                charts.Chart(
                    title="Acceptance vs prompt length",
                    x_label=x_label,
                    y_label="accepted / drafted",
                    log2_x=True,
                    y_max=1.0,
                    empty_note="no acceptance from the server or the responses",
                ),
            ),
        },
    }


def cost(view: RunView) -> dict | None:
    """Per variant and level: cost per million output and effective tokens with their CIs, throughput per GPU,
    goodput, eligibility; the choice and the capacity answer. None without a ``cost:`` section."""
    doc = view.summary.cost
    if doc is None:
        return None
    variants = []
    for entry in doc.variants:
        rows = [
            {
                "level": lvl(row.level),
                "status": row.status,
                "chosen": row.level == entry.best_level,
                "eligible": row.eligible,
                "why": "; ".join(row.gate_failures + row.excluded),
                "output": num(row.output_tps),
                "output_ci": ci_text(row.output_tps_ci95),
                "usd": num(row.usd_per_mtok),
                "usd_ci": ci_text(row.usd_per_mtok_ci95),
                "per_gpu": num(row.tps_per_gpu),
                "per_gpu_ci": ci_text(row.tps_per_gpu_ci95),
                "goodput": num(row.goodput_rps),
                "goodput_ci": ci_text(row.goodput_rps_ci95),
                "effective": num(row.effective_tps),
                "effective_ci": ci_text(row.effective_tps_ci95),
                "usd_effective": num(row.usd_per_effective_mtok),
                "usd_effective_ci": ci_text(row.usd_per_effective_mtok_ci95),
            }
            for row in entry.levels
        ]
        variants.append(
            {
                "variant": entry.variant,
                "rows": rows,
                "text": entry.text,
                "capacity": entry.capacity.text if entry.capacity else None,
                "conditions": view.conditions_line(entry.variant),
            }
        )
    return {
        "price": doc.price.text,
        "gpu": doc.price.basis == "gpu",
        "rule": doc.rule,
        "effective": doc.effective,
        "assumption": doc.assumption,
        "text": doc.text,
        "variants": variants,
    }


def images(view: RunView) -> dict | None:
    """Per variant, image bucket and level: TTFT P50 with and without the images, the difference and its CI.
    None when no bucket has images."""
    doc = view.summary.images
    if doc is None:
        return None
    rows = [
        {
            "variant": r.variant,
            "bucket": r.bucket,
            "level": lvl(r.level),
            "clean": r.clean,
            "images": num(r.images_per_request),
            "kb": num(r.image_bytes / 1000) if r.image_bytes else None,
            "tokens": f"{num(r.prompt_tokens_with) or 'n/m'} / {num(r.prompt_tokens_without) or 'n/m'}",
            "with": num(r.ttft_p50_with_ms),
            "without": num(r.ttft_p50_without_ms),
            "added": num(r.overhead_ms),
            "ci": ci_text(r.overhead_ci95),
            "n": f"{r.with_images} / {r.without_images}",
            "text": r.text,
        }
        for r in doc.levels
    ]
    return {"method": doc.method, "rows": rows}

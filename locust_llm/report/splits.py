"""What speculative decoding depends on, in the report: the category x level table of speed-ups and acceptance,
reasoning streams (both times to first token, the token split, the requests without an answer), and decode speed
by position in the output with the one-line answer; plus the lines the console and ``summary.md`` print. Presents
``summary.categories``, each step's ``reasoning`` and ``ttfot_*``, and ``summary.positions`` only."""

from __future__ import annotations

from ..analysis.documents.summary import Summary
from ..analysis.speedup import speedup_state
from ..fmt import ci_text, lvl, num, pct, pct_ci, times
from . import charts
from .charts import HLine, Series
from .view import RunView, unit_of

__all__ = ["categories_section", "positions_section", "reasoning_section", "split_lines"]


def _ratio(ratio) -> dict:
    """A speed-up cell: value, interval and its state (better / worse / unclear)."""
    if ratio is None or ratio.value is None:
        return {"value": None, "ci": None, "state": "unclear"}
    return {
        "value": times(ratio.value),
        "ci": ci_text(ratio.ci95, times),
        "state": speedup_state(ratio),
    }


def _server(e) -> dict | None:
    """The server's own per-request decode rates (llama.cpp timings) and their paired speed-up; None without them."""
    if e.server_decode_tps is None or e.server_decode_tps_baseline is None:
        return None
    return {
        "base": num(e.server_decode_tps_baseline),
        "variant": num(e.server_decode_tps),
        "speedup": _ratio(e.server_decode_tps_speedup),
    }


def categories_section(view: RunView) -> list[dict] | None:
    """Per compared variant: one row per category, one cell per level."""
    out = []
    for comp in view.summary.categories:
        levels = sorted({e.level for e in comp.levels})
        rows = []
        for category in comp.categories:
            cells = []
            for level in levels:
                e = next((x for x in comp.levels if x.level == level and x.category == category), None)
                acc = e.acceptance if e is not None else None
                cells.append(
                    None
                    if e is None
                    else {
                        "decode": _ratio(e.decode_tps_speedup),
                        "tpot": _ratio(e.tpot_p50_speedup),
                        "rate": pct(acc.rate) if acc else None,
                        "rate_ci": pct_ci(acc.rate_ci95) if acc else None,
                        "length": num(acc.mean_length) if acc else None,
                        "length_ci": ci_text(acc.mean_length_ci95) if acc else None,
                        "decode_tps": num(e.decode_tps_baseline),
                        "decode_tps_variant": num(e.decode_tps),
                        "server": _server(e),
                        "share": pct(e.output_share, 0),
                        "pairs": e.pairs,
                    }
                )
            rows.append({"category": category, "cells": cells, "advice": comp.recommendations.get(category)})
        out.append(
            {
                "variant": comp.variant,
                "baseline": comp.baseline,
                "levels": [lvl(level) for level in levels],
                "rows": rows,
                "basis": comp.basis,
                "text": comp.text,
                "conditions": view.conditions_line(comp.variant),
            }
        )
    return out or None


def _ms(dist, key: str) -> str | None:
    return num(getattr(dist, key)) if dist is not None else None


def reasoning_section(view: RunView) -> dict | None:
    """Per variant and step with reasoning: both times to first token, the split and the speeds."""
    rows = []
    for name in view.names:
        for s in view.steps_of(name):
            r = s.reasoning
            if r is None:
                continue
            rows.append(
                {
                    "variant": name,
                    "level": lvl(s.level),
                    "step": s.step,
                    "status": s.status,
                    "requests": r.requests,
                    "reasoned": r.reasoning_requests,
                    "no_answer": r.no_answer,
                    "no_answer_share": pct(r.no_answer_share),
                    "ttft": f"{_ms(s.ttft_ms, 'p50') or 'n/m'} / {_ms(s.ttft_ms, 'p95') or 'n/m'}",
                    "ttfot": f"{_ms(s.ttfot_ms, 'p50') or 'n/m'} / {_ms(s.ttfot_ms, 'p95') or 'n/m'}",
                    "ttfot_all": _ms(s.ttfot_all_ms, "p95"),
                    "reasoning_tokens": _ms(r.reasoning_tokens, "mean"),
                    "answer_tokens": _ms(r.answer_tokens, "mean"),
                    "share": pct(r.reasoning_share),
                    "reasoning_tps": _ms(r.reasoning_tps, "mean"),
                    "answer_tps": _ms(r.answer_tps, "mean"),
                }
            )
    if not rows:
        return None
    speedups = [
        {
            "variant": comp.variant,
            "level": lvl(step.level),
            "p50": _ratio(step.ttfot_p50_speedup),
            "p95": _ratio(step.ttfot_p95_speedup),
            "ttft_p95": _ratio(step.ttft_p95_speedup),
        }
        for comp in view.comparisons
        for step in comp.steps
        if step.ttfot_p50_speedup is not None
    ]
    gates = view.env.gates
    used = [f"{key} {gates[key]:g} ms" for key in ("ttft_p99_ms", "ttfot_p99_ms") if gates.get(key) is not None]
    return {
        "rows": rows,
        "speedups": speedups,
        "gates": ", ".join(used) if used else "no TTFT gate set",
        "headline": "TTFOT (the first answer token)"
        if view.summary.headline_ttft == "ttfot"
        else "TTFT (the first token of any kind, reasoning included)",
    }


def _bins_series(name: str, bins, values, intervals, color: str) -> Series:
    """One line over output positions (the middle of each bin), with its intervals as bars."""
    return Series(
        name,
        [(b.first_token + b.last_token + 1) / 2 for b in bins],
        values,
        lo=[ci[0] if ci else None for ci in intervals],
        hi=[ci[1] if ci else None for ci in intervals],
        color=color,
    )


def positions_section(view: RunView) -> dict | None:
    doc = view.summary.positions
    if doc is None:
        return None
    figures, tables = [], []
    for level in sorted({c.level for c in doc.curves}):
        curves = [c for c in doc.curves if c.level == level]
        series = [
            _bins_series(
                c.variant,
                c.bins,
                [b.decode_tps for b in c.bins],
                [b.decode_tps_ci95 for b in c.bins],
                view.color(c.variant),
            )
            for c in curves
        ]
        unit = unit_of(view.mode)
        figures.append(
            {
                "title": f"Decode speed by output position at {lvl(level)} {unit}",
                "caption": f"Mean decode tok/s of the requests over each {doc.bin_tokens}-token bin of their output "
                "(bars: 95% CI over requests); a curve that falls shows the pace dropping over a long answer.",
                "svg": charts.line_chart(
                    series,
                    charts.Chart(
                        title=f"Decode speed by output position at {lvl(level)} {unit}",
                        x_label="output token (bin middle)",
                        y_label="decode tok/s",
                        empty_note="no request completed a bin",
                    ),
                ),
            }
        )
        for comp in (c for c in doc.comparisons if c.level == level):
            figures.append(
                {
                    "title": f"{comp.variant} / {comp.baseline} by output position at {lvl(level)} {unit}",
                    "caption": "Decode tok/s of the variant over the baseline per bin, paired by request (the same "
                    "prompt); bars: 95% CI.",
                    "svg": charts.line_chart(
                        [
                            _bins_series(
                                comp.variant,
                                comp.bins,
                                [b.value for b in comp.bins],
                                [b.ci95 for b in comp.bins],
                                view.color(comp.variant),
                            )
                        ],
                        charts.Chart(
                            title=f"{comp.variant} speed-up by output position",
                            x_label="output token (bin middle)",
                            y_label="speed-up (decode tok/s)",
                            hlines=[HLine(1.0, "1x = no gain")],
                            y_from_zero=False,
                        ),
                    ),
                }
            )
        for c in curves:
            speed = {
                b.first_token: _ratio(b)
                for comp in doc.comparisons
                if comp.variant == c.variant and comp.level == level
                for b in comp.bins
            }
            tables.append(
                {
                    "variant": c.variant,
                    "level": lvl(level),
                    "text": c.text,
                    "conditions": view.conditions_line(c.variant),
                    "bins": [
                        {
                            "span": f"{b.first_token:,}-{b.last_token + 1:,}",
                            "requests": b.requests,
                            "decode": num(b.decode_tps),
                            "decode_ci": ci_text(b.decode_tps_ci95),
                            "rate": pct(b.acceptance_rate),
                            "rate_ci": pct_ci(b.acceptance_rate_ci95),
                            "speedup": speed.get(b.first_token),
                        }
                        for b in c.bins
                    ],
                }
            )
    return {
        "bin_tokens": doc.bin_tokens,
        "steps_used": " or ".join(doc.steps_used),
        "figures": figures,
        "tables": tables,
        "text": doc.text,
    }


def split_lines(summary: Summary) -> list[str]:
    """For the console and ``summary.md``: the category answer, each category's advice, and the long-answer lines."""
    lines = []
    for comp in summary.categories:
        lines.append(f"categories ({comp.variant} vs {comp.baseline}): {comp.text}")
        lines += [f"category {name}: {advice}" for name, advice in comp.recommendations.items()]
    lines += [f"long answer: {text}" for text in (summary.positions.text if summary.positions else [])]
    for name, entry in summary.variants.items():
        for s in entry.steps:
            if s.reasoning is not None and s.reasoning.no_answer:
                lines.append(
                    f"reasoning: {name} at {lvl(s.level)} (step {s.step}): {s.reasoning.no_answer} of "
                    f"{s.reasoning.requests} requests gave no answer after reasoning"
                )
    return lines

"""The report's sections for production-shaped load, from the ``RunView`` alone: conversations by turn (a chart of
TTFT by turn per variant, the figures and speed-ups per turn, what became of each step's conversations, diverged
histories) and a trace's replay per step (records replayed, skipped, dropped; the arrival error against the trace).
"""

from __future__ import annotations

from ..analysis.speedup import speedup_state
from ..fmt import ci_text, lvl, num, times
from . import charts
from .charts import PALETTE, Series
from .view import RunView

__all__ = ["conversations_section", "trace_section", "traffic_lines"]


def _speed(ratio) -> dict:
    return {"value": times(ratio.value), "ci": ci_text(ratio.ci95, times), "state": speedup_state(ratio)}


def conversations_section(view: RunView) -> dict | None:
    """None for a run without conversations."""
    doc = view.summary.conversations
    if doc is None:
        return None
    keys = sorted({(r.variant, r.level) for r in doc.levels}, key=lambda k: (k[1], view.names.index(k[0])))
    series = []
    for i, (variant, level) in enumerate(keys):
        turns = sorted((r for r in doc.levels if (r.variant, r.level) == (variant, level)), key=lambda r: r.turn)
        color = view.color(variant) if len({k[1] for k in keys}) == 1 else PALETTE[i % len(PALETTE)]
        series.append(
            Series(f"{variant} at {lvl(level)}", [r.turn for r in turns], [r.ttft_p50_ms for r in turns], color=color)
        )
    ttft = "TTFT P50 from the intended send" if view.mode == "open" else "TTFT P50"
    chart = {
        "title": "TTFT by turn",
        "caption": f"{ttft} of each turn (clean steps pooled), one line per variant and level: turn t's request "
        "carries the t - 1 turns before it, with the answers the server gave.",
        "svg": charts.line_chart(
            series,
            charts.Chart(
                title="TTFT by turn",
                x_label="turn",
                y_label=f"{ttft} (ms)",
                x_ticks=list(range(1, doc.turns + 1)),
                empty_note="no level measured cleanly",
            ),
        ),
    }
    speedups = {(c.variant, c.level, c.turn): c for c in doc.comparisons}
    rows = []
    for r in sorted(doc.levels, key=lambda r: (r.level, view.names.index(r.variant), r.turn)):
        comparison = speedups.get((r.variant, r.level, r.turn))
        rows.append(
            {
                "variant": r.variant,
                "level": lvl(r.level),
                "turn": r.turn,
                "requests": r.requests,
                "ttft": num(r.ttft_p50_ms),
                "tpot": num(r.tpot_p50_ms),
                "decode": num(r.decode_tps),
                "prompt": num(r.prompt_tokens),
                "cached": num(r.cached_tokens),
                "ttft_speedup": _speed(comparison.ttft_p50_speedup) if comparison else None,
                "decode_speedup": _speed(comparison.decode_tps_speedup) if comparison else None,
            }
        )
    steps = [
        {
            "variant": name,
            "level": lvl(s.level),
            "step": s.step,
            "status": s.status,
            "outcome": s.conversations,
            "turns": " \u00b7 ".join(f"{t.turn}: {num(t.ttft_p50_ms) or 'n/m'}" for t in s.by_turn or []),
        }
        for name in view.names
        for s in view.steps_of(name)
        if s.conversations is not None
    ]
    return {
        "turns": doc.turns,
        "think_s": num(doc.think_s),
        "chart": chart,
        "rows": rows,
        "steps": steps,
        "histories": [h.text for h in doc.histories],
    }


def trace_section(view: RunView) -> dict | None:
    """None for a run that replayed no trace."""
    trace = view.workload.trace
    rows = [
        {
            "variant": name,
            "level": num(s.level),
            "order": (s.level, view.names.index(name)),
            "step": s.step,
            "status": s.status,
            "figures": s.trace,
            "speed": num(s.trace.speed),
            "error": " / ".join(num(x) or "n/m" for x in (s.trace.arrival_error_p50_ms, s.trace.arrival_error_p99_ms)),
            "error_max": num(s.trace.arrival_error_max_ms),
            "ttft": num(s.ttft_sched_ms.p50 if s.ttft_sched_ms else None),
            "e2e": num(s.e2e_sched_ms.p95 if s.e2e_sched_ms else None),
        }
        for name in view.names
        for s in view.steps_of(name)
        if s.trace is not None
    ]
    if not rows or trace is None:
        return None
    skipped = ", ".join(f"{n} {why}" for why, n in (trace.skipped_rows or {}).items())
    return {
        "file": trace.file,
        "format": trace.format,
        "records": trace.records,
        "span": num(trace.span_s),
        "rate": num(trace.rate_rps),
        "shared": trace.shared_blocks,
        "blocks": trace.blocks,
        "skipped": skipped,
        "outside": trace.outside_window,
        "rows": sorted(rows, key=lambda r: r["order"]),
    }


def traffic_lines(view: RunView) -> list[str]:
    """Plain-text lines for summary.md: histories, conversations by turn and each step's replay."""
    lines = []
    doc = view.summary.conversations
    if doc is not None:
        for c in doc.comparisons:
            ttft, decode = c.ttft_p50_speedup, c.decode_tps_speedup
            lines.append(
                f"Conversations: {c.variant} at {lvl(c.level)}, turn {c.turn}: TTFT P50 speed-up "
                f"{times(ttft.value) or 'n/m'} ({ci_text(ttft.ci95, times) or 'no CI'}), decode tok/s speed-up "
                f"{times(decode.value) or 'n/m'} "
                f"({ci_text(decode.ci95, times) or 'no CI'})"
            )
        lines += [f"Conversations: {h.text}" for h in doc.histories]
    for name in view.names:
        lines += [f"Trace: {name} at {lvl(s.level)}: {s.trace.text}" for s in view.steps_of(name) if s.trace]
    return lines

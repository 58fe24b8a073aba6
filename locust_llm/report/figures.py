"""The charts a capacity planner asks for, drawn from the ``RunView``: throughput, latency percentiles,
the throughput/latency trade-off, speed-up and acceptance against load, and telemetry over time.
"""

from __future__ import annotations

from collections.abc import Callable

from ..fmt import is_number, lvl
from . import charts
from .charts import PALETTE, HLine, Series, Span, VLine
from .tables import PERCENTILES
from .view import RunView, level_name

__all__ = ["ladder_charts", "timeline_charts"]

DASH = {"p50": "", "p95": "6 3", "p99": "2 3"}


def _vlines(view: RunView, include_crossover: bool = True) -> list[VLine]:
    lines = []
    for name in view.names:
        entry = view.variants.get(name)
        if entry is None:
            continue
        if is_number(entry.saturation_level):
            lines.append(VLine(entry.saturation_level, f"saturation {name}", view.color(name), "5 3"))
        if is_number(entry.knee_level):
            lines.append(VLine(entry.knee_level, f"knee {name}", view.color(name), "1 3"))
    if include_crossover:
        lines += [
            VLine(c.crossover_level, f"crossover {c.variant}", "#b00020", "6 2")
            for c in view.comparisons
            if is_number(c.crossover_level)
        ]
    return lines


def _percentile_series(view: RunView, name: str, key: str, stat: str, **kwargs) -> Series:
    steps = view.steps_of(name)
    ys = [getattr(getattr(s, key), stat) if getattr(s, key) else None for s in steps]
    return Series(name=kwargs.pop("label", name), x=[s.level for s in steps], y=ys, color=view.color(name), **kwargs)


def ladder_charts(view: RunView, guard: Callable) -> dict[str, dict]:
    """``{key: {title, caption, svg}}``; ``guard(name, build)`` turns a failing chart into a visible note."""
    levels = view.levels()
    x_label = level_name(view.mode)
    result: dict[str, dict] = {}

    def add(key, title, caption, build):
        svg = guard(f"chart {key}", build)
        result[key] = {
            "title": title,
            "caption": caption,
            "svg": svg if svg is not None else charts.not_measured(title, "chart failed to render"),
        }

    def throughput():
        series = []
        for name in view.names:
            steps = view.steps_of(name)
            cis = [s.output_tps_ci95 or [None, None] for s in steps]
            series.append(
                Series(
                    name,
                    [s.level for s in steps],
                    [s.output_tps for s in steps],
                    lo=[c[0] for c in cis],
                    hi=[c[1] for c in cis],
                    color=view.color(name),
                )
            )
        return charts.line_chart(
            series,
            charts.Chart(
                title="Aggregate output tok/s",
                x_label=x_label,
                y_label="output tok/s",
                log2_x=True,
                x_ticks=levels,
                vlines=_vlines(view),
            ),
        )

    add(
        "throughput",
        "Throughput vs load",
        "Aggregate output tokens/s of each step's steady window, bars = bootstrap 95% CI; dashed markers: "
        "saturation, dotted: knee, red: crossover.",
        throughput,
    )

    def latency(keys: tuple[str, ...], label: str):
        def build():
            key = next((k for k in keys if any(getattr(s, k) for n in view.names for s in view.steps_of(n))), keys[-1])
            series = [
                _percentile_series(view, name, key, p, label=f"{name} {p.upper()}", dash=DASH[p])
                for name in view.names
                for p in PERCENTILES
            ]
            return charts.line_chart(
                series,
                charts.Chart(
                    title=label,
                    x_label=x_label,
                    y_label=f"{label} (ms)",
                    log2_x=True,
                    x_ticks=levels,
                    vlines=[v for v in _vlines(view, False) if v.label.startswith("knee")],
                ),
            )

        return build

    open_loop = view.mode == "open"
    ttft_label = "TTFT_sched" if open_loop else "TTFT"
    add(
        "ttft",
        f"{ttft_label} percentiles vs load",
        "P50 solid, P95 dashed, P99 dotted"
        + (" (open loop: from the intended send time)" if open_loop else "")
        + "; knee marked.",
        latency(("ttft_sched_ms", "ttft_ms") if open_loop else ("ttft_ms",), ttft_label),
    )
    add(
        "tpot",
        "TPOT percentiles vs load",
        "Time per output token after the first; P50 solid, P95 dashed, P99 dotted; knee marked.",
        latency(("tpot_ms",), "TPOT"),
    )
    add(
        "e2e",
        "End-to-end latency percentiles vs load",
        "Whole request, send to last token; P50 solid, P95 dashed, P99 dotted.",
        latency(("e2e_sched_ms", "e2e_ms") if open_loop else ("e2e_ms",), "E2E"),
    )

    def tradeoff():
        series = []
        for name in view.names:
            steps = view.steps_of(name)
            series.append(
                Series(
                    name,
                    [s.tpot_ms.p50 if s.tpot_ms else None for s in steps],
                    [s.output_tps for s in steps],
                    color=view.color(name),
                    labels=[lvl(s.level) for s in steps],
                )
            )
        return charts.line_chart(
            series,
            charts.Chart(
                title="Throughput vs TPOT",
                x_label="TPOT P50 (ms per token, per user)",
                y_label="aggregate output tok/s",
                y_from_zero=True,
            ),
        )

    add(
        "tradeoff",
        "Trade-off: throughput vs per-user speed",
        "Each point is one load level (labelled); up and to the left is better. A variant whose curve lies "
        "above another gives more throughput at the same per-token latency.",
        tradeoff,
    )

    def speedup():
        series = []
        for comp in view.comparisons:
            steps = sorted(comp.steps, key=lambda s: s.level)
            cis = [s.output_tps_speedup.ci95 or [None, None] for s in steps]
            series.append(
                Series(
                    f"{comp.variant} / {comp.baseline}",
                    [s.level for s in steps],
                    [s.output_tps_speedup.value for s in steps],
                    lo=[c[0] for c in cis],
                    hi=[c[1] for c in cis],
                    color=view.colors.get(comp.variant, PALETTE[1]),
                )
            )
        crossovers = [v for v in _vlines(view) if v.label.startswith("crossover")]
        return charts.line_chart(
            series,
            charts.Chart(
                title="Speed-up vs load",
                x_label=x_label,
                y_label="speed-up (aggregate tok/s)",
                log2_x=True,
                x_ticks=levels,
                hlines=[HLine(1.0, "1x = no gain")],
                vlines=crossovers,
                y_from_zero=False,
                empty_note="needs a baseline and a variant",
            ),
        )

    add(
        "speedup",
        "Speed-up over the baseline vs load",
        "Variant / baseline aggregate output tok/s per level, bars = bootstrap 95% CI. Above 1 the variant is "
        "faster; the crossover is the first level whose CI lies entirely below 1.",
        speedup,
    )

    def acceptance():
        series = []
        for name in view.names:
            if name == view.baseline:
                continue
            steps = view.steps_of(name)
            xs = [s.level for s in steps]
            server, client = [], []
            for s in steps:
                acc = s.acceptance
                srv = (acc.server if acc else None) or (s.server.acceptance if s.server else None)
                cli = (acc.client if acc else None) or s.acceptance_client
                server.append(srv.rate if srv else None)
                client.append(cli.rate if cli else None)
            series.append(Series(f"{name} (server counters)", xs, server, color=view.color(name)))
            series.append(Series(f"{name} (client, per request)", xs, client, color=view.color(name), dash="5 3"))
        return charts.line_chart(
            series,
            charts.Chart(
                title="Draft acceptance rate",
                x_label=x_label,
                y_label="accepted / drafted tokens",
                log2_x=True,
                x_ticks=levels,
                y_max=1.0,
                empty_note="no speculative variant, or no acceptance figures",
            ),
        )

    add(
        "acceptance",
        "Acceptance vs load",
        "Accepted / drafted tokens in each step's steady window: from the server's counters (solid) and from "
        "the per-request timings the client received (dashed).",
        acceptance,
    )
    return result


def timeline_charts(view: RunView) -> dict:
    """Telemetry over time with the ladder steps shaded (warm-up lighter)."""
    timeline = view.inp.timeline
    spans = [Span(s.start, s.end, lvl(s.level), s.variant, steady=s.steady) for s in timeline.spans]
    out = []
    for panel in timeline.panels:
        series = []
        for j, s in enumerate(panel.series):
            color = view.color(s.variant) if s.variant is not None else PALETTE[(j + 1) % len(PALETTE)]
            series.append(
                Series(s.name, s.x, s.y, color=color, dash="4 3" if s.dashed else "", points=False, width=1.4)
            )
        svg = charts.line_chart(
            series,
            charts.Chart(
                title=panel.title,
                x_label="seconds since the run started",
                y_label=panel.unit,
                spans=spans,
                y_max=panel.y_max,
                width=1100,
                height=230,
            ),
        )
        out.append({"title": panel.title, "caption": panel.caption, "svg": svg})
    return {"charts": out, "notes": timeline.notes, "conditions": view.conditions_line()}

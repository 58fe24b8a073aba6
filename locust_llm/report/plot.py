"""``locust-llm plot RUN...``: many runs and variants in one self-contained HTML page of inline SVG (no script, no
network), as vLLM's sweep and Pareto plots draw many configurations at once. Pure: from each run's summary.json.

* Throughput vs latency: per run and variant, one line over its ladder levels: aggregate output tok/s (x) against
  P99 time to first token (y; from the intended send time in open loop, the run's headline).
* Pareto: every level of every series as a point, aggregate output tok/s (x) against per-user decode tok/s (y, the
  mean over requests: interactivity); the points no other point beats on both are joined as the frontier.

Only clean steps are drawn (a step left out of the run's verdicts is left out here, and counted under the chart).
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from pathlib import Path

from ..analysis.documents.summary import StepFigures, Summary
from ..rundir import layout

__all__ = ["Point", "Series", "pareto_front", "plot_page", "read_summary", "series_of"]

WIDTH, HEIGHT, MARGIN = 720, 420, 64
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")


@dataclass(frozen=True)
class Point:
    level: float
    output_tps: float
    ttft_p99_ms: float | None
    decode_tps: float | None


@dataclass
class Series:
    """One variant of one run over its levels (repeats of a level: the mean of its clean steps)."""

    run: str
    variant: str
    points: list[Point]
    left_out: int  # steps not clean

    @property
    def name(self) -> str:
        return f"{self.run} / {self.variant}"


def _mean(values: list[float | None]) -> float | None:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None


def series_of(summary: Summary, run: str) -> list[Series]:
    """Each variant's clean ladder steps, one point per level."""
    out = []
    for variant, figures in summary.variants.items():
        by_level: dict[float, list[StepFigures]] = {}
        ladder = [s for s in figures.steps if not s.context]
        for step in ladder:
            if step.status == "clean" and step.output_tps:
                by_level.setdefault(step.level, []).append(step)
        points = []
        for level, steps in sorted(by_level.items()):
            ttft = [(s.ttft_sched_ms if s.mode == "open" else s.ttft_ms) for s in steps]
            points.append(
                Point(
                    level=level,
                    output_tps=_mean([s.output_tps for s in steps]) or 0.0,
                    ttft_p99_ms=_mean([t.p99 for t in ttft if t is not None]),
                    decode_tps=_mean([s.decode_tps.mean for s in steps if s.decode_tps is not None]),
                )
            )
        kept = sum(len(v) for v in by_level.values())
        out.append(Series(run, variant, points, left_out=len(ladder) - kept))
    return out


def pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point matches or beats on both coordinates (higher is better on each), by x."""
    front = [p for p in points if not any(q != p and q[0] >= p[0] and q[1] >= p[1] for q in points)]
    return sorted(set(front))


def _scale(values: list[float], size: float, flip: bool) -> tuple:
    low, high = 0.0, max(values, default=1.0) * 1.08 or 1.0

    def at(v: float) -> float:
        share = (v - low) / (high - low)
        return MARGIN + (1 - share if flip else share) * size

    return at, high


def _chart(title: str, x_label: str, y_label: str, lines: list[tuple[str, str, list[tuple[float, float]]]], front=()):
    """An SVG line chart: ``lines`` of (name, colour, points); ``front`` drawn as a dashed line over them."""
    xs = [x for _, _, pts in lines for x, _ in pts]
    ys = [y for _, _, pts in lines for _, y in pts]
    plot_w, plot_h = WIDTH - 2 * MARGIN, HEIGHT - 2 * MARGIN
    sx, x_high = _scale(xs, plot_w, flip=False)
    sy, y_high = _scale(ys, plot_h, flip=True)
    e = html.escape
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT + 22 * len(lines)}" '
        f'role="img" aria-label="{e(title)}">',
        f'<text x="{MARGIN}" y="24" font-weight="bold">{e(title)}</text>',
        f'<line x1="{MARGIN}" y1="{HEIGHT - MARGIN}" x2="{WIDTH - MARGIN}" y2="{HEIGHT - MARGIN}" stroke="#333"/>',
        f'<line x1="{MARGIN}" y1="{MARGIN}" x2="{MARGIN}" y2="{HEIGHT - MARGIN}" stroke="#333"/>',
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 20}" text-anchor="middle">{e(x_label)}</text>',
        f'<text x="16" y="{HEIGHT / 2}" transform="rotate(-90 16 {HEIGHT / 2})" text-anchor="middle">{e(y_label)}'
        "</text>",
    ]
    for i in range(5):
        xv, yv = x_high * i / 4, y_high * i / 4
        parts.append(f'<text x="{sx(xv):.1f}" y="{HEIGHT - MARGIN + 16}" text-anchor="middle">{xv:.3g}</text>')
        parts.append(f'<text x="{MARGIN - 6}" y="{sy(yv) + 4:.1f}" text-anchor="end">{yv:.3g}</text>')
    for name, colour, pts in lines:
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        parts += [
            f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4" fill="{colour}"><title>{e(name)}: {x:.4g}, {y:.4g}'
            "</title></circle>"
            for x, y in pts
        ]
    if front:
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in front)
        parts.append(f'<polyline points="{path}" fill="none" stroke="#000" stroke-dasharray="6 4"/>')
    for i, (name, colour, _) in enumerate(lines):
        y = HEIGHT + 22 * i + 4
        parts.append(f'<rect x="{MARGIN}" y="{y - 10}" width="12" height="12" fill="{colour}"/>')
        parts.append(f'<text x="{MARGIN + 18}" y="{y}">{e(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def plot_page(runs: list[tuple[str, Summary]]) -> str:
    """The page for ``runs`` (name, summary), in the order given."""
    series = [s for name, summary in runs for s in series_of(summary, name)]
    colours = {s.name: COLOURS[i % len(COLOURS)] for i, s in enumerate(series)}
    latency = [
        (s.name, colours[s.name], [(p.output_tps, p.ttft_p99_ms) for p in s.points if p.ttft_p99_ms is not None])
        for s in series
    ]
    interactivity = [
        (s.name, colours[s.name], [(p.output_tps, p.decode_tps) for p in s.points if p.decode_tps is not None])
        for s in series
    ]
    front = pareto_front([pt for _, _, pts in interactivity for pt in pts])
    left_out = ", ".join(f"{html.escape(s.name)}: {s.left_out}" for s in series if s.left_out) or "none"
    rows = "".join(
        f"<tr><td>{html.escape(s.name)}</td><td>{p.level:g}</td><td>{p.output_tps:.1f}</td>"
        f"<td>{'' if p.ttft_p99_ms is None else f'{p.ttft_p99_ms:.1f}'}</td>"
        f"<td>{'' if p.decode_tps is None else f'{p.decode_tps:.1f}'}</td></tr>"
        for s in series
        for p in s.points
    )
    return "\n".join(
        [
            "<!doctype html>",
            '<html lang="en"><head><meta charset="utf-8"><title>locust-llm: runs compared</title>',
            "<style>body{font-family:sans-serif;margin:24px}svg text{font-size:12px}"
            "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}</style>",
            "</head><body>",
            f"<h1>{len(runs)} run(s), {len(series)} series</h1>",
            "<p>Clean steps only; a level measured more than once is the mean of its clean steps. Steps left out "
            f"(not clean): {left_out}.</p>",
            _chart(
                "Throughput vs latency",
                "aggregate output tok/s",
                "TTFT P99, ms (open loop: from the intended send)",
                latency,
            ),
            _chart(
                "Pareto: throughput vs interactivity (dashed: the frontier)",
                "aggregate output tok/s",
                "per-user decode tok/s (mean)",
                interactivity,
                front,
            ),
            "<table><tr><th>series</th><th>level</th><th>output tok/s</th><th>TTFT P99 ms</th>"
            f"<th>decode tok/s</th></tr>{rows}</table>",
            "</body></html>",
        ]
    )


def read_summary(run_dir: Path) -> Summary:
    """A run's summary.json, typed; ``FileNotFoundError`` when the run has none yet."""
    path = Path(run_dir) / layout.SUMMARY
    if not path.exists():
        raise FileNotFoundError(f"{path}: no summary; run `locust-llm report {run_dir}` first")
    return Summary.model_validate(layout.read_json(path))

"""Static inline SVG charts for the HTML report, drawn in Python.

Why SVG generated here, and not a JavaScript charting library inlined from an installed package (plotly,
Vega, Chart.js):

* **No JavaScript at all.** The report is one file that opens offline, from a mail attachment, a ticket or
  a locked-down viewer; with no script there is nothing to fail in the console, nothing for a Content
  Security Policy to block, and no code path through which a server-supplied string could run.
* **It prints.** SVG is vector markup in the document: the printed report shows exactly the charts on
  screen at any page size, which is what ends up attached to a capacity plan. Canvas/WebGL charts of JS
  libraries print as bitmaps, or blank when their script did not run.
* **Nothing to inline.** ``plotly.min.js`` alone is about 3.5 MB per report; these charts are a few KB each.
* **Testable.** The output is plain markup: tests parse it, a browser's DOM counts the ``<svg>`` elements,
  and every text label goes through :func:`markupsafe.escape` here (variant names come from the scenario
  and model names from the server, so they are untrusted).

The trade-off is no hover or zoom; the tables beside every chart carry the exact figures and CIs.

Helpers: :func:`line_chart` draws several series against a linear or log-2 x axis, with CI error bars or
bands, horizontal reference lines, labelled vertical markers (saturation, knee, crossover) and shaded
x spans (ladder steps of a time series, with the warm-up part lighter). Missing points (None / NaN) break
a line instead of failing; a chart with nothing to draw returns a visible "not measured" note.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeGuard, TypeVar

from markupsafe import Markup, escape

from ..fmt import is_number

__all__ = [
    "Chart",
    "HLine",
    "Series",
    "Span",
    "VLine",
    "line_chart",
    "nice_ticks",
    "not_measured",
    "tick_label",
    "variant_colors",
]

# Okabe-Ito: distinguishable with the common colour-vision deficiencies, and in greyscale print by dash.
PALETTE = ("#4d4d4d", "#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#8c6d31")


def variant_colors(names: list[str], baseline: str | None) -> dict[str, str]:
    """One color per variant, the baseline always the first (grey): the report's charts and the web UI's agree."""
    others = [n for n in names if n != baseline]
    colors = {name: PALETTE[1 + i % (len(PALETTE) - 1)] for i, name in enumerate(others)}
    if baseline in names:
        colors[baseline] = PALETTE[0]
    return colors


DASHES = ("", "6 3", "2 3", "8 3 2 3")
_P = TypeVar("_P", tuple[float, float], tuple[float, float, float])  # a point, or a point with its CI
FONT = 11
CHAR_W = 6.4  # rough width of one character at FONT px, for layout only


@dataclass
class Series:
    """One line. ``lo``/``hi`` (same length as ``x``) draw a CI as error bars, or as a band if ``band``."""

    name: str
    x: Sequence[float | None]
    y: Sequence[float | None]
    lo: Sequence[float | None] | None = None
    hi: Sequence[float | None] | None = None
    color: str = PALETTE[0]
    dash: str = ""
    band: bool = False
    points: bool = True
    labels: Sequence[str] | None = None  # text beside each point (e.g. the level on a trade-off curve)
    width: float = 1.8


@dataclass
class VLine:
    """A labelled vertical marker (saturation, knee, crossover)."""

    x: float
    label: str
    color: str = "#b00020"
    dash: str = "4 3"


@dataclass
class HLine:
    y: float
    label: str = ""
    color: str = "#777"
    dash: str = "3 3"


@dataclass
class Span:
    """A shaded x range: one ladder step of a time series. ``[x0, steady)`` is the warm-up (lighter)."""

    x0: float
    x1: float
    label: str = ""
    group: str = ""
    steady: float | None = None
    shade: str = "#dfe7f2"


@dataclass
class _Axis:
    lo: float
    hi: float
    log2: bool = False
    ticks: list[float] = field(default_factory=list)

    def frac(self, v: float) -> float:
        if self.log2:
            a, b, v = math.log2(self.lo), math.log2(self.hi), math.log2(v)
        else:
            a, b = self.lo, self.hi
        return 0.5 if b == a else (v - a) / (b - a)


def _t(text) -> str:
    """Escaped text for SVG content and attributes."""
    return str(escape(str(text)))


def tick_label(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.3g}M"
    if a >= 1e4:
        return f"{v / 1e3:.3g}k"
    if a >= 1000:
        return f"{v:,.0f}"
    if a < 0.01:
        return f"{v:.1e}"
    return f"{v:.4g}"


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round ticks that cover ``[lo, hi]`` (1, 2, 2.5, 5 x 10^k steps)."""
    if not (is_number(lo) and is_number(hi)):
        return [0.0, 1.0]
    if hi <= lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * 0.999)
    start = math.floor(lo / step + 1e-9) * step
    ticks: list[float] = []
    v = start
    while v < hi - 1e-9 * step or not ticks:
        ticks.append(round(v, 12))
        v += step
    ticks.append(round(v, 12))
    return ticks


def _x_axis(xs: list[float], log2: bool, ticks: Sequence[float] | None) -> _Axis:
    log2 = log2 and all(x > 0 for x in xs)
    if log2 and ticks:  # the whole ladder, even where this chart has no point
        xs = xs + [float(t) for t in ticks if is_number(t) and t > 0]
    lo, hi = min(xs), max(xs)
    if log2:
        if lo == hi:
            lo, hi = lo / 2, hi * 2
        tick_list = sorted({float(t) for t in (ticks or []) if is_number(t) and t > 0})
        if not tick_list:
            tick_list = [2.0**k for k in range(math.floor(math.log2(lo)), math.ceil(math.log2(hi)) + 1)]
        pad = (math.log2(hi) - math.log2(lo)) * 0.06
        return _Axis(
            2 ** (math.log2(lo) - pad),
            2 ** (math.log2(hi) + pad),
            True,
            [t for t in tick_list if lo <= t <= hi] or tick_list,
        )
    tick_list = sorted({float(t) for t in ticks if is_number(t)}) if ticks else nice_ticks(lo, hi, 8)
    if hi <= lo:
        lo, hi = lo - 1.0, hi + 1.0
    pad = (hi - lo) * 0.02
    lo, hi = lo - pad, hi + pad
    return _Axis(lo, hi, False, [t for t in tick_list if lo <= t <= hi])


def _y_axis(values: list[float], bounds: list[float], from_zero: bool, y_max: float | None) -> _Axis:
    """Covers the points, and their CIs unless a CI is far wider than the spread of the points (then clipped)."""
    lo, hi = min(values), max(values)
    margin = max(hi - lo, abs(hi), abs(lo)) * 0.75 or 1.0
    lo = min([lo] + [b for b in bounds if b >= lo - margin])
    hi = max([hi] + [b for b in bounds if b <= hi + margin])
    if any(b > hi for b in bounds):
        hi = max(hi, max(values) + margin * 0.5)
    if from_zero and lo >= 0:
        lo = 0.0
    if y_max is not None and is_number(y_max):
        hi = max(hi, y_max)
    elif hi > lo:
        hi += (hi - lo) * 0.04  # headroom: a point on the top edge is hard to read
    ticks = nice_ticks(lo, hi)
    return _Axis(ticks[0], ticks[-1], False, ticks)


def _segments(points: Sequence[_P | None]) -> list[list[_P]]:
    """The runs of consecutive points between missing ones."""
    out: list[list[_P]] = []
    cur: list[_P] = []
    for p in points:
        if p is None:
            if cur:
                out.append(cur)
            cur = []
        else:
            cur.append(p)
    if cur:
        out.append(cur)
    return out


def _path(seg: list[tuple[float, float]]) -> str:
    return "M" + " L".join(f"{x:.1f},{y:.1f}" for x, y in seg)


def not_measured(what: str, why: str = "") -> Markup:
    """The placeholder a chart becomes when it has nothing to draw."""
    text = f"{what}: not measured" + (f" ({why})" if why else "")
    return Markup('<div class="nodata">') + escape(text) + Markup("</div>")


@dataclass(frozen=True)
class Chart:
    """What a line chart shows besides its series: title and axis labels, the x scale (linear or log-2, ticks),
    the y range, reference lines, markers and shaded spans, its size, and why it is empty if nothing is finite."""

    title: str
    x_label: str
    y_label: str
    log2_x: bool = False
    x_ticks: Sequence[float] | None = None
    y_from_zero: bool = True
    y_max: float | None = None
    hlines: Sequence[HLine] = ()
    vlines: Sequence[VLine] = ()
    spans: Sequence[Span] = ()
    width: int = 560
    height: int = 300
    empty_note: str = ""


@dataclass
class _Plot:
    """The plot area in SVG coordinates and the two axes that map data onto it."""

    left: float
    top: float
    pw: float
    ph: float
    x_axis: _Axis
    y_axis: _Axis

    def px(self, x: float) -> float:
        return self.left + self.x_axis.frac(x) * self.pw

    def py(self, y: float) -> float:
        return self.top + (1 - self.y_axis.frac(y)) * self.ph

    def in_x(self, x: object) -> TypeGuard[float]:
        return is_number(x) and (not self.x_axis.log2 or x > 0)


_LegendRow = list[tuple[Series, float]]


def _legend_rows(series: Sequence[Series], width: int) -> list[_LegendRow]:
    """The named series in rows below the plot, wrapped to the chart's width."""
    rows: list[_LegendRow] = []
    row: _LegendRow = []
    used = 0.0
    for s in series:
        if not s.name:
            continue
        w = 30 + CHAR_W * len(s.name) + 14
        if row and used + w > width - 20:
            rows.append(row)
            row, used = [], 0.0
        row.append((s, w))
        used += w
    if row:
        rows.append(row)
    return rows


def _spans_svg(plot: _Plot, spans: Sequence[Span]) -> list[str]:
    """Shaded step spans (behind everything), their warm-up part lighter, labelled where the label fits."""
    out = []
    top, ph = plot.top, plot.ph
    for i, sp in enumerate(spans):
        if not (plot.in_x(sp.x0) and plot.in_x(sp.x1)):
            continue
        x0, x1 = plot.px(sp.x0), plot.px(sp.x1)
        fill = sp.shade if i % 2 == 0 else "#eef2f8"
        out.append(f'<rect x="{x0:.1f}" y="{top}" width="{max(x1 - x0, 0.5):.1f}" height="{ph}" fill="{_t(fill)}"/>')
        if sp.steady is not None and plot.in_x(sp.steady) and sp.x0 < sp.steady < sp.x1:
            xs_ = plot.px(sp.steady)
            out.append(
                f'<rect x="{x0:.1f}" y="{top}" width="{xs_ - x0:.1f}" height="{ph}" fill="#fff" fill-opacity="0.6"/>'
            )
        if sp.label and x1 - x0 >= CHAR_W * len(sp.label) + 2:
            out.append(
                f'<text x="{(x0 + x1) / 2:.1f}" y="{top + 11}" text-anchor="middle" font-size="9" '
                f'fill="#456">{_t(sp.label)}</text>'
            )
    return out


def _span_groups_svg(plot: _Plot, spans: Sequence[Span]) -> list[str]:
    """A bracket above the plot over the spans of each group (a variant's steps), its name shortened to fit."""
    extents: dict[str, list[float]] = {}
    for sp in spans:
        if sp.group and plot.in_x(sp.x0) and plot.in_x(sp.x1):
            e = extents.setdefault(sp.group, [plot.px(sp.x0), plot.px(sp.x1)])
            e[0], e[1] = min(e[0], plot.px(sp.x0)), max(e[1], plot.px(sp.x1))
    out = []
    top = plot.top
    for name, (a, b) in extents.items():
        label = name if (b - a) >= CHAR_W * len(name) else name[: max(1, int((b - a) / CHAR_W) - 1)] + "…"
        out.append(f'<line x1="{a:.1f}" x2="{b:.1f}" y1="{top - 4}" y2="{top - 4}" stroke="#456"/>')
        out.append(
            f'<text x="{(a + b) / 2:.1f}" y="{top - 7}" text-anchor="middle" font-size="10" '
            f'fill="#234">{_t(label)}</text>'
        )
    return out


def _axes_svg(plot: _Plot, x_label: str, y_label: str) -> list[str]:
    """Grid lines, tick labels, the plot's frame and the two axis titles."""
    out = []
    left, top, pw, ph = plot.left, plot.top, plot.pw, plot.ph
    for t in plot.y_axis.ticks:
        y = plot.py(t)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e3e3"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#333">{_t(tick_label(t))}</text>')
    for t in plot.x_axis.ticks:
        if not plot.in_x(t):
            continue
        x = plot.px(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + ph}" stroke="#eeeeee"/>')
        out.append(f'<text x="{x:.1f}" y="{top + ph + 15}" text-anchor="middle" fill="#333">{_t(tick_label(t))}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
    x_text = x_label + (" (log\u2082 scale)" if plot.x_axis.log2 else "")
    out.append(
        f'<text x="{left + pw / 2:.1f}" y="{top + ph + 32}" text-anchor="middle" fill="#222">{_t(x_text)}</text>'
    )
    out.append(
        f'<text transform="translate(13,{top + ph / 2:.1f}) rotate(-90)" text-anchor="middle" '
        f'fill="#222">{_t(y_label)}</text>'
    )
    return out


def _hlines_svg(plot: _Plot, hlines: Sequence[HLine]) -> list[str]:
    """Horizontal reference lines inside the y range, labelled at the right edge."""
    out = []
    for h in hlines:
        if not (is_number(h.y) and plot.y_axis.lo <= h.y <= plot.y_axis.hi):
            continue
        y = plot.py(h.y)
        out.append(
            f'<line x1="{plot.left}" x2="{plot.left + plot.pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="{_t(h.color)}" '
            f'stroke-dasharray="{_t(h.dash)}"/>'
        )
        if h.label:
            out.append(
                f'<text x="{plot.left + plot.pw - 4}" y="{y - 4:.1f}" text-anchor="end" font-size="10" '
                f'fill="{_t(h.color)}">{_t(h.label)}</text>'
            )
    return out


def _vlines_svg(plot: _Plot, vlines: Sequence[VLine]) -> list[str]:
    """Labelled vertical markers; labels of markers at the same x stack downwards instead of overlapping."""
    out = []
    top, ph = plot.top, plot.ph
    stack: dict[int, int] = {}
    for v in vlines:
        if not plot.in_x(v.x):
            continue
        x = plot.px(v.x)
        slot = stack.get(round(x), 0)
        stack[round(x)] = slot + 1
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + ph}" stroke="{_t(v.color)}" '
            f'stroke-width="1.3" stroke-dasharray="{_t(v.dash)}"/>'
        )
        anchor, dx = ("end", -3) if x > plot.left + plot.pw * 0.6 else ("start", 3)
        out.append(
            f'<text x="{x + dx:.1f}" y="{top + 12 + 12 * slot}" text-anchor="{anchor}" font-size="10" '
            f'fill="{_t(v.color)}" class="marker">{_t(v.label)}</text>'
        )
    return out


_CiPoint = tuple[float, float, float]


def _ci_band_svg(plot: _Plot, ci_points: list[_CiPoint | None], color: str) -> list[str]:
    """A CI as a translucent band, clamped to the y range, broken where a point is missing."""

    def clamp(v: float) -> float:
        return min(max(v, plot.y_axis.lo), plot.y_axis.hi)

    out = []
    for seg in _segments(ci_points):
        upper = [(plot.px(x), plot.py(clamp(hi))) for x, _lo, hi in seg]
        lower = [(plot.px(x), plot.py(clamp(lo))) for x, lo, _hi in reversed(seg)]
        poly = " ".join(f"{a:.1f},{b:.1f}" for a, b in upper + lower)
        out.append(f'<polygon points="{poly}" fill="{color}" fill-opacity="0.15" stroke="none"/>')
    return out


def _ci_bars_svg(plot: _Plot, ci_points: list[_CiPoint | None], color: str) -> list[str]:
    """A CI as an error bar per point; a bound beyond the y range gets an arrow and its value instead of a cap."""
    out = []
    for b in ci_points:
        if b is None:
            continue
        x = plot.px(b[0])
        lo_c, hi_c = max(b[1], plot.y_axis.lo), min(b[2], plot.y_axis.hi)
        y0, y1 = plot.py(lo_c), plot.py(hi_c)
        d = f"M{x:.1f},{y0:.1f} L{x:.1f},{y1:.1f}"
        d += f" M{x - 4:.1f},{y0:.1f} L{x + 4:.1f},{y0:.1f}" if lo_c == b[1] else ""
        d += f" M{x - 4:.1f},{y1:.1f} L{x + 4:.1f},{y1:.1f}" if hi_c == b[2] else ""
        out.append(f'<path d="{d}" stroke="{color}" stroke-width="1.2" fill="none" class="ci"/>')
        for clipped, edge, sign in ((hi_c < b[2], y1, 1), (lo_c > b[1], y0, -1)):
            if clipped:  # the CI runs off the chart: an arrow and the bound's value
                out.append(
                    f'<path d="M{x - 4:.1f},{edge + 6 * sign:.1f} L{x:.1f},{edge:.1f} '
                    f'L{x + 4:.1f},{edge + 6 * sign:.1f}" stroke="{color}" fill="none"/>'
                )
                value = b[2] if sign > 0 else b[1]
                anchor, dx = ("end", -6) if x > plot.left + plot.pw * 0.7 else ("start", 6)
                out.append(
                    f'<text x="{x + dx:.1f}" y="{edge + 10 * sign:.1f}" text-anchor="{anchor}" '
                    f'font-size="9" fill="{color}">CI to {_t(tick_label(value))}</text>'
                )
    return out


def _series_svg(plot: _Plot, s: Series) -> list[str]:
    """One series: its CI (band or bars), its line broken at missing points, its points and point labels."""
    out = []
    pts = [
        (plot.px(float(x)), plot.py(float(y))) if plot.in_x(x) and is_number(y) else None
        for x, y in zip(s.x, s.y, strict=False)
    ]
    color, dash = _t(s.color), _t(s.dash)
    if s.lo is not None and s.hi is not None:
        ci_points = [
            (float(x), float(lo), float(hi)) if plot.in_x(x) and is_number(lo) and is_number(hi) else None
            for x, lo, hi in zip(s.x, s.lo, s.hi, strict=False)
        ]
        out += _ci_band_svg(plot, ci_points, color) if s.band else _ci_bars_svg(plot, ci_points, color)
    for seg in _segments(pts):
        if len(seg) > 1:
            out.append(
                f'<path d="{_path(seg)}" fill="none" stroke="{color}" stroke-width="{s.width}" '
                f'stroke-dasharray="{dash}" stroke-linejoin="round"/>'
            )
    if s.points:
        out += [f'<circle cx="{p[0]:.1f}" cy="{p[1]:.1f}" r="3" fill="{color}"/>' for p in pts if p is not None]
    for p, label in zip(pts, s.labels or [], strict=False):
        if p is not None and label:
            out.append(f'<text x="{p[0] + 5:.1f}" y="{p[1] - 5:.1f}" font-size="9" fill="{color}">{_t(label)}</text>')
    return out


def _legend_svg(plot: _Plot, rows: list[_LegendRow]) -> list[str]:
    """The legend below the x axis title: a line sample (with a point if the series has points) and the name."""
    out = []
    y = plot.top + plot.ph + 50
    for row in rows:
        x = plot.left
        for s, w in row:
            out.append(
                f'<line x1="{x}" x2="{x + 24}" y1="{y - 4}" y2="{y - 4}" stroke="{_t(s.color)}" '
                f'stroke-width="2" stroke-dasharray="{_t(s.dash)}"/>'
            )
            if s.points:
                out.append(f'<circle cx="{x + 12}" cy="{y - 4}" r="2.5" fill="{_t(s.color)}"/>')
            out.append(f'<text x="{x + 30}" y="{y}" fill="#222">{_t(s.name)}</text>')
            x += w
        y += 18
    return out


def _axes_for(series: Sequence[Series], chart: Chart) -> tuple[_Axis, _Axis] | None:
    """The x and y axes that cover every finite point, CI, reference line, marker and span; None if no point."""
    plotted = [(x, y) for s in series for x, y in zip(s.x, s.y, strict=False) if is_number(x) and is_number(y)]
    xs = [float(x) for x, _ in plotted]
    if chart.log2_x:
        xs = [x for x in xs if x > 0] or xs
    ys = [float(y) for _, y in plotted]
    if not xs or not ys:
        return None
    bounds = [float(v) for s in series for bound in (s.lo, s.hi) if bound is not None for v in bound if is_number(v)]
    ys.extend(h.y for h in chart.hlines if is_number(h.y))
    span_xs = [v for sp in chart.spans for v in (sp.x0, sp.x1) if is_number(v)]
    marker_xs = [v.x for v in chart.vlines if is_number(v.x) and (not chart.log2_x or v.x > 0)]
    x_axis = _x_axis(xs + span_xs + marker_xs, chart.log2_x, chart.x_ticks)
    return x_axis, _y_axis(ys, bounds, chart.y_from_zero, chart.y_max)


def line_chart(series: Sequence[Series], chart: Chart) -> Markup:
    """An SVG line chart; every string is escaped. Returns :func:`not_measured` if no point is finite."""
    axes = _axes_for(series, chart)
    if axes is None:
        return not_measured(chart.title, chart.empty_note)
    rows = _legend_rows(series, chart.width)
    groups = bool(chart.spans and any(sp.group for sp in chart.spans))
    left, right = 58, 14
    top = 12 + (16 if groups else 0) + (6 if chart.vlines else 0)
    bottom = 40 + 18 * len(rows)
    width, height = chart.width, chart.height + 18 * max(0, len(rows) - 1)
    plot = _Plot(left, top, width - left - right, height - top - bottom, *axes)
    out: list[str] = [
        (
            f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" role="img" font-size="{FONT}">'
        ),
        f"<title>{_t(chart.title)}</title>",
        f'<rect x="{left}" y="{top}" width="{plot.pw}" height="{plot.ph}" fill="#fff" stroke="none"/>',
    ]
    out += _spans_svg(plot, chart.spans)
    if groups:
        out += _span_groups_svg(plot, chart.spans)
    out += _axes_svg(plot, chart.x_label, chart.y_label)
    out += _hlines_svg(plot, chart.hlines)
    out += _vlines_svg(plot, chart.vlines)
    for s in series:
        out += _series_svg(plot, s)
    out += _legend_svg(plot, rows)
    out.append("</svg>")
    return Markup("\n".join(out))

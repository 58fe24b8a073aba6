"""The soak's part of the report: the table of windows, a trend chart per figure (window values and the fitted
line), the trends with their CIs, the gates; and the lines the console and ``summary.md`` print. Presents
``summary.soak`` only."""

from __future__ import annotations

from ..analysis.documents.soak import SoakSummary, SoakTrend
from ..fmt import lvl, num, pct
from . import charts
from .charts import PALETTE, Series
from .view import RunView, unit_of

__all__ = ["soak_lines", "soak_section", "trend_text"]

# chart -> (title, y label, figures drawn, caption)
CHARTS = {
    "ttft": ("TTFT over the soak", "ms", ("ttft_p50_ms", "ttft_p99_ms"), "TTFT P50 and P99 per window"),
    "tpot": ("TPOT over the soak", "ms", ("tpot_p50_ms", "tpot_p99_ms"), "TPOT P50 and P99 per window"),
    "throughput": ("Throughput over the soak", "output tok/s", ("output_tps",), "Aggregate output tok/s per window"),
    "errors": (
        "Errors over the soak",
        "share of requests",
        ("error_rate", "timeout_rate"),
        "Error rate and timeout rate per window",
    ),
    "memory": ("Server memory over the soak", "MiB", ("rss_mib",), "The server's resident memory, mean per window"),
    "gpu_memory": ("GPU memory over the soak", "MiB", ("gpu_mem_mib",), "GPU memory used, mean per window"),
    "kv": ("KV-cache use over the soak", "ratio", ("kv_cache_usage",), "KV-cache use, mean per window"),
    "gpu_clock": (
        "GPU SM clock over the soak",
        "MHz",
        ("sm_clock_mhz", "sm_clock_min_mhz"),
        "SM clock per window: mean and lowest sample",
    ),
    "gpu_temp": ("GPU temperature over the soak", "degrees C", ("temp_max_c",), "Hottest sample per window"),
}
NAMES = {
    "ttft_p50_ms": "P50",
    "ttft_p99_ms": "P99",
    "tpot_p50_ms": "P50",
    "tpot_p99_ms": "P99",
    "output_tps": "tok/s",
    "error_rate": "errors",
    "timeout_rate": "timeouts",
    "rss_mib": "resident (RSS)",
    "gpu_mem_mib": "GPU memory",
    "kv_cache_usage": "KV-cache use",
    "sm_clock_mhz": "mean",
    "sm_clock_min_mhz": "lowest",
    "temp_max_c": "hottest",
}


def _signed(value) -> str | None:
    return None if value is None else f"{value:+.3g}"


def _minutes(soak: SoakSummary) -> list[float | None]:
    return [
        (w.start_s + w.end_s) / 120.0 if w.start_s is not None and w.end_s is not None else None for w in soak.windows
    ]


def _fit_line(trend: SoakTrend, color: str) -> Series | None:
    """The fitted line from the first to the last fitted window (dashed)."""
    if trend.slope_per_hour is None or trend.reference is None or trend.from_h is None or trend.to_h is None:
        return None
    end = trend.reference + trend.slope_per_hour * (trend.to_h - trend.from_h)
    return Series(
        f"{NAMES[trend.figure]} trend",
        [60 * trend.from_h, 60 * trend.to_h],
        [trend.reference, end],
        color=color,
        dash="6 3",
        points=False,
    )


def charts_of(soak: SoakSummary) -> list[dict]:
    x = _minutes(soak)
    trends = {t.figure: t for t in soak.trends}
    out = []
    for key, (title, unit, figures, caption) in CHARTS.items():
        series = []
        for i, figure in enumerate(figures):
            values = [getattr(w, figure) for w in soak.windows]
            if all(v is None for v in values):
                continue
            color = PALETTE[(i + 1) % len(PALETTE)]
            series.append(Series(NAMES[figure], x, values, color=color))
            line = _fit_line(trends[figure], color) if figure in trends else None
            if line is not None:
                series.append(line)
        if not series:
            continue
        # errors: at least 0-1% tall, so a soak without errors shows a flat line at zero
        svg = charts.line_chart(
            series,
            charts.Chart(
                title=title,
                x_label="minutes since the first window began",
                y_label=unit,
                y_max=0.01 if key == "errors" else None,
            ),
        )
        out.append(
            {
                "title": title,
                "svg": svg,
                "caption": f"{caption} at its midpoint; dashed: the least-squares trend over the fitted windows.",
            }
        )
    return out


def _interval(ci, scale: float = 1.0) -> str:
    return f"{_signed(scale * ci[0])} to {_signed(scale * ci[1])}" if ci else "n/m"


def _trend_row(trend: SoakTrend) -> dict:
    """Change per hour in the figure's unit (a ratio in percentage points), and relative to its first level."""
    ratio = trend.unit == "ratio"
    scale, unit = (100.0, "points") if ratio else (1.0, trend.unit)
    slope = _signed(scale * trend.slope_per_hour) if trend.slope_per_hour is not None else None
    return {
        "label": trend.label,
        "n": trend.n,
        "reference": pct(trend.reference, 2) if ratio else f"{num(trend.reference) or 'n/m'} {trend.unit}",
        "change": f"{slope or 'n/m'} {unit}/h ({_interval(trend.ci95, scale)})",
        "relative": None
        if ratio or trend.pct_per_hour is None
        else f"{_signed(trend.pct_per_hour)}%/h ({_interval(trend.pct_ci95)})",
    }


def soak_section(view: RunView) -> dict | None:
    """The soak's section of the report; None for a ladder run."""
    soak = view.summary.soak
    if soak is None:
        return None
    rows = [
        {
            "window": w.window,
            "span": f"{num(w.start_s / 60)}\u2013{num(w.end_s / 60)}"
            if w.start_s is not None and w.end_s is not None
            else None,
            "status": w.status,
            "complete": w.complete,
            "in_trend": w.in_trend,
            "requests": w.requests,
            "errors": pct(w.error_rate, 2),
            "timeouts": pct(w.timeout_rate, 2),
            "ttft50": num(w.ttft_p50_ms),
            "ttft99": num(w.ttft_p99_ms),
            "cached": pct(w.cached_fraction),
            "tpot50": num(w.tpot_p50_ms),
            "tpot99": num(w.tpot_p99_ms),
            "tps": num(w.output_tps),
            "rss": num(w.rss_mib),
            "gpu_mem": num(w.gpu_mem_mib),
            "kv": pct(w.kv_cache_usage),
            "clock": num(w.sm_clock_mhz),
            "temp": num(w.temp_max_c),
        }
        for w in soak.windows
    ]
    gpu = soak.gpu
    gpu_text = None
    if gpu is not None:
        gpu_text = (
            f"SM clock {num(gpu.sm_clock_min_mhz)}\u2013{num(gpu.sm_clock_max_mhz)} MHz, temperature "
            f"{num(gpu.temp_min_c) or 'n/m'}\u2013{num(gpu.temp_max_c) or 'n/m'} \u00b0C; slowest window "
            f"{num(gpu.clock_drop_pct) or 'n/m'}% below the fastest: "
            + ("throttling suspected" if gpu.throttling else "no throttling seen")
            + f" ({gpu.note})"
        )
    return {
        "headline": headline(soak),
        "method": soak.method,
        "rows": rows,
        "trends": [_trend_row(t) for t in soak.trends],
        "checks": soak.checks,
        "gpu": gpu_text,
        "notes": soak.notes,
        "charts": charts_of(soak),
        "conditions": view.conditions_line(soak.variant),
    }


def _duration(seconds: float) -> str:
    """Seconds under ten minutes, minutes under two hours, else hours."""
    if seconds < 600:
        return f"{num(seconds)} s"
    return f"{num(seconds / 60)} min" if seconds < 7200 else f"{num(seconds / 3600)} h"


def headline(soak: SoakSummary) -> str:
    unit = unit_of(soak.mode, plural=soak.level != 1)
    done = sum(1 for w in soak.windows if w.complete)
    state = "complete" if soak.complete else f"{done} of {soak.windows_planned} windows finished"
    total = sum(w.requests for w in soak.windows)
    used = "" if soak.requests == total else f" ({soak.requests} in the windows the trends use)"
    return (
        f"{soak.variant} held at {lvl(soak.level)} {unit} for {_duration(soak.measured_s)} of "
        f"{_duration(soak.duration_s)} in windows of {_duration(soak.window_s)} ({state}); "
        f"{total} requests{used}, error rate {pct(soak.error_rate, 2) or 'n/m'}; {gates_text(soak)}"
    )


def gates_text(soak: SoakSummary) -> str:
    held = sum(c.ok and c.judged for c in soak.checks)
    unjudged = sum(not c.judged for c in soak.checks)
    failed = len(soak.checks) - held - unjudged
    if not failed and not unjudged:
        return "every soak gate holds"
    return f"soak gates: {held} hold, {failed} failed, {unjudged} not judged"


def trend_text(trend: SoakTrend) -> str:
    """A trend in its most telling unit: percent per hour for latency and throughput, MiB per hour for memory,
    percentage points per hour for a ratio (KV-cache use, error rate)."""
    row = _trend_row(trend)
    return (row["relative"] if trend.unit not in ("ratio", "MiB") and row["relative"] else row["change"]).replace(
        "(", "(95% CI ", 1
    )


def soak_lines(summary, checks: bool = True) -> list[str]:
    """Plain-text lines for ``summary.md`` (every check) and the console (``checks=False``: the headline counts
    them, and the failed ones are the verdict's reasons printed below); the caller escapes for Markdown."""
    soak = summary.soak
    if soak is None:
        return []
    lines = [f"soak: {headline(soak)}"]
    gated = {c.figure for c in soak.checks}
    lines += [
        f"soak trend {t.label}: {trend_text(t)} over {t.n} windows"
        for t in soak.trends
        if t.figure not in gated and t.figure != "error_rate"
    ]
    if soak.gpu is not None:
        lines.append(
            f"soak GPU: SM clock {num(soak.gpu.sm_clock_min_mhz)}-{num(soak.gpu.sm_clock_max_mhz)} MHz, "
            f"up to {num(soak.gpu.temp_max_c) or 'n/m'} C, throttling "
            + ("suspected" if soak.gpu.throttling else "not seen")
        )
    if checks:
        lines += [f"soak gate{'' if not c.judged else ' ok' if c.ok else ' FAILED'}: {c.text}" for c in soak.checks]
    return lines

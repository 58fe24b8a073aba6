"""Telemetry and client samples over the run's time, ready to draw: rates from counters (one reset rule,
``server_metrics.counter_increments``), gauges per variant, the ladder steps as spans. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..rundir.load import RunData
from ..rundir.telemetry_meta import TelemetryMeta
from .server_metrics import counter_increments

__all__ = ["Panel", "Series", "StepSpan", "Timeline", "build_timeline", "downsample"]

MAX_POINTS = 600
# Gauges summed over their series at one instant (per-GPU memory and power add up); the others are averaged.
SUMMED = ("gpu_mem_used_mib", "gpu_power_w")
GAUGE_PANELS = [
    ("gpu_util", "GPU utilisation", "ratio (0\u20131)", 1.0),
    ("gpu_mem_used_mib", "GPU memory used", "MiB", None),
    ("gpu_power_w", "GPU power", "W", None),
    ("kv_cache_usage", "KV-cache usage", "ratio (0\u20131)", 1.0),
]


@dataclass
class Series:
    name: str
    x: list[float]
    y: list[float]
    variant: str | None = None  # colour key; None for client processes
    dashed: bool = False


@dataclass
class Panel:
    key: str
    title: str
    unit: str
    caption: str
    series: list[Series]
    y_max: float | None = None


@dataclass
class StepSpan:
    start: float
    end: float
    steady: float | None
    level: float
    variant: str


@dataclass
class Timeline:
    """Seconds since ``t0`` (the run's first step) on every x axis."""

    t0: float | None
    spans: list[StepSpan] = field(default_factory=list)
    panels: list[Panel] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be drawn, and why
    has_telemetry: bool = False
    source_notes: list[str] = field(default_factory=list)  # what the telemetry sources said (no GPU, errors)


def downsample(x, y, max_points: int = MAX_POINTS) -> tuple[list[float], list[float]]:
    """Bucket means, so that an hours-long 1 s series stays a few KB to draw."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size <= max_points:
        return x.tolist(), y.tolist()
    size = math.ceil(x.size / max_points)
    buckets = np.arange(x.size) // size
    xs = np.bincount(buckets, weights=x) / np.bincount(buckets)
    finite = np.isfinite(y)
    counts = np.bincount(buckets[finite], minlength=buckets[-1] + 1)
    sums = np.bincount(buckets[finite], weights=y[finite], minlength=buckets[-1] + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ys = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return xs.tolist(), ys.tolist()


def _gauge(frame: pd.DataFrame, metric: str, variants: list[str], t0: float) -> list[Series]:
    sub = frame[frame["metric"] == metric]
    how = "sum" if metric in SUMMED else "mean"
    out = []
    for name in variants:
        part = sub[sub["variant"] == name]
        if len(part):
            g = part.groupby("t")["value"].agg(how).sort_index()
            x, y = downsample(g.index.to_numpy() - t0, g.to_numpy())
            out.append(Series(name, x, y, variant=name))
    return out


def _counter_rates(frame: pd.DataFrame, metric: str, variants: list[str]) -> dict[str, tuple]:
    """Per variant: interval midpoints, increments and interval lengths of an unlabelled counter."""
    sub = frame[(frame["metric"] == metric) & (frame["labels"].isin(["{}", ""]) | frame["labels"].isna())]
    out = {}
    for name in variants:
        g = sub[sub["variant"] == name].groupby("t")["value"].sum().sort_index()
        if len(g) >= 2:
            t = g.index.to_numpy(dtype=float)
            out[name] = ((t[1:] + t[:-1]) / 2, counter_increments(g.to_numpy()), np.diff(t))
    return out


def source_notes(meta: TelemetryMeta) -> list[str]:
    notes = [note.message for note in meta.notes]
    for attachment in meta.attachments:
        notes += [f"{attachment.variant}: {err}" for err in attachment.errors[:5]]
    return notes


def _acceptance_panel(frame: pd.DataFrame, variants: list[str], t0: float) -> Panel | None:
    """Accepted over drafted tokens per polling interval; None if no interval drafted any."""
    accepted = _counter_rates(frame, "spec_accepted_tokens", variants)
    drafted = _counter_rates(frame, "spec_draft_tokens", variants)
    series = []
    for name, (t, acc, _) in accepted.items():
        if name not in drafted or len(drafted[name][1]) != len(acc):
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.where(drafted[name][1] > 0, acc / drafted[name][1], np.nan)
        if np.isfinite(rate).any():
            x, y = downsample(t - t0, rate)
            series.append(Series(name, x, y, variant=name))
    if not series:
        return None
    return Panel(
        "acceptance",
        "Acceptance rate over time",
        "accepted / drafted",
        "Draft acceptance per polling interval from the server's counters.",
        series,
        1.0,
    )


def build_timeline(run: RunData, variants: list[str]) -> Timeline:
    """``variants`` in display order (baseline first)."""
    frame, client = run.telemetry, run.client
    starts = [s.t_start for s in run.steps]
    starts = [t for t in starts if math.isfinite(t)]
    t0 = min(starts) if starts else None
    if t0 is None:
        candidates = [float(df["t"].min()) for df in (frame, client) if len(df) and "t" in df]
        t0 = min(candidates) if candidates else None
    timeline = Timeline(t0, has_telemetry=bool(len(frame)), source_notes=source_notes(run.telemetry_meta))
    if t0 is None:
        timeline.notes.append("nothing was recorded over time")
        return timeline
    for s in run.steps:
        start, end, steady = s.t_start, s.t_end, s.t_steady
        if math.isfinite(start) and math.isfinite(end):
            timeline.spans.append(
                StepSpan(
                    start - t0,
                    end - t0,
                    steady - t0 if math.isfinite(steady) else None,
                    float(s.level),
                    s.variant,
                )
            )
    panels = timeline.panels
    if len(frame):
        frame = frame[np.isfinite(frame["value"].astype(float))]
        present = set(frame["metric"].unique())
        if "requests_running" in present:
            series = _gauge(frame, "requests_running", variants, t0)
            for waiting in _gauge(frame, "requests_waiting", variants, t0) if "requests_waiting" in present else []:
                waiting.name, waiting.dashed = f"{waiting.name} waiting", True
                series.append(waiting)
            panels.append(
                Panel(
                    "requests",
                    "Requests on the server",
                    "requests",
                    "Requests running (solid) and waiting (dashed) as the server reports them; shaded "
                    "bands are the ladder steps (lighter part = warm-up), labelled with their level.",
                    series,
                )
            )
        if "generation_tokens" in present:
            series = []
            for name, (t, dv, dt) in _counter_rates(frame, "generation_tokens", variants).items():
                x, y = downsample(t - t0, dv / dt)
                series.append(Series(name, x, y, variant=name))
            panels.append(
                Panel(
                    "generation",
                    "Server generation rate",
                    "tokens/s",
                    "Generated tokens per second from the server's own counter, per polling interval "
                    "(a counter that drops is a restart, counted from zero).",
                    series,
                )
            )
        if {"spec_accepted_tokens", "spec_draft_tokens"} <= present:
            acceptance = _acceptance_panel(frame, variants, t0)
            if acceptance is not None:
                panels.append(acceptance)
            else:
                timeline.notes.append("acceptance over time: not measured (no draft tokens in any interval)")
        for metric, title, unit, y_max in GAUGE_PANELS:
            if metric in present:
                panels.append(
                    Panel(
                        metric,
                        title,
                        unit,
                        f"{title} ({metric}) as polled, summed or averaged over GPUs.",
                        _gauge(frame, metric, variants, t0),
                        y_max,
                    )
                )
        if "process_cpu_cores" in present:
            panels.append(
                Panel(
                    "process_cpu",
                    "Server process CPU",
                    "cores",
                    "CPU time of the server process per second of wall time (1.0 = one core busy).",
                    _gauge(frame, "process_cpu_cores", variants, t0),
                )
            )
        if "process_rss_mib" in present:
            panels.append(
                Panel(
                    "process_rss",
                    "Server process memory",
                    "RSS (MiB)",
                    "Resident memory of the server process.",
                    _gauge(frame, "process_rss_mib", variants, t0),
                )
            )
        if not present & {"gpu_util", "gpu_mem_used_mib"}:
            why = run.telemetry_meta.gpu if run.telemetry_meta.gpu is not None else "no GPU source"
            timeline.notes.append(f"GPU utilisation and memory: not measured ({why})")
    else:
        timeline.notes.append("server telemetry over time: not measured (no telemetry in the run directory)")
    if len(client) and {"t", "cpu_percent", "worker"} <= set(client.columns):
        series = []
        for worker, part in client.sort_values("t").groupby("worker"):
            x, y = downsample(part["t"].to_numpy() - t0, part["cpu_percent"].to_numpy())
            series.append(Series(f"worker {worker}", x, y))
        panels.append(
            Panel(
                "client_cpu",
                "Load generator CPU",
                "% of one core",
                "CPU of each Locust process (gevent runs on one core: above 90% it stamps tokens late).",
                series,
            )
        )
    else:
        timeline.notes.append("load generator CPU over time: not measured (no client samples)")
    return timeline

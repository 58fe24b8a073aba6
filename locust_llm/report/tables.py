"""The ladder tables per variant and the speed-up tables per comparison, from the ``RunView``."""

from __future__ import annotations

from dataclasses import dataclass

from ..analysis.documents.summary import StepFigures
from ..analysis.speedup import speedup_state
from ..fmt import ci_text, is_number, lvl, num, pct, times
from .prompt_cache import cache_cell
from .view import RunView

__all__ = ["PERCENTILES", "SPEEDUP_METRICS", "SpeedupCell", "SpeedupRow", "StepRow", "speedups", "variant_tables"]

PERCENTILES = ("p50", "p95", "p99")
# A P99 from fewer requests is the sample's maximum or next to it (its bootstrap interval is capped there): not shown.
MIN_P99_N = 100
SPEEDUP_METRICS = [
    ("output_tps_speedup", "aggregate output tok/s"),
    ("decode_tps_speedup", "decode tok/s (mean)"),
    ("tpot_p50_speedup", "TPOT P50"),
    ("tpot_p95_speedup", "TPOT P95"),
    ("ttft_p95_speedup", "TTFT P95"),
]
OPEN_LOOP_SPEEDUPS = [("e2e_sched_p95_speedup", "E2E_sched P95 (all requests)"), ("goodput_speedup", "goodput")]
LATENCY_SPEEDUPS = {"tpot_p50_speedup", "tpot_p95_speedup", "ttft_p95_speedup", "e2e_sched_p95_speedup"}


def percentile_cell(fig, p: str) -> str | None:
    """A percentile as shown: a P99 of fewer than ``MIN_P99_N`` values says so instead."""
    if p == "p99" and fig.n and fig.n < MIN_P99_N:
        return f"n = {fig.n}: too few for P99"
    return num(getattr(fig, p))


def latency_metrics(open_loop: bool) -> list[tuple[str, str]]:
    """Over successful requests."""
    metrics = [("ttft_ms", "TTFT")]
    if open_loop:
        metrics.append(("ttft_sched_ms", "TTFT_sched"))
    metrics += [("tpot_ms", "TPOT"), ("itl_ms", "ITL"), ("e2e_ms", "E2E")]
    if open_loop:
        metrics.append(("e2e_sched_ms", "E2E_sched"))
    return metrics


def all_request_metrics(open_loop: bool) -> list[tuple[str, str]]:
    """Over all requests, failures at the time they failed: what the gates judge."""
    if open_loop:
        return [("ttft_sched_all_ms", "TTFT_sched"), ("tpot_all_ms", "TPOT"), ("e2e_sched_all_ms", "E2E_sched")]
    return [("ttft_all_ms", "TTFT"), ("tpot_all_ms", "TPOT"), ("e2e_all_ms", "E2E")]


@dataclass(frozen=True)
class StepRow:
    """One step in a variant's three ladder tables (latency of successful requests, of all requests; throughput,
    errors and acceptance), each figure as the table shows it (None: not measured)."""

    level: str
    marks: list[tuple[str, str, str]]  # badges: label, CSS class, why
    cache: dict  # the prompt-cache cell: value, why, flag
    requests: int
    errors: int
    error_rate: str | None
    errors_by_class: str
    lat: dict[str, list[str | None]]  # per latency figure: P50, P95, P99
    decode_p50: str | None
    decode_mean: str | None
    output_tps: str | None
    output_tps_ci: str | None
    request_rate: str | None
    goodput: str | None
    achieved: str | None  # open loop only
    acc_server: str | None
    acc_server_why: str
    acc_len: str | None
    acc_client: str | None
    tokens_per_chunk: str | None
    speedup: str | None
    speedup_ci: str | None
    tokens: int
    itl_approximate: str | None
    sources: str


@dataclass(frozen=True)
class SpeedupCell:
    """One speed-up of a level: its value and CI as text, its state (better / worse / unclear), whether it is the
    comparison's headline, and the prompt-cache flag a latency speed-up carries."""

    value: str | None = None
    ci: str | None = None
    state: str = "unclear"
    headline: bool = False
    flag: str | None = None


@dataclass(frozen=True)
class SpeedupRow:
    """One level of a comparison's speed-up table."""

    level: str
    cells: list[SpeedupCell]
    crossover: bool
    cache: str | None
    cache_flag: str | None


def _marks(step: StepFigures, saturation: float | None, knee: float | None) -> list[tuple[str, str, str]]:
    marks = []
    if is_number(saturation) and step.level == saturation:
        marks.append(("saturation", "mark-sat", "throughput stops growing beyond this level"))
    if is_number(knee) and step.level == knee:
        marks.append(("knee", "mark-knee", "latency grows faster than load beyond this level"))
    if step.steady is False:
        marks.append(("unsteady", "mark-warn", "metric drifted within the steady window"))
    elif step.status == "too-noisy":
        marks.append(("too noisy", "mark-warn", "too noisy to tell steady from drifting within +-10%"))
    if step.client_valid is False:
        reasons = "; ".join(step.client_validity.reasons)
        marks.append(("client-invalid", "mark-bad", reasons or "client was a bottleneck"))
    elif step.client_validity.latency_valid is False:
        reasons = "; ".join(step.client_validity.latency_reasons)
        marks.append(("client lag", "mark-warn", f"latency figures marked, throughput valid: {reasons}"))
    if step.prompt_cache is not None and step.prompt_cache.flag:
        marks.append(("prompt cache", "mark-warn", step.prompt_cache.flag))
    if not step.requests:
        marks.append(("no requests", "mark-bad", "no request was sent in the steady window"))
    elif step.errors and step.errors == step.requests:
        marks.append(("all failed", "mark-bad", "every request of this step failed"))
    return marks


def variant_tables(view: RunView) -> list[dict]:
    out = []
    speed_by = {c.variant: {s.level: s for s in c.steps} for c in view.comparisons}
    open_loop = view.mode == "open"
    metrics = latency_metrics(open_loop)
    all_metrics = all_request_metrics(open_loop)
    for name in view.names:
        entry = view.variants.get(name)
        sat = entry.saturation_level if entry else None
        knee = entry.knee_level if entry else None
        rows: list[StepRow] = []
        for s in view.steps_of(name):
            lat = {}
            for key, _label in metrics + all_metrics:
                fig = getattr(s, key)
                lat[key] = [percentile_cell(fig, p) if fig else None for p in PERCENTILES]
            acc = s.acceptance
            server_acc = (acc.server if acc else None) or (s.server.acceptance if s.server else None)
            client_acc = (acc.client if acc else None) or s.acceptance_client
            tpc = (acc.tokens_per_chunk if acc else None) or s.tokens_per_chunk
            missing = {m.figure: m.reason for m in s.server.missing} if s.server else {}
            speed = speed_by.get(name, {}).get(s.level)
            out_speed = speed.output_tps_speedup if speed else None
            decode = s.decode_tps
            rows.append(
                StepRow(
                    level=lvl(s.level),
                    marks=_marks(s, sat, knee),
                    cache=cache_cell(s),
                    requests=s.requests,
                    errors=s.errors,
                    error_rate=pct(s.error_rate),
                    errors_by_class=", ".join(f"{k}: {v}" for k, v in s.errors_by_class.items()),
                    lat=lat,
                    decode_p50=num(decode.p50) if decode else None,
                    decode_mean=num(decode.mean) if decode else None,
                    output_tps=num(s.output_tps),
                    output_tps_ci=ci_text(s.output_tps_ci95),
                    request_rate=num(s.request_rate),
                    goodput=num(s.goodput_rps),
                    achieved=num(s.achieved_rate) if open_loop else None,
                    acc_server=pct(server_acc.rate) if server_acc else None,
                    acc_server_why=missing.get("acceptance.rate")
                    or ("no telemetry" if not s.server else "not measured"),
                    acc_len=num(server_acc.mean_length) if server_acc else None,
                    acc_client=pct(client_acc.rate) if client_acc else None,
                    tokens_per_chunk=num(tpc.value) if tpc else None,
                    speedup=times(out_speed.value) if out_speed else None,
                    speedup_ci=ci_text(out_speed.ci95, times) if out_speed else None,
                    tokens=s.output_tokens,
                    itl_approximate=pct(s.itl_approximate, 0) if s.itl_approximate else None,
                    sources=", ".join(f"{k} ({v})" for k, v in s.token_sources.items()),
                )
            )
        trend = entry.memory_trend if entry else None
        trend_text = None
        if trend and is_number(trend.slope):
            trend_text = (
                f"{trend.metric}: {trend.start_mib:.0f} \u2192 {trend.end_mib:.0f} MiB (peak "
                f"{trend.peak_mib:.0f}), slope {num(trend.slope)} MiB/min (95% CI {ci_text(trend.ci95)})"
                + (" \u2014 growing" if trend.growing else "")
            )
        out.append(
            {
                "name": name,
                "anchor": view.ids.get(name),
                "color": view.colors.get(name),
                "baseline": name == view.baseline,
                "rows": rows,
                "latency_metrics": metrics,
                "all_metrics": all_metrics,
                "itl_approximate": max((r.itl_approximate for r in rows if r.itl_approximate), default=None),
                "saturation": lvl(sat) if is_number(sat) else None,
                "knee": lvl(knee) if is_number(knee) else None,
                "knee_by_metric": ", ".join(
                    f"{k}: {lvl(v)}" for k, v in (entry.knee_by_metric if entry else {}).items() if is_number(v)
                ),
                "memory_trend": trend_text,
                "telemetry_missing": entry.telemetry.missing if entry else None,
                "conditions": view.conditions_line(name),
                "has_speedup": name in speed_by,
                "open_loop": open_loop,
            }
        )
    return out


def speedups(view: RunView) -> list[dict]:
    out = []
    metrics = SPEEDUP_METRICS + (OPEN_LOOP_SPEEDUPS if view.mode == "open" else [])
    for comp in view.comparisons:
        rows = []
        for s in sorted(comp.steps, key=lambda s: s.level):
            cells: list[SpeedupCell] = []
            cache = s.prompt_cache
            flag = cache.flag if cache else None
            for key, _label in metrics:
                fig = getattr(s, key)
                if fig is None:
                    cells.append(SpeedupCell())
                    continue
                cells.append(
                    SpeedupCell(
                        value=times(fig.value),
                        ci=ci_text(fig.ci95, times),
                        state=speedup_state(fig),
                        headline=key == f"{comp.metric}_speedup",
                        flag=flag if key in LATENCY_SPEEDUPS else None,  # a cache hit shortens latency
                    )
                )
            rows.append(
                SpeedupRow(
                    level=lvl(s.level),
                    cells=cells,
                    crossover=is_number(comp.crossover_level) and s.level == comp.crossover_level,
                    cache=f"{pct(cache.baseline) or 'n/m'} / {pct(cache.variant) or 'n/m'}" if cache else None,
                    cache_flag=flag,
                )
            )
        out.append(
            {
                "variant": comp.variant,
                "baseline": comp.baseline,
                "rows": rows,
                "metrics": [m[1] for m in metrics],
                "headline": comp.metric_name or comp.metric,
                "recommendation": comp.recommendation,
                "crossover": lvl(comp.crossover_level) if is_number(comp.crossover_level) else None,
                "conditions": view.conditions_line(comp.variant),
            }
        )
    return out

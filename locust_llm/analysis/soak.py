"""A soak's windows -> trends per hour with 95% CIs, GPU clocks and temperature, and the soak's gates. Pure.

Each window is a step of the run, so its figures come from the summary's per-step figures (``StepFigures``);
this module only lines them up in time and fits them.

* **Trend**: ordinary least squares of the window values against the windows' midpoints in hours
  (``steady.drift``), with a t-based 95% CI (Student's t, n - 2 degrees of freedom; it assumes the windows'
  deviations from the line are independent). Percent per hour is the slope over the figure's level at the first
  fitted window, from the fit (less noisy than that window alone; the CI leaves the reference's own uncertainty
  out). A contended or worker-lost window, one the run left open (killed or still running: requests in flight
  then are missing, so its throughput would read low) and one shorter than half the planned length are shown but
  not fitted.
* **Gates** (exit 3): a drift whose whole CI lies beyond ``max_drift_pct_per_hour`` in the bad direction
  (latency up, throughput down); the soak's error rate (errors / requests over the fitted windows) above
  ``max_error_rate``; server memory (resident, or GPU memory) growing with its whole CI above
  ``max_memory_growth_mib_per_hour``. A trend needs 3 windows: with fewer, or without memory telemetry, the gate
  says it was not judged and holds (so does the error gate with no usable window: the run is then invalid, exit
  5, or unfinished, exit 7).
* **Throttling**: the slowest window's mean SM clock more than ``THROTTLE_DROP_PCT`` below the fastest window's.
"""

from __future__ import annotations

import math

import numpy as np

from ..rundir.env import RunEnv
from ..rundir.steps import StepRow
from .documents.soak import SoakSummary
from .documents.summary import StepFigures, Summary
from .gates import SLO_GATES, UNJUDGED
from .steady import drift
from .values import json_safe, to_float

__all__ = ["THROTTLE_DROP_PCT", "soak_summary", "trend"]

THROTTLE_DROP_PCT = 10.0
MIN_SHARE = 0.5  # a window shorter than this share of the planned length is not fitted
TIMEOUTS = ("connect_timeout", "first_token_timeout", "idle_timeout", "total_timeout")
# window field -> (words, unit, the bad direction); the drift gate judges these
DRIFTS = {
    "ttft_p50_ms": ("TTFT P50", "ms", "up"),
    "ttft_p99_ms": ("TTFT P99", "ms", "up"),
    "tpot_p50_ms": ("TPOT P50", "ms", "up"),
    "tpot_p99_ms": ("TPOT P99", "ms", "up"),
    "output_tps": ("output tok/s", "tok/s", "down"),
}
MEMORY = {"rss_mib": ("server resident memory", "MiB", "up"), "gpu_mem_mib": ("GPU memory", "MiB", "up")}
OTHER = {"kv_cache_usage": ("KV-cache use", "ratio", "up"), "error_rate": ("error rate", "ratio", "up")}
METHOD = (
    "Each window's figures are the step's (all requests, failures at the time they failed, as the SLO gates "
    "count them). Trends: least squares on the window values against the windows' midpoints, slope per hour "
    "with a t-based 95% CI (n - 2 degrees of freedom), as percent of the level at the first fitted window "
    "from the fit. Contended, worker-lost, unfinished and short windows are shown, not fitted."
)


def trend(hours, values) -> dict:
    """OLS slope per hour of ``values`` at ``hours`` with its 95% CI, and as percent of the fitted first level."""
    x = np.asarray(hours, dtype=float)
    y = np.asarray([to_float(v) for v in values], dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    fit = drift(x, y, autocorrelated=False)  # one value per window: the windows' deviations count as independent
    out = {
        "n": int(x.size),
        "slope_per_hour": fit["slope"],
        "ci95": fit["ci95"],
        "reference": None,
        "pct_per_hour": None,
        "pct_ci95": None,
        "from_h": float(x[0]) if x.size else None,
        "to_h": float(x[-1]) if x.size else None,
    }
    if fit["slope"] is None:
        return out
    reference = float(y.mean() + fit["slope"] * (x[0] - x.mean()))
    out["reference"] = reference
    if reference > 0:
        out["pct_per_hour"] = 100.0 * fit["slope"] / reference
        if fit["ci95"] is not None:
            out["pct_ci95"] = [100.0 * bound / reference for bound in fit["ci95"]]
    return out


def _stat(figures, name: str, key: str):
    stat = getattr(figures, name, None) if figures is not None else None
    return getattr(stat, key) if stat is not None else None


def window_figures(step: StepFigures, row: StepRow, origin: float, planned_s: float) -> dict:
    """One window's row of the soak table, from its step's figures and its ``steps.json`` row."""
    start, end = row.t_steady, row.t_end
    figure = {gate: SLO_GATES[gate][0].get(step.mode, SLO_GATES[gate][0]["closed"]) for gate in SLO_GATES}
    ttft, tpot = figure["ttft_p99_ms"], figure["tpot_p99_ms"]
    server = step.server
    timeouts = sum(count for kind, count in step.errors_by_class.items() if kind in TIMEOUTS)
    complete = not row.closed_at_last_record
    length = step.window_s
    return {
        "window": row.window if row.window is not None else step.step,
        "step": step.step,
        "start_s": start - origin,
        "end_s": end - origin,
        "window_s": length,
        "status": step.status,
        "complete": complete,
        "in_trend": (
            complete and step.status not in UNJUDGED and length is not None and length >= MIN_SHARE * planned_s
        ),
        "requests": step.requests,
        "errors": step.errors,
        "error_rate": step.error_rate,
        "timeouts": timeouts,
        "timeout_rate": timeouts / step.requests if step.requests else None,
        "ttft_p50_ms": _stat(step, ttft, "p50"),
        "ttft_p99_ms": _stat(step, ttft, "p99"),
        "cached_fraction": step.prompt_cache.cached_fraction if step.prompt_cache else None,
        "tpot_p50_ms": _stat(step, tpot, "p50"),
        "tpot_p99_ms": _stat(step, tpot, "p99"),
        "output_tps": step.output_tps,
        "rss_mib": _stat(server.process if server else None, "rss_mib", "mean"),
        "gpu_mem_mib": _stat(server.gpu if server else None, "mem_used_mib", "mean"),
        "kv_cache_usage": _stat(server, "kv_cache_usage", "mean"),
        "sm_clock_mhz": _stat(server.gpu if server else None, "sm_clock_mhz", "mean"),
        "sm_clock_min_mhz": _stat(server.gpu if server else None, "sm_clock_mhz", "min"),
        "temp_max_c": _stat(server.gpu if server else None, "temp_c", "max"),
    }


def gpu_figures(windows: list[dict]) -> dict | None:
    """SM clock and temperature over the soak, and the throttling flag; None without clock telemetry."""
    clocks = [w for w in windows if w["sm_clock_mhz"] is not None]
    if not clocks:
        return None
    means = [w["sm_clock_mhz"] for w in clocks if w["in_trend"]] or [w["sm_clock_mhz"] for w in clocks]
    temps = [w["temp_max_c"] for w in clocks if w["temp_max_c"] is not None]
    drop = 100.0 * (1.0 - min(means) / max(means)) if max(means) > 0 else None
    return {
        "sm_clock_min_mhz": min(w["sm_clock_min_mhz"] for w in clocks if w["sm_clock_min_mhz"] is not None),
        "sm_clock_max_mhz": max(means),
        "temp_min_c": min(temps) if temps else None,
        "temp_max_c": max(temps) if temps else None,
        "clock_drop_pct": drop,
        "throttling": None if drop is None else drop > THROTTLE_DROP_PCT,
        "note": f"throttling: the slowest window's mean SM clock more than {THROTTLE_DROP_PCT:g}% below the "
        "fastest window's (clock-based; the driver's throttle reasons are not read)",
    }


def _signed(value: float) -> str:
    return f"{value:+.3g}"


def drift_check(name: str, fit: dict, limit: float) -> dict:
    label, _, worse = DRIFTS[name]
    ci = fit["pct_ci95"]
    base = {"gate": "soak_drift", "figure": name, "value": fit["pct_per_hour"], "ci95": ci, "limit": limit}
    if ci is None:
        return {
            **base,
            "judged": False,
            "ok": True,
            "text": f"{label} drift not judged: {fit['n']} window(s) fitted, a trend needs 3",
        }
    beyond = ci[0] > limit if worse == "up" else ci[1] < -limit
    text = (
        f"{label} drifts {_signed(fit['pct_per_hour'])}%/h (95% CI {_signed(ci[0])} to {_signed(ci[1])}) over "
        f"{fit['n']} windows; limit {limit:g}%/h: "
        + ("the whole CI lies beyond it" if beyond else "the CI does not lie wholly beyond it")
    )
    return {**base, "judged": True, "ok": not beyond, "text": text}


def memory_check(name: str, fit: dict, limit: float) -> dict:
    label = MEMORY[name][0]
    ci = fit["ci95"]
    base = {"gate": "soak_memory_growth", "figure": name, "value": fit["slope_per_hour"], "ci95": ci, "limit": limit}
    if ci is None:
        return {
            **base,
            "judged": False,
            "ok": True,
            "text": f"{label} growth not judged: {fit['n']} window(s) fitted, a trend needs 3",
        }
    beyond = ci[0] > limit
    text = (
        f"{label} changes by {_signed(fit['slope_per_hour'])} MiB/h (95% CI {_signed(ci[0])} to {_signed(ci[1])}); "
        f"limit {limit:g} MiB/h" + (", exceeded with its whole CI" if beyond else "")
    )
    return {**base, "judged": True, "ok": not beyond, "text": text}


def error_check(requests: int, errors: int, limit: float, windows: list[dict]) -> dict:
    rate = errors / requests if requests else None
    base = {"gate": "soak_error_rate", "figure": "error_rate", "value": rate, "limit": limit}
    if rate is None:
        # Said and held: the run's verdict already calls a soak with no usable window invalid (exit 5).
        statuses = ", ".join(sorted({w["status"] if w["complete"] else "unfinished" for w in windows})) or "none"
        return {
            **base,
            "judged": False,
            "ok": True,
            "text": f"soak error rate not judged: no request in a usable window (windows: {statuses})",
        }
    return {
        **base,
        "judged": True,
        "ok": rate <= limit,
        "text": f"soak error rate {100 * rate:.3g}% ({errors} of {requests} requests); limit {100 * limit:g}%",
    }


def soak_summary(summary: Summary, steps: list[StepRow], env: RunEnv) -> SoakSummary | None:
    """The soak section of a run that recorded ``soak`` in env.json; None for a ladder run."""
    spec = env.soak
    if spec is None:
        return None
    variant = spec.variant
    entry = summary.variants.get(variant)
    figures = {s.step: s for s in entry.steps} if entry is not None else {}
    rows = [r for r in steps if r.variant == variant and r.step in figures]
    starts = [r.t_steady for r in rows]
    origin = next((t for t in starts if math.isfinite(t)), math.nan)
    windows = [window_figures(figures[r.step], r, origin, float(spec.window_s)) for r in rows]
    fitted = [w for w in windows if w["in_trend"]]
    hours = [(w["start_s"] + w["end_s"]) / 2 / 3600.0 for w in fitted]
    trends, checks, notes = [], [], []
    for name, (label, unit, worse) in {**DRIFTS, **MEMORY, **OTHER}.items():
        if all(w[name] is None for w in windows):
            continue  # never measured (memory of an external server, KV-cache use not exported, ...)
        fit = trend(hours, [w[name] for w in fitted])
        trends.append({"figure": name, "label": label, "unit": unit, "worse": worse, **fit})
        if name in DRIFTS and spec.max_drift_pct_per_hour is not None:
            checks.append(drift_check(name, fit, spec.max_drift_pct_per_hour))
        if name in MEMORY and spec.max_memory_growth_mib_per_hour is not None:
            checks.append(memory_check(name, fit, spec.max_memory_growth_mib_per_hour))
    requests = sum(w["requests"] for w in fitted)
    errors = sum(w["errors"] for w in fitted)
    timeouts = sum(w["timeouts"] for w in fitted)
    if spec.max_error_rate is not None:
        checks.append(error_check(requests, errors, spec.max_error_rate, windows))
    if len(fitted) < len(windows):
        notes.append(
            f"{len(windows) - len(fitted)} of {len(windows)} windows left out of the trends (contended, "
            "worker-lost, unfinished or short)"
        )
    if not any(t["figure"] in MEMORY for t in trends):
        notes.append(
            "no server memory telemetry (an external server's process is not known, and no GPU): memory "
            "growth not measured"
        )
    if not any(t["figure"] == "kv_cache_usage" for t in trends):
        notes.append("KV-cache use not exported by the server: its growth is not measured")
    gpu = gpu_figures(windows)
    if gpu is None:
        notes.append("no GPU clock telemetry: clocks, temperature and throttling not measured")
    measured = sum(w["window_s"] or 0.0 for w in windows)
    return SoakSummary.model_validate(
        json_safe(
            {
                "variant": variant,
                "level": spec.level,
                "mode": env.recorded_load.mode or "closed",
                "duration_s": spec.duration_s,
                "window_s": spec.window_s,
                "windows_planned": spec.windows,
                "measured_s": measured,
                "complete": len(windows) == spec.windows and all(w["complete"] for w in windows),
                "requests": requests,
                "errors": errors,
                "error_rate": errors / requests if requests else None,
                "timeouts": timeouts,
                "timeout_rate": timeouts / requests if requests else None,
                "windows": windows,
                "trends": trends,
                "gpu": gpu,
                "checks": checks,
                "method": METHOD,
                "notes": notes,
            }
        )
    )

"""``RunData`` -> ``Summary`` (``summary.json``): per step figures with CIs, per variant curves,
baseline-vs-variant comparisons, the consistency check, client validity and error samples. Pure.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..rundir.load import RunData
from .agreement import agreement
from .curves import SATURATION_MIN_GAIN, knee_level, saturation_level
from .documents import Summary
from .errors import error_samples
from .metrics import inter_chunk_ms, per_token_itl_ms, request_metrics
from .server_metrics import cross_check, server_figures
from .speedup import crossover_level, ratio_ci, recommendation
from .stats import bootstrap_ci, percentile_stat, rate_samples, summarize
from .steady import drift
from .validity import client_validity
from .values import json_safe, to_float

__all__ = ["StepSamples", "analyse", "build_summary"]

REQUEST_FIELDS = ("ttft_ms", "ttft_sched_ms", "tpot_ms", "e2e_ms", "e2e_sched_ms", "decode_tps", "e2e_tps",
                  "schedule_lag_ms")
OPEN_LOOP_ONLY = ("ttft_sched_ms", "e2e_sched_ms", "schedule_lag_ms")
# Bootstrap work grows with n; per-token lists of long steps do not need 2000 resamples for a tight CI.
N_BOOT = 1000
N_BOOT_LARGE = 200
LARGE = 20_000
RATE_BIN_S = 1.0
# In a closed loop latency past saturation grows in proportion to users (Little's law), so the knee is
# where half of each load increase already goes into waiting; open loop uses proportional growth.
KNEE_THRESHOLD = {"closed": 0.5, "open": 1.0}


def _summarize(values) -> dict:
    values = np.asarray(values, dtype=float)
    return summarize(values, n_boot=N_BOOT_LARGE if values.size > LARGE else N_BOOT)


@dataclass
class StepSamples:
    """Raw per-step arrays kept for the comparisons (not written to summary.json)."""

    token_rates: np.ndarray
    decode_tps: np.ndarray
    tpot_ms: np.ndarray
    ttft_ms: np.ndarray

    def pooled_with(self, other: "StepSamples") -> "StepSamples":
        """A repeated ladder measures a level more than once; its samples are pooled."""
        return StepSamples(*(np.concatenate([a, b]) for a, b in zip(
            (self.token_rates, self.decode_tps, self.tpot_ms, self.ttft_ms),
            (other.token_rates, other.decode_tps, other.tpot_ms, other.ttft_ms))))


def token_arrivals(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Arrival time and token count of every chunk of every request in ``frame``."""
    times, counts = [], []
    for t_send, offsets, tokens in zip(frame["t_send"], frame["chunk_offsets"], frame["chunk_tokens"]):
        if offsets is not None and len(offsets):
            times.append(t_send + np.asarray(offsets, dtype=float))
            counts.append(np.asarray(tokens, dtype=float))
    if not times:
        return np.empty(0), np.empty(0)
    return np.concatenate(times), np.concatenate(counts)


def good_requests(sent: pd.DataFrame, derived: pd.DataFrame, slo: dict) -> pd.Series:
    """Requests that succeeded and met every SLO that is set; failures are never good."""
    good = sent["error_class"].isna()
    for key, column in (("ttft_ms", "ttft_ms"), ("tpot_ms", "tpot_ms"), ("e2e_ms", "e2e_ms")):
        limit = slo.get(key)
        if limit is not None:
            good &= derived[column].fillna(math.inf) <= limit
    return good


def step_summary(run: RunData, variant_frame: pd.DataFrame, arrivals: tuple[np.ndarray, np.ndarray], step: dict,
                 slo: dict) -> tuple[dict, StepSamples]:
    """Figures of one ladder step: requests sent in its steady window, tokens arriving in it."""
    start, end = to_float(step.get("t_steady")), to_float(step.get("t_end"))
    window = end - start if math.isfinite(start) and math.isfinite(end) and end > start else math.nan
    sent = variant_frame[(variant_frame["step"] == step["step"]) & (variant_frame["phase"] == "steady")]
    derived = request_metrics(sent)
    failed = sent["error_class"].notna()
    ok_rows = sent[~failed]
    itl = [v for offsets, tokens in zip(ok_rows["chunk_offsets"], ok_rows["chunk_tokens"])
           for v in per_token_itl_ms(offsets, tokens)]
    icl = [v for offsets in ok_rows["chunk_offsets"] for v in inter_chunk_ms(offsets)]
    rates = rate_samples(*arrivals, start, end, RATE_BIN_S)
    output_tps = float(rates.mean()) if rates.size else None
    good = good_requests(sent, derived, slo)
    summary = {
        "step": step["step"], "level": step["level"], "mode": step["mode"], "users": step.get("users"),
        "window_s": window if math.isfinite(window) else None,
        "requests": int(len(sent)), "errors": int(failed.sum()),
        "error_rate": float(failed.mean()) if len(sent) else None,
        "errors_by_class": {str(k): int(v) for k, v in sent.loc[failed, "error_class"].value_counts().items()},
        "output_tokens": int(ok_rows["output_tokens"].sum()),
        "output_tps": output_tps,
        "output_tps_ci95": _ci(bootstrap_ci(rates, np.mean, n_boot=N_BOOT)),
        "request_rate": len(sent) / window if math.isfinite(window) else None,
        "goodput_rps": float(good.sum()) / window if math.isfinite(window) else None,
        "itl_ms": _summarize(itl), "icl_ms": _summarize(icl),
        "token_sources": {str(k): int(v) for k, v in sent["token_source"].value_counts().items()},
    }
    for name in REQUEST_FIELDS:
        if step["mode"] == "open" or name not in OPEN_LOOP_ONLY:
            summary[name] = _summarize(derived[name])
    if step["mode"] == "open":
        arrivals = variant_frame["t_intended"].between(start, end, inclusive="left") if math.isfinite(window) \
            else pd.Series(False, index=variant_frame.index)
        summary["offered_rate"] = step["level"]
        summary["scheduled_rate"] = float(arrivals.sum()) / window if math.isfinite(window) else None
        # Dropped arrivals were never sent: their t_send stays NaN.
        summary["achieved_rate"] = float(sent["t_send"].notna().sum()) / window if math.isfinite(window) else None
    drafted = sent["draft_n"].dropna().sum()
    if drafted:
        accepted = sent["draft_accepted"].dropna().sum()
        summary["acceptance_client"] = {"rate": float(accepted / drafted), "draft_tokens": int(drafted),
                                        "accepted_tokens": int(accepted), "source": "client (per-request timings)"}
    ok_tokens = ok_rows["chunk_tokens"].map(len)
    if len(ok_rows):
        summary["tokens_per_chunk"] = {"value": float(ok_rows["output_tokens"].sum() / max(ok_tokens.sum(), 1)),
                                       "source": "client (tokens / token-carrying chunks)"}
    summary.update(steadiness(rates, start, ok_rows, derived.loc[ok_rows.index, "tpot_ms"]))
    summary.update(client_validity(run.client, summary, start, end))
    samples = StepSamples(token_rates=rates, decode_tps=derived["decode_tps"].to_numpy(dtype=float),
                          tpot_ms=derived["tpot_ms"].to_numpy(dtype=float),
                          ttft_ms=derived["ttft_ms"].to_numpy(dtype=float))
    return summary, samples


def steadiness(rates: np.ndarray, start: float, ok_rows: pd.DataFrame, tpot_ms: pd.Series) -> dict:
    """Drift of throughput (per-second bins) and TPOT (per request, by send time) within the steady window."""
    throughput = drift(start + RATE_BIN_S * (np.arange(rates.size) + 0.5), rates) if rates.size >= 3 else None
    mask = tpot_ms.notna().to_numpy()
    tpot = drift(ok_rows["t_send"].to_numpy()[mask], tpot_ms.to_numpy()[mask]) if mask.sum() >= 3 else None
    verdicts = [d["steady"] for d in (throughput, tpot) if d is not None and d["steady"] is not None]
    return {"steady": all(verdicts) if verdicts else None, "steady_check": {"throughput": throughput, "tpot": tpot}}


def _ci(interval) -> list | None:
    return [float(interval[0]), float(interval[1])] if interval else None


def attach_server_figures(entry: dict, server: dict | None) -> None:
    """The server's view of each step beside the client's: acceptance from both sources, the cross-check."""
    if not server:
        entry["telemetry"] = {"missing": "no telemetry recorded for this variant"}
        return
    by_step = {s["step"]: s for s in server.get("steps", [])}
    for step in entry["steps"]:
        figures = by_step.get(step["step"])
        if figures is None:
            continue
        step["server"] = figures
        step["acceptance"] = {"server": figures.get("acceptance"), "client": step.get("acceptance_client"),
                              "tokens_per_chunk": step.get("tokens_per_chunk")}
        step["server_vs_client"] = cross_check(figures, step)
    entry["acceptance_vs_load"] = server.get("acceptance_vs_load")
    entry["memory_trend"] = server.get("memory_trend")
    entry["telemetry"] = {"engine": server.get("engine"), "sources": server.get("sources"),
                          "gaps": server.get("gaps")}


def variant_curves(steps: list[dict], mode: str) -> dict:
    levels = [s["level"] for s in steps]
    throughput = [(s.get("output_tps"), *(s.get("output_tps_ci95") or (None, None))) for s in steps]
    threshold = KNEE_THRESHOLD.get(mode, 1.0)
    knees = {name: knee_level(levels, [(s.get(name) or {}).get("p95") for s in steps], threshold)
             for name in ("tpot_ms", "ttft_ms")}
    found = [k for k in knees.values() if k is not None]
    return {"saturation_level": saturation_level(levels, throughput), "knee_level": min(found) if found else None,
            "knee_by_metric": knees,
            "rules": {"saturation": f"first level that no higher level beats by >{SATURATION_MIN_GAIN:.0%} with "
                                    "non-overlapping 95% CIs",
                      "knee": f"first level after which P95 TPOT or TTFT grows with log-log slope > {threshold}"}}


def comparison(baseline: str, variant: str, base: dict[float, StepSamples], other: dict[float, StepSamples],
               mode: str) -> dict:
    steps = []
    for i, level in enumerate(sorted(set(base) & set(other))):
        b, v = base[level], other[level]
        seed = i
        steps.append({
            "level": level,
            "output_tps_speedup": ratio_ci(v.token_rates, b.token_rates, np.mean, True, N_BOOT, seed),
            "decode_tps_speedup": ratio_ci(v.decode_tps, b.decode_tps, np.mean, True, N_BOOT, seed),
            "tpot_p50_speedup": ratio_ci(v.tpot_ms, b.tpot_ms, percentile_stat(50), False, N_BOOT, seed),
            "tpot_p95_speedup": ratio_ci(v.tpot_ms, b.tpot_ms, percentile_stat(95), False, N_BOOT, seed),
            "ttft_p95_speedup": ratio_ci(v.ttft_ms, b.ttft_ms, percentile_stat(95), False, N_BOOT, seed),
        })
    headline = [{"level": s["level"], "speedup": s["output_tps_speedup"]} for s in steps]
    crossover = crossover_level(headline)
    unit = "req/s" if mode == "open" else "concurrent streams"
    return {"baseline": baseline, "variant": variant, "metric": "output_tps", "steps": steps,
            "crossover_level": crossover,
            "recommendation": recommendation(variant, baseline, headline, crossover, unit)}


def analyse(run: RunData) -> tuple[dict[str, dict], dict[str, dict[float, StepSamples]], dict[str, str]]:
    """Per variant: the step figures, the raw samples per level (repeats pooled) and the load mode."""
    frame = run.requests
    slo = (run.env.get("scenario") or {}).get("slo") or {}
    variants: dict[str, dict] = {}
    samples: dict[str, dict[float, StepSamples]] = {}
    modes: dict[str, str] = {}
    # Every chunk of a variant, once: each step counts the tokens arriving in its own window.
    per_variant: dict[str, tuple[pd.DataFrame, tuple[np.ndarray, np.ndarray]]] = {}
    for step in run.steps:
        name = step["variant"]
        if name not in per_variant:
            selected = frame[frame["variant"] == name] if len(frame) else frame
            per_variant[name] = (selected, token_arrivals(selected) if len(selected) else (np.empty(0),) * 2)
        variant_frame, arrivals = per_variant[name]
        entry = variants.setdefault(name, {"steps": []})
        modes[name] = step["mode"]
        if not len(variant_frame):
            entry["steps"].append({"step": step["step"], "level": step["level"], "mode": step["mode"],
                                   "requests": 0, "errors": 0})
            continue
        figures, step_samples = step_summary(run, variant_frame, arrivals, step, slo)
        entry["steps"].append(figures)
        level = float(step["level"])
        pooled = samples.setdefault(name, {})
        pooled[level] = pooled[level].pooled_with(step_samples) if level in pooled else step_samples
    return variants, samples, modes


def build_summary(run: RunData) -> Summary:
    frame = run.requests
    slo = (run.env.get("scenario") or {}).get("slo") or {}
    baseline = run.env.get("baseline")
    variants, samples, modes = analyse(run)
    server = server_figures(run.telemetry, run.telemetry_meta, run.steps)
    for name, entry in variants.items():
        entry.update(variant_curves([s for s in entry["steps"] if "output_tps" in s], modes[name]))
        attach_server_figures(entry, server["variants"].get(name))
    comparisons = []
    if baseline in samples:
        comparisons = [comparison(baseline, name, samples[baseline], samples[name], modes[name])
                       for name in samples if name != baseline]
    consistency = {}
    if baseline in run.consistency:
        consistency = {name: agreement(run.consistency[baseline], outputs)
                       for name, outputs in run.consistency.items() if name != baseline}
    return Summary.model_validate(json_safe({
        "run_id": run.env.get("run_id"), "generated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "baseline": baseline, "records": int(len(frame)), "slo": slo, "variants": variants,
        "comparisons": comparisons, "consistency": consistency, "events": run.events,
        "errors": error_samples(frame),
    }))

"""``RunData`` -> ``Summary`` (``summary.json``): per step figures with CIs, per variant curves,
baseline-vs-variant comparisons, the consistency check, client validity and error samples. Pure.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd

from ..rundir.load import RunData
from .agreement import agreement
from .curves import SATURATION_MIN_GAIN, knee_level, saturation_level
from .documents import Summary
from .errors import error_samples
from .metrics import APPROXIMATE_SOURCES, Chunks, request_metrics
from .samples import PAIR_KEY, StepSamples, paired
from .server_metrics import cross_check, server_figures
from .speedup import crossover_level, paired_ratio_ci, ratio_ci, recommendation
from .stats import bootstrap_ci, percentile_stat, rate_samples, summarize
from .steady import drift
from .validity import client_validity
from .values import json_safe, to_float

__all__ = ["HEADLINE", "KNEE_THRESHOLD", "analyse", "build_summary", "latency_keys"]

CLOSED_FIELDS = ("ttft_ms", "tpot_ms", "e2e_ms", "decode_tps", "e2e_tps", "ttft_all_ms", "tpot_all_ms",
                 "e2e_all_ms")
OPEN_FIELDS = ("ttft_sched_ms", "e2e_sched_ms", "schedule_lag_ms", "ttft_sched_all_ms", "e2e_sched_all_ms")
N_BOOT = 1000
RATE_BIN_S = 1.0
# In a closed loop latency past saturation grows in proportion to users (Little's law), so the knee is
# where half of each load increase already goes into waiting; open loop uses proportional growth.
KNEE_THRESHOLD = {"closed": 0.5, "open": 1.0}
# What a comparison's crossover and recommendation rest on: in a closed loop the aggregate throughput; in an
# open loop the offered rate fixes throughput below saturation, so the latency users see from their intended
# send time (paired by arrival) decides.
HEADLINE = {"closed": "output_tps", "open": "e2e_sched_p95"}
HEADLINE_NAMES = {"output_tps": "aggregate output tok/s", "e2e_sched_p95": "E2E P95 from the intended send time"}


def latency_keys(mode: str) -> dict[str, str]:
    """The TTFT and E2E figures that are the headline (gates, goodput, knee, speed-ups) in this mode."""
    if mode == "open":
        return {"ttft": "ttft_sched_ms", "e2e": "e2e_sched_ms", "ttft_all": "ttft_sched_all_ms",
                "e2e_all": "e2e_sched_all_ms"}
    return {"ttft": "ttft_ms", "e2e": "e2e_ms", "ttft_all": "ttft_all_ms", "e2e_all": "e2e_all_ms"}


def good_requests(sent: pd.DataFrame, derived: pd.DataFrame, slo: dict, mode: str) -> pd.Series:
    """Requests that succeeded and met every SLO that is set; failures are never good. TPOT is undefined for a
    one-token answer, so the TPOT SLO does not apply to it."""
    keys = latency_keys(mode)
    good = sent["error_class"].isna()
    for key, column, missing in (("ttft_ms", keys["ttft"], math.inf), ("tpot_ms", "tpot_ms", 0.0),
                                 ("e2e_ms", keys["e2e"], math.inf)):
        limit = slo.get(key)
        if limit is not None:
            good &= derived[column].fillna(missing) <= limit
    return good


def window_arrivals(run: RunData, frame: pd.DataFrame, start: float, end: float) -> tuple[np.ndarray, np.ndarray]:
    """Arrival time and token count of every chunk that can fall in ``[start, end)``: those of the requests in
    flight at some point of the window, whatever step sent them."""
    if not (math.isfinite(start) and math.isfinite(end)):
        return np.empty(0), np.empty(0)
    last = frame["t_done"].fillna(frame["t_end"]) if "t_done" in frame else frame["t_end"]
    rows = frame[(frame["t_send"] < end) & (last >= start)]
    chunks = Chunks.of(rows, run.lists)
    return chunks.arrivals(rows["t_send"].to_numpy(dtype=float)), chunks.tokens


def step_summary(run: RunData, frame: pd.DataFrame, step: dict, slo: dict) -> tuple[dict, StepSamples]:
    """Figures of one ladder step: requests sent in its steady window, tokens arriving in it."""
    start, end = to_float(step.get("t_steady")), to_float(step.get("t_end"))
    window = end - start if math.isfinite(start) and math.isfinite(end) and end > start else math.nan
    mode = step["mode"]
    timeouts = ((run.env.get("load") or {}).get("timeouts") or {})
    sent = frame[(frame["step"] == step["step"]) & (frame["phase"] == "steady")]
    derived = request_metrics(sent, to_float(timeouts.get("first_token_s")))
    failed = sent["error_class"].notna()
    ok_rows = sent[~failed]
    chunks = Chunks.of(ok_rows, run.lists)
    itl, itl_weights = chunks.itl_ms()
    rates = rate_samples(*window_arrivals(run, frame, start, end), start, end, RATE_BIN_S)
    good = good_requests(sent, derived, slo, mode)
    good_rates = rate_samples(sent.loc[good, "t_send"].to_numpy(dtype=float), None, start, end, RATE_BIN_S)
    per_window = (lambda count: count / window) if math.isfinite(window) else (lambda count: None)
    summary = {
        "step": step["step"], "level": step["level"], "mode": mode, "users": step.get("users"),
        "window_s": window if math.isfinite(window) else None,
        "requests": int(len(sent)), "errors": int(failed.sum()),
        "error_rate": float(failed.mean()) if len(sent) else None,
        "errors_by_class": {str(k): int(v) for k, v in sent.loc[failed, "error_class"].value_counts().items()},
        "output_tokens": int(ok_rows["output_tokens"].sum()),
        "output_tps": float(rates.mean()) if rates.size else None,
        "output_tps_ci95": _ci(bootstrap_ci(rates, np.mean, n_boot=N_BOOT)),
        "request_rate": per_window(len(sent)), "goodput_rps": per_window(float(good.sum())),
        "itl_ms": summarize(itl, n_boot=N_BOOT, weights=itl_weights), "icl_ms": summarize(chunks.icl_ms()),
        "itl_approximate": float(ok_rows["token_source"].isin(APPROXIMATE_SOURCES).mean()) if len(ok_rows) else None,
        "token_sources": {str(k): int(v) for k, v in sent["token_source"].value_counts().items()},
    }
    for name in CLOSED_FIELDS + (OPEN_FIELDS if mode == "open" else ()):
        summary[name] = summarize(derived[name].to_numpy(dtype=float), n_boot=N_BOOT)
    if mode == "open":
        scheduled = frame["t_intended"].between(start, end, inclusive="left") if math.isfinite(window) \
            else pd.Series(False, index=frame.index)
        summary["offered_rate"] = step["level"]
        summary["scheduled_rate"] = per_window(float(scheduled.sum()))
        # Dropped arrivals were never sent: their t_send stays NaN.
        summary["achieved_rate"] = per_window(float(sent["t_send"].notna().sum()))
    drafted = sent["draft_n"].dropna().sum()
    if drafted:
        accepted = sent["draft_accepted"].dropna().sum()
        summary["acceptance_client"] = {"rate": float(accepted / drafted), "draft_tokens": int(drafted),
                                        "accepted_tokens": int(accepted), "source": "client (per-request timings)"}
    if len(ok_rows):
        summary["tokens_per_chunk"] = {"value": float(ok_rows["output_tokens"].sum() / max(len(chunks.offset), 1)),
                                       "source": "client (tokens / token-carrying chunks)"}
    summary.update(steadiness(rates, start, ok_rows, derived.loc[ok_rows.index, "tpot_ms"]))
    summary.update(client_validity(run.client, summary, start, end))
    keys = [c for c in PAIR_KEY if c in sent]
    requests = pd.concat([sent[keys].reset_index(drop=True), derived.reset_index(drop=True)], axis=1)
    if "seq" not in requests:
        requests["seq"] = -1
    return summary, StepSamples(rates, good_rates, requests)


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


def variant_curves(by_level: dict[float, StepSamples], mode: str) -> dict:
    """Saturation and knee over the levels (a repeated level's steps pooled into one point)."""
    levels = sorted(by_level)
    throughput = []
    for level in levels:
        rates = by_level[level].token_rates
        ci = bootstrap_ci(rates, np.mean, n_boot=N_BOOT)
        throughput.append((float(rates.mean()) if rates.size else None, *(ci or (None, None))))
    threshold = KNEE_THRESHOLD.get(mode, 1.0)
    columns = {"tpot_ms": "tpot_ms", "ttft_ms": latency_keys(mode)["ttft"]}
    knees = {}
    for name, column in columns.items():
        p95 = [_percentile(by_level[level].values(column), 95) for level in levels]
        knees[name] = knee_level(levels, p95, threshold)
    found = [k for k in knees.values() if k is not None]
    return {"saturation_level": saturation_level(levels, throughput), "knee_level": min(found) if found else None,
            "knee_by_metric": knees,
            "rules": {"saturation": f"first level that no higher level beats by >{SATURATION_MIN_GAIN:.0%} with "
                                    "non-overlapping 95% CIs",
                      "knee": f"first level after which P95 TPOT or {columns['ttft_ms']} grows with log-log slope "
                              f"> {threshold}"}}


def _percentile(values: np.ndarray, q: float) -> float | None:
    values = values[np.isfinite(values)]
    return float(np.percentile(values, q)) if values.size else None


def _latency_speedup(v: StepSamples, b: StepSamples, column: str, statistic, higher_is_better: bool,
                     seed: int) -> dict:
    """Paired by request when the runs carry the pairing key; otherwise the two samples independently."""
    pairs = paired(v, b, column)
    if pairs is not None:
        return paired_ratio_ci(*pairs, statistic, higher_is_better, N_BOOT, seed)
    return {**ratio_ci(v.values(column), b.values(column), statistic, higher_is_better, N_BOOT, seed), "pairs": 0}


def comparison(baseline: str, variant: str, base: dict[float, StepSamples], other: dict[float, StepSamples],
               mode: str) -> dict:
    ttft = latency_keys(mode)["ttft"]
    steps = []
    for seed, level in enumerate(sorted(set(base) & set(other))):
        b, v = base[level], other[level]
        step = {
            "level": level,
            "output_tps_speedup": ratio_ci(v.token_rates, b.token_rates, np.mean, True, N_BOOT, seed),
            "decode_tps_speedup": _latency_speedup(v, b, "decode_tps", np.mean, True, seed),
            "tpot_p50_speedup": _latency_speedup(v, b, "tpot_ms", percentile_stat(50), False, seed),
            "tpot_p95_speedup": _latency_speedup(v, b, "tpot_ms", percentile_stat(95), False, seed),
            "ttft_p95_speedup": _latency_speedup(v, b, ttft, percentile_stat(95), False, seed),
        }
        if mode == "open":
            step["e2e_sched_p95_speedup"] = _latency_speedup(v, b, "e2e_sched_all_ms", percentile_stat(95), False,
                                                             seed)
            step["goodput_speedup"] = ratio_ci(v.good_rates, b.good_rates, np.mean, True, N_BOOT, seed)
        steps.append(step)
    metric = HEADLINE.get(mode, "output_tps")
    headline = [{"level": s["level"], "speedup": s[f"{metric}_speedup"]} for s in steps]
    crossover = crossover_level(headline)
    unit = "req/s" if mode == "open" else "concurrent streams"
    return {"baseline": baseline, "variant": variant, "metric": metric, "metric_name": HEADLINE_NAMES[metric],
            "steps": steps, "crossover_level": crossover,
            "recommendation": recommendation(variant, baseline, headline, crossover, unit)}


def analyse(run: RunData) -> tuple[dict[str, dict], dict[str, dict[float, StepSamples]], dict[str, str]]:
    """Per variant: the step figures, the raw samples per level (repeats pooled) and the load mode."""
    frame = run.requests
    slo = (run.env.get("scenario") or {}).get("slo") or {}
    variants: dict[str, dict] = {}
    samples: dict[str, dict[float, StepSamples]] = {}
    modes: dict[str, str] = {}
    per_variant: dict[str, pd.DataFrame] = {}
    for step in run.steps:
        name = step["variant"]
        if name not in per_variant:
            per_variant[name] = frame[frame["variant"] == name] if len(frame) else frame
        variant_frame = per_variant[name]
        entry = variants.setdefault(name, {"steps": []})
        modes[name] = step["mode"]
        if not len(variant_frame):
            entry["steps"].append({"step": step["step"], "level": step["level"], "mode": step["mode"],
                                   "requests": 0, "errors": 0})
            continue
        figures, step_samples = step_summary(run, variant_frame, step, slo)
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
        entry.update(variant_curves(samples.get(name, {}), modes[name]))
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

"""``RunData`` -> ``Summary`` (``summary.json``): per step figures with CIs, per variant curves,
baseline-vs-variant comparisons, the consistency check, client validity and error samples. Pure.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from itertools import chain

import numpy as np
import pandas as pd

from ..records import FAST_FAIL_S, NEVER_REACHED, NOT_SENT, ErrorClass
from ..rundir.consistency import Answer
from ..rundir.events import Event
from ..rundir.load import RunData
from ..rundir.steps import StepRow
from ..scenario import CostSpec, PositionsSpec, ReasoningSpec
from .acceptance import request_acceptance
from .agreement import agreement
from .breakdown import add_breakdowns, level_acceptance
from .categories import category_comparisons
from .comparison import comparison, latency_keys
from .conversations import TURN_COLUMNS, by_turn, conversation_summary, step_conversations
from .cost import cost_summary
from .curves import KNEE_ELASTICITY, SATURATION_MIN_GAIN, LevelThroughput, knee_level, saturation, throughput_knee
from .cycles import Batches, batch_ratio, step_batches
from .detected import detected
from .documents.quality import Agreement, GreedyCheck
from .documents.summary import Summary
from .errors import error_samples
from .gates import gates_of
from .greedy import greedy_check
from .images import image_overhead
from .metrics import APPROXIMATE_SOURCES, Chunks, chunk_split, request_metrics
from .positions import POSITION_STATUSES, positions_summary, request_positions, step_positions
from .probes import probe_summary
from .prompt_cache import (
    across_runs,
    cache_mode,
    finish_prompt_cache,
    level_caches,
    pooled_fraction,
    repeated_prompts,
    request_cache,
)
from .quality import mark_not_eligible, not_eligible, quality_summary
from .reasoning import add_reasoning_speedups, reasoning_metrics, step_reasoning
from .samples import PAIR_KEY, LevelSamples
from .scale_out import ScaleBlock, scale_out_summary
from .schedule import sweep_schedule
from .server_metrics import cross_check, server_figures
from .soak import soak_summary
from .stats import LARGE, binned_rates, mean_of, occupancy_samples, percentile_of, rate_samples, summarize
from .status import flag_anomalies, host_load, step_status
from .steady import batch_drift, drift
from .traces import trace_step
from .validity import Requests, Think, client_validity, in_flight_spans, intended_waits_s
from .values import json_safe, to_float

__all__ = ["KNEE_THRESHOLD", "analyse", "build_summary"]

CLOSED_FIELDS = (
    *("ttft_ms", "tpot_ms", "e2e_ms", "decode_tps", "e2e_tps", "ttft_all_ms", "tpot_all_ms", "e2e_all_ms"),
    *("ttfot_ms", "ttfot_all_ms"),
)
OPEN_FIELDS = (
    *("ttft_sched_ms", "e2e_sched_ms", "schedule_lag_ms", "ttft_sched_all_ms", "e2e_sched_all_ms"),
    *("ttfot_sched_ms", "ttfot_sched_all_ms"),
)
N_BOOT = 1000
RATE_BIN_S = 1.0
# In a closed loop latency past saturation grows in proportion to users (Little's law), so the knee is
# where half of each load increase already goes into waiting; open loop uses proportional growth.
KNEE_THRESHOLD = {"closed": 0.5, "open": 1.0}


def good_requests(sent: pd.DataFrame, derived: pd.DataFrame, slo: dict, mode: str) -> pd.Series:
    """Requests that succeeded and met every SLO that is set; failures are never good. TPOT is undefined for a
    one-token answer, so the TPOT SLO does not apply to it."""
    keys = latency_keys(mode)
    good = sent["error_class"].isna()
    for key, column, missing in (
        ("ttft_ms", keys["ttft"], math.inf),
        ("ttfot_ms", "ttfot_sched_ms" if mode == "open" else "ttfot_ms", math.inf),  # no answer: never good
        ("tpot_ms", "tpot_ms", 0.0),
        ("e2e_ms", keys["e2e"], math.inf),
    ):
        limit = slo.get(key)
        if limit is not None:
            good &= derived[column].fillna(missing) <= limit
    return good


def failed_fast(frame: pd.DataFrame) -> pd.Series:
    """Requests that failed within ``FAST_FAIL_S`` of their start, before any token (``RequestRecord.failed_fast``)."""
    start = frame["t_connect"].fillna(frame["t_send"]) if "t_connect" in frame else frame["t_send"]
    failed = frame["error_class"].notna() & ~frame["error_class"].isin(NOT_SENT) & frame["t_first"].isna()
    return failed & (frame["error_class"].isin(NEVER_REACHED) | ((frame["t_done"] - start) < FAST_FAIL_S))


def window_requests(frame: pd.DataFrame, start: float, end: float) -> pd.DataFrame:
    """The requests in flight at some point of ``[start, end)``, whatever step sent them."""
    if not (math.isfinite(start) and math.isfinite(end)):
        return frame.iloc[0:0]
    last = frame["t_done"].fillna(frame["t_end"]) if "t_done" in frame else frame["t_end"]
    return frame[(frame["t_send"] < end) & (last >= start)]


def step_chunks(
    run: RunData, ok_rows: pd.DataFrame, overlapping: pd.DataFrame, start: float, end: float
) -> tuple[Chunks, np.ndarray]:
    """The chunks of a step's successful requests (``ok_rows``), and the window's token rate bins: the chunks of
    every successful request in flight in it (``overlapping``: ``window_requests``), whatever step sent it. A failed
    request's tokens (a stream cut by an error event, counts that are suspect) never feed a rate. The step's own
    chunks are read once for both; only the few requests of other steps in flight in the window are read apart."""
    in_flight = overlapping[overlapping["error_class"].isna()]
    chunks = Chunks.of(ok_rows, run.lists)
    # A request of the step outside the window's set keeps its chunks out of the rates by having no send time.
    t_send = ok_rows["t_send"].where(ok_rows.index.isin(in_flight.index)).to_numpy(dtype=float)
    others = in_flight[~in_flight.index.isin(ok_rows.index)]
    slices = chain(
        chunks.arrivals_in_slices(t_send),
        Chunks.of(others, run.lists).arrivals_in_slices(others["t_send"].to_numpy(dtype=float)),
    )
    return chunks, binned_rates(slices, start, end, RATE_BIN_S)


def gap_figures(chunks: Chunks) -> tuple[dict, dict]:
    """The ITL and ICL figures of a step's chunks. With one token in every chunk after the first they are the same
    values, and beyond ``LARGE`` of them no resampling tells the two apart: summarised once (each is a selection
    over tens of millions of values in a night's step)."""
    itl, weights = chunks.itl_ms()
    itl_figures = summarize(itl, n_boot=N_BOOT, weights=weights)
    one_each = (
        weights is None and itl.size > LARGE and itl.size == chunks.offset.size - np.count_nonzero(chunks.lengths)
    )
    del itl, weights
    if one_each:
        return itl_figures, copy.deepcopy(itl_figures)
    return itl_figures, summarize(chunks.icl_ms())


def step_summary(
    run: RunData, frame: pd.DataFrame, step: StepRow, slo: dict, repeated: pd.Series | None = None
) -> tuple[dict, tuple]:
    """Figures of one ladder step (requests sent in its steady window, tokens arriving in it), and its raw
    samples ``(token rate bins, good-request rate bins, per-request metrics)``. ``repeated``: per request of the
    variant, whether its prompt had been sent to its server before (``prompt_cache.repeated_prompts``)."""
    start, end = step.t_steady, step.t_end
    window = end - start if math.isfinite(start) and math.isfinite(end) and end > start else math.nan
    mode = step.mode
    timeouts = run.env.recorded_load.timeouts or {}
    sent = frame[(frame["step"] == step.step) & (frame["phase"] == "steady")]
    derived = request_metrics(sent, to_float(timeouts.get("first_token_s")))
    failed = sent["error_class"].notna()
    ok_rows = sent[~failed]
    overlapping = window_requests(frame, start, end)
    chunks, rates = step_chunks(run, ok_rows, overlapping, start, end)
    derived = derived.join(chunk_split(ok_rows, chunks))
    derived = derived.join(reasoning_metrics(sent, chunks, ok_rows.index, to_float(timeouts.get("first_token_s"))))
    bin_tokens = positions_spec(run).bin_tokens
    derived = derived.join(request_positions(len(ok_rows), chunks, bin_tokens).set_axis(ok_rows.index))
    itl_figures, icl_figures = gap_figures(chunks)
    e2e = derived[latency_keys(mode)["e2e"]].to_numpy(dtype=float)
    p95_e2e_s = float(np.nanpercentile(e2e, 95)) / 1000.0 if np.isfinite(e2e).any() else None
    batches = step_batches(frame[frame["step"] == step.step], start, end, p95_e2e_s)
    throughput = batch_ratio(batches)
    good = good_requests(sent, derived, slo, mode)
    good_rates = rate_samples(sent.loc[good, "t_send"].to_numpy(dtype=float), None, start, end, RATE_BIN_S)
    per_window = (lambda count: count / window) if math.isfinite(window) else (lambda count: None)
    summary: dict = {
        "step": step.step,
        "level": step.level,
        "mode": mode,
        "users": step.users,
        "context": step.context,
        "window_s": window if math.isfinite(window) else None,
        "requests": int(len(sent)),
        "errors": int(failed.sum()),
        "error_rate": float(failed.mean()) if len(sent) else None,
        "errors_by_class": {str(k): int(v) for k, v in sent.loc[failed, "error_class"].value_counts().items()},
        "suspect_usage": int((sent["error_class"] == ErrorClass.SUSPECT_USAGE).sum()),
        "failed_fast": int(failed_fast(sent).sum()) if "t_done" in sent else 0,
        "output_tokens": int(ok_rows["output_tokens"].sum()),
        "good_output_tokens": int(sent.loc[good, "output_tokens"].sum()),
        "output_tps": throughput.value,
        "output_tps_ci95": throughput.ci95,
        "throughput": {
            "method": throughput.method,
            "batches": throughput.batches,
            "cycles": batches.cycles,
            "users": batches.users,
            "covered_s": throughput.covered_s,
            "note": throughput.note,
        },
        "request_rate": per_window(len(sent)),
        "goodput_rps": per_window(float(good.sum())),
        "itl_ms": itl_figures,
        "icl_ms": icl_figures,
        "itl_approximate": float(ok_rows["token_source"].isin(APPROXIMATE_SOURCES).mean()) if len(ok_rows) else None,
        "token_sources": {str(k): int(v) for k, v in sent["token_source"].value_counts().items()},
        "reasoning": step_reasoning(derived),
        "decode_by_position": step_positions(derived, bin_tokens),
    }
    for name in CLOSED_FIELDS + (OPEN_FIELDS if mode == "open" else ()):
        summary[name] = summarize(derived[name].to_numpy(dtype=float), n_boot=N_BOOT)
    shared = run.env.recorded_load.shared_prefix
    summary["prompt_cache"] = request_cache(
        sent,
        derived[latency_keys(mode)["ttft"]],
        cache_mode(run.env),
        repeated,
        (shared.tokens or 0) if shared else 0,
        across_runs(run.env),
    )
    if mode == "open":
        scheduled = (
            frame["t_intended"].between(start, end, inclusive="left")
            if math.isfinite(window)
            else pd.Series(False, index=frame.index)
        )
        summary["offered_rate"] = step.level
        summary["scheduled_rate"] = per_window(float(scheduled.sum()))
        # Dropped arrivals were never sent: their t_send stays NaN.
        summary["achieved_rate"] = per_window(float(sent["t_send"].notna().sum()))
        held = derived["held_ms"].notna()
        summary["held"] = int(held.sum())
        summary["held_ms"] = summarize(derived.loc[held, "held_ms"].to_numpy(dtype=float), n_boot=N_BOOT)
    drafted = sent["draft_n"].dropna().sum()
    if drafted:
        accepted = sent["draft_accepted"].dropna().sum()
        summary["acceptance_client"] = {
            "rate": float(accepted / drafted),
            "draft_tokens": int(drafted),
            "accepted_tokens": int(accepted),
            "source": "client (per-request timings)",
        }
    if len(ok_rows):
        summary["tokens_per_chunk"] = {
            "value": float(ok_rows["output_tokens"].sum() / max(len(chunks.offset), 1)),
            "source": "client (tokens / token-carrying chunks)",
        }
    in_flight = occupancy_samples(*in_flight_spans(overlapping), start, end, RATE_BIN_S)
    summary.update(steadiness(mode, rates, batches, in_flight, start, end, ok_rows, derived.loc[ok_rows.index]))
    # Without an SLO goodput is every success: no delay of the client's can move it.
    slo_set = any(v is not None for v in slo.values())
    count_good = (lambda metrics: int(good_requests(sent, metrics, slo, mode).sum())) if slo_set else None
    requests = Requests(sent, derived, overlapping, count_good, intended_waits_s(frame, start, end, think_of(run)))
    summary.update(client_validity(run.client, summary, start, end, requests))
    extended = to_float(step.extended_s)
    summary["extended_s"] = extended if math.isfinite(extended) else 0.0
    summary["host"] = host_load(run.host, start, end)
    summary["workers_lost"] = list(step.workers_lost or [])
    summary["faults"] = [fault.model_dump(exclude_unset=True) for fault in step.faults or []]
    summary["status"], summary["status_reasons"] = step_status(summary, summary["host"], run.env.recorded_load)
    keys = [c for c in [*PAIR_KEY, "bucket"] if c in sent]
    requests = pd.concat([sent[keys].reset_index(drop=True), derived.reset_index(drop=True)], axis=1)
    if "seq" not in requests:
        requests["seq"] = -1
    for column in (c for c in TURN_COLUMNS if c in sent and "turn" in sent):
        requests[column] = sent[column].where(~failed).to_numpy(dtype=float)
    summary["by_turn"] = by_turn(sent, derived, mode)
    summary["conversations"] = step_conversations(frame[frame["step"] == step.step])
    summary["trace"] = trace_step(frame[frame["step"] == step.step], step.level, run.env)
    return summary, (rates, good_rates, requests, batches)


def headline_ttft(run: RunData) -> str:
    """``ttft`` or ``ttfot``: which time to first token the run's headline reads (``load.reasoning.headline_ttft``)."""
    reasoning = ReasoningSpec.model_validate(run.env.recorded_load.reasoning or {})
    return "ttfot" if reasoning.headline_ttft == "first_output" else "ttft"


def think_of(run: RunData) -> Think:
    """The waits the run's scenario asked of its users (never the client's time)."""
    load = run.env.recorded_load
    think_s = to_float(load.think_time_s)
    turn_s = (load.conversation.think_s or 0.0) if load.conversation else 0.0
    return Think(think_s if think_s > 0 else 0.0, turn_s)


def positions_spec(run: RunData) -> PositionsSpec:
    """How the run asked for positions to be binned (runs before the setting: the default)."""
    return PositionsSpec.model_validate(run.env.recorded_load.positions or {})


def _binned_drift(values: np.ndarray, start: float) -> dict | None:
    return drift(start + RATE_BIN_S * (np.arange(values.size) + 0.5), values) if values.size >= 3 else None


def _request_drift(ok_rows: pd.DataFrame, values: pd.Series) -> dict | None:
    mask = values.notna().to_numpy()
    return drift(ok_rows["t_send"].to_numpy()[mask], values.to_numpy()[mask]) if mask.sum() >= 3 else None


def steadiness(
    mode: str,
    rates: np.ndarray,
    batches: Batches,
    in_flight: np.ndarray,
    start: float,
    end: float,
    ok_rows: pd.DataFrame,
    derived: pd.DataFrame,
) -> dict:
    """Drift within the steady window, judged as an equivalence test (``steady.drift``: steady, unsteady or too
    noisy). Closed loop: throughput decides, over the request-cycle batches when there are at least
    ``MIN_BATCHES`` of them (fewer: not judged, the step has no throughput interval either); runs that recorded no
    users, over per-second bins (AR(1)-aware); TPOT (per request, by send time) is shown.
    Open loop: the offered rate sets throughput, so what the server controls decides: E2E from the intended send
    per request, and the requests in flight per second (a server falling behind piles them up); throughput and
    TPOT are shown. ``steady``: False when any deciding check is unsteady, else None when any is too noisy."""
    throughput = _binned_drift(rates, start) if batches.method != "cycles" else batch_drift(batches, start, end)
    check = {
        "throughput": throughput,
        "tpot": _request_drift(ok_rows, derived["tpot_ms"]),
    }
    deciding = ["throughput"]
    if mode == "open":
        check["latency"] = _request_drift(ok_rows, derived["e2e_sched_ms"])
        check["in_flight"] = _binned_drift(in_flight, start)
        deciding = ["latency", "in_flight"]
    verdicts = [c["steady"] for k in deciding if (c := check.get(k)) is not None]
    steady = False if False in verdicts else None if None in verdicts or not verdicts else True
    return {"steady": steady, "steady_check": check}


def greedy_checks(run: RunData, summary: Summary) -> tuple[Agreement | None, dict[str, GreedyCheck]]:
    """The baseline's consistency answers against its own repeat, and each other variant's greedy check."""
    reference = run.consistency.get(summary.baseline or "", [])
    repeat = None
    if any(answer.repeat is not None for answer in reference):
        again = [answer.repeat or Answer(text=None, error="not asked again") for answer in reference]
        repeat = Agreement.model_validate(agreement([a.prompt_id for a in reference], reference, again))
    tasks = summary.quality.variants if summary.quality is not None else {}
    names = [n for n in summary.variants if n != summary.baseline and (n in summary.consistency or n in tasks)]
    checks = {
        name: greedy_check(summary.consistency.get(name), tasks[name].agreement if name in tasks else None, repeat)
        for name in names
    }
    return repeat, checks


def attach_server_figures(entry: dict, server: dict | None) -> None:
    """The server's view of each step beside the client's: acceptance from both sources, the cross-check, and the
    prompt cache finished with the server's counters (every step, with telemetry or without)."""
    by_step = {s["step"]: s for s in (server or {}).get("steps", [])}
    for step in entry["steps"]:
        figures = by_step.get(step["step"])
        finish_prompt_cache(step["prompt_cache"], (figures or {}).get("prompt_cache"))
        if figures is None:
            continue
        step["server"] = figures
        step["acceptance"] = {
            "server": figures.get("acceptance"),
            "client": step.get("acceptance_client"),
            "tokens_per_chunk": step.get("tokens_per_chunk"),
        }
        step["server_vs_client"] = cross_check(figures, step)
    if not server:
        entry["telemetry"] = {"missing": "no telemetry recorded for this variant"}
        return
    entry["acceptance_vs_load"] = server.get("acceptance_vs_load")
    entry["memory_trend"] = server.get("memory_trend")
    entry["telemetry"] = {"engine": server.get("engine"), "sources": server.get("sources"), "gaps": server.get("gaps")}


def level_throughputs(by_level: dict[float, LevelSamples]) -> list[LevelThroughput]:
    """Each clean level's throughput (its blocks' batches joined) with the error of its logarithm; levels without
    an interval are left out."""
    points = []
    for level in sorted(by_level):
        if by_level[level].clean:
            figure = batch_ratio(by_level[level].throughput_batches)
            if figure.value is not None and figure.se_log is not None:
                points.append(LevelThroughput(level, figure.value, figure.se_log, figure.df))
    return points


def variant_curves(by_level: dict[float, LevelSamples], mode: str, ttft: str = "ttft") -> dict:
    """Saturation and knee over the levels measured cleanly (a level's blocks pooled into one point); ``ttft`` is the
    headline's time to first token (``ttfot``: the first answer token). Closed loop: the knee from throughput
    elasticity (``curves.throughput_knee``); open loop, where the offered rate sets throughput: from P95 latency."""
    levels = sorted(level for level, samples in by_level.items() if samples.clean)
    points = level_throughputs(by_level)
    threshold = KNEE_THRESHOLD.get(mode, 1.0)
    columns = {"tpot_ms": "tpot_ms", "ttft_ms": latency_keys(mode)["ttft"].replace("ttft", ttft)}
    knees = {}
    for name, column in columns.items():
        p95 = [percentile_of(by_level[level].values(column), 95) for level in levels]
        knees[name] = knee_level(levels, p95, threshold)
    found = [k for k in knees.values() if k is not None]
    saturated = saturation(points)
    if mode == "closed":
        knee = throughput_knee(points)
        knee_rule = (
            f"first clean level whose next segment's throughput elasticity has its 95% upper bound below "
            f"{KNEE_ELASTICITY:g}"
        )
    else:
        level = min(found) if found else None
        knee = {
            "level": level,
            "status": "reached" if level is not None else "not reached",
            "text": f"P95 latency grows faster than load after {level:g} (no interval)"
            if level is not None
            else "P95 latency never grows faster than load",
            "segments": [],
        }
        knee_rule = (
            f"first clean level after which P95 TPOT or {columns['ttft_ms']} grows with log-log slope > {threshold}"
        )
    return {
        "saturation_level": saturated["level"],
        "knee_level": knee["level"],
        "saturation": saturated,
        "knee": knee,
        "knee_by_metric": knees,
        "rules": {
            "saturation": f"first clean level whose throughput gain to every higher clean level has its 95% upper "
            f"bound below {SATURATION_MIN_GAIN:.0%}",
            "knee": knee_rule,
        },
    }


Samples = dict[str, dict[float, LevelSamples]]  # variant -> level -> samples


@dataclass
class Analysed:
    """Per variant: the step figures (with their status), the clean samples per level and the load mode; per
    context length (context-axis steps) the samples by variant and level; and the scale-out steps, kept apart
    from the ladder's levels (``analysis.scale_out``)."""

    variants: dict[str, dict] = field(default_factory=dict)
    samples: Samples = field(default_factory=dict)
    modes: dict[str, str] = field(default_factory=dict)
    contexts: dict[int, Samples] = field(default_factory=dict)
    scaled: dict[str, list[ScaleBlock]] = field(default_factory=dict)
    positioned: Samples = field(default_factory=dict)  # the ladder's requests by output position (``positions``)


def analyse(run: RunData) -> Analysed:
    frame = run.requests
    slo = run.env.recorded_scenario.slo or {}
    out = Analysed()
    per_variant: dict[str, pd.DataFrame] = {}
    repeats: dict[str, pd.Series | None] = {}
    for step in run.steps:
        name = step.variant
        if name not in per_variant:
            mine = frame["variant"] == name
            per_variant[name] = frame if mine.all() else frame[mine]
            repeats[name] = repeated_prompts(per_variant[name])
        out.modes[name] = step.mode
        figures, (rates, good_rates, requests, batches) = step_summary(run, per_variant[name], step, slo, repeats[name])
        if step.servers:
            out.scaled.setdefault(name, []).append(ScaleBlock(step, figures, rates, good_rates))
            continue
        out.variants.setdefault(name, {"steps": []})["steps"].append(figures)
        by_level = out.contexts.setdefault(int(step.context), {}) if step.context else out.samples
        level = by_level.setdefault(name, {}).setdefault(float(step.level), LevelSamples())
        bounds = figures["client_validity"].get("bounds")
        level.add(step.step, figures["status"], figures["status_reasons"], rates, good_rates, requests, bounds, batches)
        if not step.context:
            status = "clean" if figures["status"] in POSITION_STATUSES else figures["status"]
            positioned = out.positioned.setdefault(name, {}).setdefault(float(step.level), LevelSamples())
            positioned.add(step.step, status, figures["status_reasons"], rates, good_rates, requests, bounds)
    for entry in out.variants.values():
        flag_anomalies([s for s in entry["steps"] if s.get("context") is None])
    return out


def sweep_schedules(
    sweeps: dict[str, dict],
    comparisons: list[dict],
    variants: dict[str, dict],
    blocked: dict[str, str],
    events: list[Event],
) -> list[dict]:
    """Per swept setting, the best value per level, the schedule and where the run stopped climbing (the sweeps
    measured against a baseline); settings that are not eligible (``blocked``) are never chosen."""
    out = []
    for name, sweep in sweeps.items():
        measured = [v for v in sweep["variants"] if v in variants]
        if not measured or not comparisons:
            continue
        acceptance = {
            v: {
                level: level_acceptance(
                    [s for s in variants[v]["steps"] if s["level"] == level and s.get("context") is None]
                )
                for level in {s["level"] for s in variants[v]["steps"]}
            }
            for v in measured
        }
        out.append(sweep_schedule({"name": name, **sweep}, comparisons, acceptance, set(blocked), events))
    return out


def context_comparisons(
    baseline: str | None,
    contexts: dict[int, Samples],
    variants: dict[str, dict],
    modes: dict[str, str],
    ladder: tuple[int, Samples, list[dict]] | None,
) -> list[dict]:
    """Per context length: each variant's figures per level and the comparisons with the baseline. ``ladder``
    (its prompt length, samples and comparisons) puts the ladder's levels first, as the shortest length."""
    out = []
    points: list[tuple[int, Samples, list[dict] | None]] = [(c, contexts[c], None) for c in sorted(contexts)]
    if contexts and ladder is not None and ladder[0] not in contexts:
        points.insert(0, ladder)
    for context, by_variant, comparisons in points:
        own = None if comparisons is not None else context  # the ladder's steps carry no context
        figures = {
            name: [
                context_figures(
                    level,
                    by_level[level],
                    [s for s in variants[name]["steps"] if s.get("context") == own and s["level"] == level],
                    modes[name],
                )
                for level in sorted(by_level)
            ]
            for name, by_level in by_variant.items()
        }
        if comparisons is None:
            comparisons = (
                [
                    comparison(baseline, name, by_variant[baseline], by_variant[name], modes[name])
                    for name in by_variant
                    if name != baseline
                ]
                if baseline in by_variant
                else []
            )
        out.append({"context_tokens": context, "ladder": own is None, "variants": figures, "comparisons": comparisons})
    return out


def ladder_point(run: RunData, samples: Samples, comparisons: list[dict]) -> tuple | None:
    """The ladder as a point of the context axis: generated prompts of one length only (no buckets, no dataset)."""
    load = run.env.recorded_load
    if load.buckets or load.dataset or not load.prompt_tokens:
        return None
    return load.prompt_tokens, samples, comparisons


def context_figures(level: float, samples: LevelSamples, steps: list[dict], mode: str = "closed") -> dict:
    """One variant at one level of a context length: latency medians and speeds over its clean requests, and
    acceptance from the server (pooled over its clean steps) and from the responses (``analysis.acceptance``:
    intervals by resampling requests)."""
    clean = [s for s in steps if s["status"] == "clean"]
    return {
        "level": level,
        "clean": samples.clean,
        "requests": int(len(samples.requests)),
        "ttft_p50_ms": percentile_of(samples.values(latency_keys(mode)["ttft"]), 50),
        "cached_fraction": pooled_fraction(steps),
        "tpot_p50_ms": percentile_of(samples.values("tpot_ms"), 50),
        "decode_tps": mean_of(samples.values("decode_tps")),
        "e2e_tps": mean_of(samples.values("e2e_tps")),
        "output_tps": float(samples.token_rates.mean()) if samples.clean else None,
        "acceptance_server": level_acceptance(clean),
        "acceptance_client": request_acceptance(samples) if samples.clean else None,
    }


def build_summary(run: RunData) -> Summary:
    frame = run.requests
    slo = run.env.recorded_scenario.slo or {}
    baseline = run.env.baseline
    analysed = analyse(run)
    variants, samples, modes, contexts = analysed.variants, analysed.samples, analysed.modes, analysed.contexts
    # Which variants a recommendation may choose: computed once, consulted by every recommendation below.
    quality = quality_summary(run.quality, baseline, list(variants))
    blocked = not_eligible(quality)
    server = server_figures(run.telemetry, run.telemetry_meta, run.steps)
    for name, entry in variants.items():
        entry.update(variant_curves(samples.get(name, {}), modes[name], headline_ttft(run)))
        attach_server_figures(entry, server["variants"].get(name))
    comparisons = []
    if baseline in samples:
        comparisons = [
            comparison(baseline, name, samples[baseline], samples[name], modes[name])
            for name in samples
            if name != baseline
        ]
        add_breakdowns(comparisons, variants, samples)
        level_caches(comparisons, variants)
        add_reasoning_speedups(comparisons, samples, modes)
        mark_not_eligible(comparisons, blocked)
    schedules = sweep_schedules(run.env.recorded_scenario.sweeps or {}, comparisons, variants, blocked, run.events)
    axis = context_comparisons(baseline, contexts, variants, modes, ladder_point(run, samples, comparisons))
    for point in axis:
        if not point["ladder"]:  # the ladder's comparisons are marked already
            mark_not_eligible(point["comparisons"], blocked)
    consistency = {}
    if baseline in run.consistency:
        reference = run.consistency[baseline]
        consistency = {
            name: agreement([answer.prompt_id for answer in reference], reference, outputs)
            for name, outputs in run.consistency.items()
            if name != baseline
        }
    summary = Summary.model_validate(
        json_safe(
            {
                "run_id": run.env.run_id,
                "generated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "baseline": baseline,
                "headline_ttft": headline_ttft(run),
                "records": int(len(frame)),
                "slo": slo,
                "variants": variants,
                "comparisons": comparisons,
                "schedules": schedules,
                "contexts": axis,
                "categories": category_comparisons(comparisons, samples, modes),
                "positions": positions_summary(analysed.positioned, baseline, modes, positions_spec(run).bin_tokens),
                "images": image_overhead(run, variants),
                "conversations": conversation_summary(frame, samples, baseline, run.env.recorded_load, modes),
                "probes": probe_summary(run, variants),
                "detected": detected(run, variants),
                "checks_skipped": run.env.checks_skipped,
                "consistency": consistency,
                "events": run.events,
                "errors": error_samples(frame),
            }
        )
    )
    summary.soak = soak_summary(summary, run.steps, run.env)
    summary.quality = quality
    summary.baseline_repeat, summary.greedy = greedy_checks(run, summary)
    summary.scale_out = scale_out_summary(run.env, analysed.scaled, frame)
    cost = run.env.recorded_scenario.cost
    if cost:  # priced only when the scenario gives prices: there is no built-in price list
        summary.cost = cost_summary(summary, samples, CostSpec.model_validate(cost), gates_of(run.env))
    return summary

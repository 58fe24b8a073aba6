"""Per-step server figures from the telemetry rows, its meta (``telemetry.json``) and the steps' steady windows.

Pure (pandas/numpy; no Locust). For every variant and step window ``[t_steady, t_end]``:

* **acceptance** (``source: "server"``) from counter deltas: rate = Δaccepted / Δdraft_tokens, mean acceptance
  length = 1 + Δaccepted / Δdrafts, per position i = Δaccepted_pos_i / Δdrafts (docs/metrics.md, "Metric definitions").
  A delta uses, per series, the samples nearest the window edges (each must lie within ``edge_tolerance_s`` of its edge)
  and sums the increments between them, so a counter reset (server restart) does not go negative. SGLang
  has no counters for this, only *interval gauges*: their mean over the window is reported, flagged as such,
  never differenced.
* the prompt cache's share of the window's prompt tokens from the engine's cache counters (``server_cache``);
* requests running / waiting and KV-cache use (mean, max over the samples in the window), preemptions
  (delta), the server's own TTFT / ITL / TPOT / e2e / queue / prefill / decode histograms (Δsum / Δcount);
* GPU utilisation, memory (mean and peak), power, SM clock, temperature and the DCGM profiling ratios when a
  GPU source exists; otherwise the server process's CPU cores and resident memory;
* per variant: acceptance versus load, and memory growth over the whole run as a slope with its 95% CI;
* ``missing``: every figure that could not be computed, with the reason (not exposed, gap, no sample near an
  edge, nothing observed), and ``partial``: figures computed over a window that a telemetry gap overlaps.

A metric absent from the telemetry is missing, never zero.
"""

from __future__ import annotations

import json
import math
from typing import Any, cast

import numpy as np
import pandas as pd

from ..rundir.steps import StepRow
from ..rundir.telemetry_meta import TelemetryGap, TelemetryMeta
from ..telemetry.maps import CANONICAL, COUNTER, HISTOGRAM, canonical_of, histogram_parts
from .steady import drift
from .values import json_safe, to_float

__all__ = [
    "VariantTelemetry",
    "acceptance",
    "counter_increments",
    "cross_check",
    "hardware",
    "histograms",
    "impossible_counters",
    "memory_trend",
    "server_cache",
    "server_figures",
    "step_figures",
]

SERVER_SOURCES = ("scrape", "prometheus")  # the sources of the server's own metrics
# A counter's increase over one window beyond this is not a count (a page that says 1e308 or +Inf).
ABSURD_DELTA = 1e15
# When two sources carry the same canonical metric, the first listed wins.
SOURCE_PRIORITY = ("scrape", "prometheus", "nvml", "dcgm", "process")

HISTOGRAM_FIGURES = {
    "ttft_ms": "ttft_seconds",
    "itl_ms": "itl_seconds",
    "tpot_ms": "tpot_seconds",
    "e2e_ms": "e2e_seconds",
    "queue_ms": "queue_seconds",
    "prefill_ms": "prefill_seconds",
    "decode_ms": "decode_seconds",
}
# Figures SGLang gives only as a stage of its per-stage histogram: (stage label, how it is measured).
STAGE_FIGURES = {
    "prefill_ms": (
        "prefill_forward",
        'SGLang per_stage_req_latency_seconds{stage="prefill_forward"}: '
        "from forward entry to the end of prefill, chunks included",
    )
}
GPU_FIGURES = {
    "util": "gpu_util",
    "mem_used_mib": "gpu_mem_used_mib",
    "power_w": "gpu_power_w",
    "sm_clock_mhz": "gpu_sm_clock_mhz",
    "temp_c": "gpu_temp_c",
    "mem_copy_util": "gpu_mem_copy_util",
    "gr_engine_active": "gpu_gr_engine_active",
    "sm_active": "gpu_sm_active",
    "tensor_active": "gpu_tensor_active",
    "dram_active": "gpu_dram_active",
}
OPTIONAL_GPU = {"mem_copy_util", "gr_engine_active", "sm_active", "tensor_active", "dram_active"}

SGLANG_GAUGE_NOTE = (
    "SGLang exposes acceptance only as interval gauges (last decode-log window of batches): "
    "this is the mean of the samples in the window, not a counter delta; spec_accept_rate "
    "includes the bonus token and is not comparable with accepted/drafted"
)
ITL_NOTE = "vLLM's inter_token_latency is per engine step (several tokens under speculation); SGLang's is per token"


# -- small helpers ------------------------------------------------------------------------------
def counter_increments(values: np.ndarray) -> np.ndarray:
    """Increments between consecutive samples of a counter; a drop is a reset (server restart), counted from
    zero. The one rule for counters, used for window deltas and for rates over time alike."""
    values = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore", over="ignore"):  # +Inf - +Inf: NaN, judged by the caller (never a warning)
        steps = np.diff(values)
        return np.where(steps >= 0, steps, values[1:])


def _clean(value):
    if value is None:
        return None
    if isinstance(value, (np.integer,)):
        return int(value)
    value = float(value)
    return value if math.isfinite(value) else None


def _stat(values: np.ndarray) -> dict:
    values = values[np.isfinite(values)]
    if not values.size:
        return {"mean": None, "max": None, "min": None, "n": 0}
    return {"mean": float(values.mean()), "max": float(values.max()), "min": float(values.min()), "n": int(values.size)}


def _group_key(labels: str, group_by: str | None) -> str | None:
    if group_by is None:
        return None
    try:
        return str(json.loads(labels).get(group_by))
    except (ValueError, AttributeError):
        return None


class VariantTelemetry:
    """One variant's rows, indexed by canonical metric (the preferred source only)."""

    def __init__(self, frame: pd.DataFrame, meta: TelemetryMeta, variant: str):
        self.variant = variant
        self.meta = meta
        rows = frame[frame["variant"] == variant] if len(frame) else frame
        self.rows = rows
        self._source_times: dict[str, np.ndarray] = {}
        self.by_metric: dict[str, pd.DataFrame] = {}
        self.source_of: dict[str, str] = {}
        for key, group in rows.groupby("metric", sort=False):
            metric = cast(str, key)  # the metric column holds names
            sources = list(group["source"].unique())
            ranked = sorted(sources, key=lambda s: SOURCE_PRIORITY.index(s) if s in SOURCE_PRIORITY else 99)
            chosen = ranked[0]
            self.source_of[metric] = chosen
            self.by_metric[metric] = group[group["source"] == chosen].sort_values("t", kind="stable")
        interval = to_float(meta.interval_s)  # absent: 1 s, the poller's default
        timeout = to_float(meta.timeout_s)
        interval = interval if math.isfinite(interval) else 1.0
        timeout = timeout if math.isfinite(timeout) else interval
        # A sample counts as "at" a window edge when it lies within two poll periods plus a timeout of it.
        self.edge_tolerance_s = 2.0 * interval + timeout
        self.gaps = [g for g in meta.gaps if g.variant == variant]
        self.attachments = [a for a in meta.attachments if a.variant == variant]
        self.engine = self.attachments[0].engine if self.attachments else None
        self.spans: dict[str, tuple[float, float]] = {}  # metric -> times of the edge samples last used

    def absent(self) -> str:
        return self.unread() or (f"not exposed by the {self.engine} server" if self.engine else "not exposed")

    def unread(self) -> str | None:
        """Why the server's own metrics were never read (no sample of its scrape or Prometheus source, and a gap
        that says why); None when they were read. Only a page that was read and lacked a name is "not exposed"."""
        if len(self.rows) and self.rows["source"].isin(SERVER_SOURCES).any():
            return None
        errors = [g.error for g in self.gaps if g.source in SERVER_SOURCES and g.error]
        return f"not read: no sample of the server's metrics was recorded ({errors[0]})" if errors else None

    def source_times(self, source: str) -> np.ndarray:
        """Every instant at which ``source`` answered (any metric), sorted."""
        if source not in self._source_times:
            rows = self.rows[self.rows["source"] == source] if len(self.rows) else self.rows
            self._source_times[source] = np.unique(rows["t"].to_numpy(dtype=float)) if len(rows) else np.array([])
        return self._source_times[source]

    def has(self, metric: str) -> bool:
        return metric in self.by_metric and len(self.by_metric[metric]) > 0

    # -- counters -------------------------------------------------------------------------
    def counter_delta(self, metric: str, t0: float, t1: float) -> tuple[dict | None, str | None]:
        """``({group: delta}, None)`` or ``(None, reason)``; group is None unless the metric is grouped."""
        if not self.has(metric):
            return None, self.absent()
        found = canonical_of(metric)  # a histogram's _sum / _count groups as its histogram does
        spec = found[1] if found else None
        group_by = spec.group_by if spec is not None and spec.kind in (COUNTER, HISTOGRAM) else None
        out: dict = {}
        span: list[float] = []
        source_times = self.source_times(self.source_of[metric])
        for labels, series in self.by_metric[metric].groupby("labels", sort=False):
            t = series["t"].to_numpy(dtype=float)
            v = series["value"].to_numpy(dtype=float)
            if t[0] > t0 - self.edge_tolerance_s:
                # The series appeared after the source had already answered without it (llama.cpp creates
                # its per-position counters at the first speculative request): it was 0 then, not missing.
                earlier = source_times[source_times < t[0]]
                if earlier.size:
                    t, v = np.concatenate([[earlier[-1]], t]), np.concatenate([[0.0], v])
            i0 = int(np.argmin(np.abs(t - t0)))
            i1 = int(np.argmin(np.abs(t - t1)))
            if abs(t[i0] - t0) > self.edge_tolerance_s:
                return None, f"no sample within {self.edge_tolerance_s:.1f} s of the window start"
            if abs(t[i1] - t1) > self.edge_tolerance_s:
                return None, f"no sample within {self.edge_tolerance_s:.1f} s of the window end"
            if i1 <= i0:
                return None, "the same sample is nearest both window edges (window shorter than the poll interval)"
            increments = counter_increments(v[i0 : i1 + 1])
            key = _group_key(cast(str, labels), group_by)  # the labels column holds JSON text
            out[key] = out.get(key, 0.0) + float(increments.sum())
            span.extend([t[i0], t[i1]])
        self.spans[metric] = (min(span), max(span))
        return out, None

    def total_delta(self, metric: str, t0: float, t1: float) -> tuple[float | None, str | None]:
        deltas, reason = self.counter_delta(metric, t0, t1)
        if deltas is None:
            return None, reason
        return float(sum(deltas.values())), None

    # -- gauges ---------------------------------------------------------------------------
    def gauge_values(
        self, metric: str, t0: float, t1: float
    ) -> tuple[np.ndarray | None, np.ndarray | None, str | None]:
        """Values per sampling instant in [t0, t1], series combined by the metric's rule."""
        if not self.has(metric):
            return None, None, self.absent()
        rows = self.by_metric[metric]
        rows = rows[(rows["t"] >= t0) & (rows["t"] <= t1)]
        if not len(rows):
            return None, None, "no sample inside the window"
        spec = CANONICAL.get(metric)
        how = spec.combine if spec is not None else "sum"
        combined = rows.groupby("t", sort=True)["value"].agg(how)
        return combined.index.to_numpy(dtype=float), combined.to_numpy(dtype=float), None

    def gauge_stat(self, metric: str, t0: float, t1: float) -> tuple[dict | None, str | None]:
        _, values, reason = self.gauge_values(metric, t0, t1)
        if values is None:
            return None, reason
        stat = _stat(values)
        return (stat, None) if stat["n"] else (None, "no finite sample inside the window")

    # -- gaps -----------------------------------------------------------------------------
    def gaps_in(self, t0: float, t1: float, source: str | None = None) -> list[TelemetryGap]:
        out = []
        for gap in self.gaps:
            start = to_float(gap.start)
            end = to_float(gap.end)
            end = end if math.isfinite(end) else math.inf
            if start < t1 and end > t0 and (source is None or gap.source == source):
                out.append(gap)
        return out

    def coverage(self, metric: str, t0: float, t1: float) -> float:
        """Fraction of the window not inside a gap of the metric's source."""
        source = self.source_of.get(metric)
        if source is None or not (t1 > t0):
            return 0.0
        covered = t1 - t0
        for gap in self.gaps_in(t0, t1, source):
            end = to_float(gap.end)
            end = end if math.isfinite(end) else t1
            covered -= max(0.0, min(end, t1) - max(to_float(gap.start), t0))
        return max(0.0, covered / (t1 - t0))


# -- per-step figures ---------------------------------------------------------------------------
def acceptance(vt: VariantTelemetry, t0: float, t1: float, missing: list) -> dict | None:
    if vt.has("spec_draft_tokens") or vt.has("spec_accepted_tokens") or vt.has("spec_drafts"):
        out: dict = {"source": "server", "method": "counter deltas"}
        accepted, r_acc = vt.total_delta("spec_accepted_tokens", t0, t1)
        draft_tokens, r_dt = vt.total_delta("spec_draft_tokens", t0, t1)
        drafts, r_dr = vt.total_delta("spec_drafts", t0, t1)
        out.update(
            {
                "accepted_tokens": accepted,
                "draft_tokens": draft_tokens,
                "drafts": drafts,
                "rate": None,
                "mean_length": None,
                "per_position": None,
            }
        )
        impossible = impossible_counters(accepted, draft_tokens, drafts)
        if impossible:
            # Never a measurement: the raw deltas go into the reason only.
            out.update({"accepted_tokens": None, "draft_tokens": None, "drafts": None})
            for figure in ("acceptance.rate", "acceptance.mean_length", "acceptance.per_position"):
                missing.append({"figure": figure, "reason": impossible})
            return out
        if accepted is None or draft_tokens is None:
            missing.append({"figure": "acceptance.rate", "reason": r_acc or r_dt})
        elif draft_tokens <= 0:
            missing.append(
                {"figure": "acceptance.rate", "reason": "no draft tokens in the window (speculation inactive)"}
            )
        else:
            out["rate"] = accepted / draft_tokens
        if accepted is None or drafts is None:
            missing.append({"figure": "acceptance.mean_length", "reason": r_acc or r_dr})
        elif drafts <= 0:
            missing.append({"figure": "acceptance.mean_length", "reason": "no drafts in the window"})
        else:
            out["mean_length"] = 1.0 + accepted / drafts
        if vt.has("spec_accepted_per_pos") and drafts:
            per_pos, reason = vt.counter_delta("spec_accepted_per_pos", t0, t1)
            if per_pos is None:
                missing.append({"figure": "acceptance.per_position", "reason": reason})
            else:
                positions = sorted((k for k in per_pos if k is not None and k != "None"), key=_position_key)
                out["per_position"] = [per_pos[p] / drafts for p in positions]
                out["positions"] = positions
        elif not vt.has("spec_accepted_per_pos"):
            missing.append({"figure": "acceptance.per_position", "reason": "not exposed"})
        if drafts is not None and drafts > 0 and draft_tokens is not None:
            out["mean_draft_length"] = draft_tokens / drafts
        if accepted is not None and "spec_accepted_tokens" in vt.spans:
            out["t_from"], out["t_to"] = vt.spans["spec_accepted_tokens"]
        return out
    if vt.has("spec_accept_length_gauge") or vt.has("spec_accept_rate_gauge"):
        out = {
            "source": "server",
            "method": "interval gauges (mean over the window)",
            "note": SGLANG_GAUGE_NOTE,
            "rate": None,
            "per_position": None,
        }
        length, r_len = vt.gauge_stat("spec_accept_length_gauge", t0, t1)
        rate, r_rate = vt.gauge_stat("spec_accept_rate_gauge", t0, t1)
        out["mean_length"] = length["mean"] if length else None
        out["mean_length_gauge"] = length
        out["accept_rate_gauge"] = rate
        if length is None:
            missing.append({"figure": "acceptance.mean_length", "reason": r_len})
        if rate is None:
            missing.append({"figure": "acceptance.accept_rate_gauge", "reason": r_rate})
        missing.append({"figure": "acceptance.rate", "reason": "SGLang exposes no draft-token counters"})
        missing.append({"figure": "acceptance.per_position", "reason": "not exposed by SGLang"})
        verify, _ = vt.total_delta("spec_verify_calls", t0, t1)
        generated, _ = vt.total_delta("generation_tokens", t0, t1)
        if verify and generated is not None:
            out["mean_length_counters"] = generated / verify
            out["mean_length_counters_note"] = (
                "Δgeneration_tokens / Δspec_verify_calls; both counted when requests "
                "finish, the numerator includes each request's prefill token"
            )
        return out
    reason = vt.unread() or "not exposed (no speculative-decoding metrics on this server)"
    for figure in ("acceptance.rate", "acceptance.mean_length", "acceptance.per_position"):
        missing.append({"figure": figure, "reason": reason})
    return None


def impossible_counters(accepted: float | None, draft_tokens: float | None, drafts: float | None) -> str | None:
    """Why the server's speculative-decoding counters over a window cannot all be true (None when they can): a
    delta that is not finite or absurdly large, or more accepted tokens than drafted ones. The raw deltas are
    named."""
    raw = f"Δaccepted {accepted!r}, Δdraft tokens {draft_tokens!r}, Δdrafts {drafts!r}"
    known = [v for v in (accepted, draft_tokens, drafts) if v is not None]
    if any(not math.isfinite(v) or v > ABSURD_DELTA for v in known):
        return f"impossible server counters ({raw}): not finite or above {ABSURD_DELTA:g}; not shown"
    if accepted is not None and draft_tokens is not None and accepted > draft_tokens:
        return f"impossible server counters ({raw}): more tokens accepted than drafted; not shown"
    return None


CACHE_SOURCES = {
    "queries": "server counters: Δprefix_cache_hits / Δprefix_cache_queries (vLLM)",
    "computed": "server counters: Δprompt_tokens_cached / (Δprompt_tokens + Δprompt_tokens_cached) (llama.cpp, whose "
    "prompt_tokens are the computed ones)",
    "all": "server counters: Δcached_tokens / Δprompt_tokens (SGLang; vLLM's prompt_tokens_cached)",
}


def server_cache(vt: VariantTelemetry, t0: float, t1: float, missing: list) -> dict | None:
    """The share of the window's prompt tokens the server served from its prompt cache, from its counters."""
    if vt.has("prefix_cache_queries"):
        cached, r_cached = vt.total_delta("prefix_cache_hits", t0, t1)
        prompt, r_prompt = vt.total_delta("prefix_cache_queries", t0, t1)
        how = "queries"
    elif vt.has("prompt_cached_tokens") or (vt.engine == "sglang" and vt.has("prompt_tokens")):
        # SGLang creates its cached-tokens series at the first hit: absent beside its prompt counter, it is 0.
        cached, r_cached = (
            vt.total_delta("prompt_cached_tokens", t0, t1) if vt.has("prompt_cached_tokens") else (0, None)
        )
        if vt.has("prompt_tokens_computed"):
            computed, r_prompt = vt.total_delta("prompt_tokens_computed", t0, t1)
            prompt, how = (None if computed is None or cached is None else computed + cached), "computed"
        else:
            (prompt, r_prompt), how = vt.total_delta("prompt_tokens", t0, t1), "all"
    else:
        missing.append({"figure": "prompt_cache", "reason": f"{vt.absent()} (no prompt-cache counters)"})
        return None
    if cached is None or prompt is None:
        missing.append({"figure": "prompt_cache", "reason": r_cached or r_prompt})
        return None
    if prompt <= 0:
        missing.append({"figure": "prompt_cache", "reason": "no prompt tokens counted in the window"})
        return None
    # The counters cover the span between the samples nearest the window's edges (a poll interval apart at most).
    span = vt.spans.get(
        {"queries": "prefix_cache_queries", "computed": "prompt_tokens_computed"}.get(how, "prompt_tokens")
    )
    return {
        "cached_fraction": cached / prompt,
        "cached_tokens": float(cached),
        "prompt_tokens": float(prompt),
        "source": CACHE_SOURCES[how],
        "span": list(span) if span else None,
    }


def _position_key(position: str):
    try:
        return (0, int(position))
    except (TypeError, ValueError):
        return (1, str(position))


def _stage_delta(
    vt: VariantTelemetry, stage: str, t0: float, t1: float
) -> tuple[float | None, float | None, str | None]:
    """Δsum and Δcount of one stage of SGLang's per-stage histogram (the other stages left out)."""
    sums, r_sum = vt.counter_delta("stage_seconds_sum", t0, t1)
    counts, r_count = vt.counter_delta("stage_seconds_count", t0, t1)
    if sums is None or counts is None:
        return None, None, r_sum or r_count
    if stage not in counts:
        return None, None, f"no {stage} stage in the per-stage histogram"
    return sums.get(stage, 0.0), counts[stage], ""


def histograms(vt: VariantTelemetry, t0: float, t1: float, missing: list) -> dict:
    out: dict[str, dict[str, object]] = {}
    for figure, metric in HISTOGRAM_FIGURES.items():
        sum_name, count_name = histogram_parts(metric)
        if figure in STAGE_FIGURES and not vt.has(sum_name) and vt.has("stage_seconds_sum"):
            stage, note = STAGE_FIGURES[figure]
            total, count, reason = _stage_delta(vt, stage, t0, t1)
            if total is None or count is None:  # both or neither
                missing.append({"figure": f"server_latency.{figure}", "reason": reason})
            elif count <= 0:
                missing.append({"figure": f"server_latency.{figure}", "reason": "no observations in the window"})
            else:
                out[figure] = {"mean": 1000.0 * total / count, "n": round(count), "note": note}
            continue
        total, r_sum = vt.total_delta(sum_name, t0, t1)
        count, r_count = vt.total_delta(count_name, t0, t1)
        if total is None or count is None:
            missing.append({"figure": f"server_latency.{figure}", "reason": r_sum or r_count})
            continue
        if count <= 0:
            missing.append({"figure": f"server_latency.{figure}", "reason": "no observations in the window"})
            continue
        entry: dict[str, object] = {"mean": 1000.0 * total / count, "n": round(count)}
        if figure == "itl_ms":
            entry["note"] = ITL_NOTE
        out[figure] = entry
    return out


def hardware(vt: VariantTelemetry, t0: float, t1: float, missing: list) -> tuple[dict | None, dict | None]:
    gpu: dict[str, Any] | None = None  # a GpuFigures document's fields
    if any(vt.has(m) for m in GPU_FIGURES.values()):
        gpu = {"source": next(vt.source_of[m] for m in GPU_FIGURES.values() if vt.has(m))}
        devices: set[str | None] = set()
        for figure, metric in GPU_FIGURES.items():
            stat, reason = vt.gauge_stat(metric, t0, t1)
            if stat is None:
                if figure not in OPTIONAL_GPU or vt.has(metric):
                    missing.append({"figure": f"gpu.{figure}", "reason": reason})
                continue
            gpu[figure] = stat
            rows = vt.by_metric[metric]
            devices.update(_group_key(lbl, "gpu") for lbl in rows["labels"].unique())
        if "mem_used_mib" in gpu:
            gpu["mem_peak_mib"] = gpu["mem_used_mib"]["max"]
        gpu["devices"] = len(devices)
    process: dict[str, Any] | None = None
    if vt.has("process_rss_mib") or vt.has("process_cpu_cores"):
        process = {"source": "process"}
        for figure, metric in (("cpu_cores", "process_cpu_cores"), ("rss_mib", "process_rss_mib")):
            stat, reason = vt.gauge_stat(metric, t0, t1)
            if stat is None:
                missing.append({"figure": f"process.{figure}", "reason": reason})
            else:
                process[figure] = stat
    if gpu is None:
        missing.append({"figure": "gpu", "reason": vt.meta.gpu or "no GPU telemetry"})
        if process is None:
            missing.append({"figure": "process", "reason": "server process not known (external server?)"})
    return gpu, process


def step_figures(vt: VariantTelemetry, window: StepRow) -> dict:
    t0, t1 = window.t_steady, window.t_end
    base = {
        "step": window.step,
        "level": window.level,
        "window": [_clean(t0), _clean(t1)],
        "source": "server",
        "sources": sorted(set(vt.source_of.values())),
    }
    missing: list[dict] = []
    if not (math.isfinite(t0) and math.isfinite(t1) and t1 > t0):
        return {**base, "missing": [{"figure": "all", "reason": "the step has no steady window"}], "partial": []}
    figures: dict = {"acceptance": acceptance(vt, t0, t1, missing)}
    for figure, metric in (
        ("requests_running", "requests_running"),
        ("requests_waiting", "requests_waiting"),
        ("kv_cache_usage", "kv_cache_usage"),
        ("busy_slots_per_decode", "busy_slots_per_decode"),
    ):
        stat, reason = vt.gauge_stat(metric, t0, t1)
        figures[figure] = stat
        if stat is None:
            missing.append({"figure": figure, "reason": reason})
    preempt, reason = vt.total_delta("preemptions", t0, t1)
    figures["preemptions"] = preempt
    if preempt is None:
        missing.append({"figure": "preemptions", "reason": reason})
    generated, reason = vt.total_delta("generation_tokens", t0, t1)
    figures["generation_tokens"] = generated
    figures["prompt_cache"] = server_cache(vt, t0, t1, missing)
    figures["server_latency"] = histograms(vt, t0, t1, missing)
    figures["gpu"], figures["process"] = hardware(vt, t0, t1, missing)
    gaps = vt.gaps_in(t0, t1)
    partial = []
    if gaps:
        for metric in sorted(vt.source_of):
            cover = vt.coverage(metric, t0, t1)
            if cover < 1.0:
                partial.append({"metric": metric, "coverage": round(cover, 4)})
        for entry in missing:
            if str(entry["reason"]).startswith("no sample"):
                entry["reason"] += f" (telemetry gap: {gaps[0].error})"
    return {**base, **figures, "gaps": [_gap_view(g) for g in gaps], "missing": missing, "partial": partial}


def _gap_view(gap: TelemetryGap) -> dict:
    return {"source": gap.source, "start": gap.start, "end": gap.end, "recovered": gap.recovered, "error": gap.error}


def memory_trend(vt: VariantTelemetry) -> dict | None:
    """Memory growth over the variant's whole telemetry: OLS slope (MiB/min) with its 95% CI."""
    for metric in ("gpu_mem_used_mib", "process_rss_mib"):
        if not vt.has(metric):
            continue
        rows = vt.by_metric[metric]
        times, values, _ = vt.gauge_values(metric, float(rows["t"].min()), float(rows["t"].max()))
        if times is None or values is None:  # both or neither
            continue
        fit = drift(times, values)
        slope = fit["slope"]
        ci = fit["ci95"]
        return {
            "metric": metric,
            "unit": "MiB/min",
            "source": vt.source_of[metric],
            "slope": None if slope is None else 60.0 * slope,
            "ci95": None if ci is None else [60.0 * ci[0], 60.0 * ci[1]],
            "growing": None if ci is None else bool(ci[0] > 0),
            "start_mib": float(values[0]),
            "end_mib": float(values[-1]),
            "peak_mib": float(values.max()),
            "n": fit["n"],
            "window_s": fit["window_s"],
        }
    return None


def server_figures(frame: pd.DataFrame, meta: TelemetryMeta, windows: list[StepRow]) -> dict:
    variants: dict[str, dict] = {}
    names = list(dict.fromkeys([w.variant for w in windows] + [a.variant for a in meta.attachments]))
    for variant in names:
        vt = VariantTelemetry(frame, meta, variant)
        steps = [step_figures(vt, w) for w in windows if w.variant == variant]
        variants[variant] = {
            "engine": vt.engine,
            "sources": sorted(set(vt.source_of.values())),
            "steps": steps,
            "acceptance_vs_load": [
                {
                    "step": s["step"],
                    "level": s["level"],
                    "rate": (s.get("acceptance") or {}).get("rate"),
                    "mean_length": (s.get("acceptance") or {}).get("mean_length"),
                    "requests_running": (s.get("requests_running") or {}).get("mean"),
                }
                for s in steps
            ],
            "memory_trend": memory_trend(vt),
            "gaps": [_gap_view(g) for g in vt.gaps],
        }
    return json_safe(
        {
            "source": "server",
            "gpu": meta.gpu,
            "interval_s": meta.interval_s,
            "variants": variants,
            "notes": [note.model_dump() for note in meta.notes],
        }
    )


def cross_check(server_step: dict, client_step: dict, tolerance: float = 0.25) -> dict:
    """Server vs client for one step: acceptance (both sources side by side) and TTFT (gap flagged).

    ``client_step`` is the summary's step dict (``ttft_ms``, ``itl_ms``, ``acceptance_client``). A client TTFT
    mean more than ``tolerance`` (relative) above the server's is flagged: time spent in the network, the
    client or a queue in front of the server that the server does not see.
    """
    out: dict = {}
    server_acc = server_step.get("acceptance") or {}
    client_acc = client_step.get("acceptance_client") or {}
    if server_acc.get("rate") is not None and client_acc.get("rate") is not None:
        out["acceptance_rate"] = {
            "server": server_acc["rate"],
            "client": client_acc["rate"],
            "difference": client_acc["rate"] - server_acc["rate"],
        }
    for figure in ("ttft_ms", "tpot_ms"):
        server = (server_step.get("server_latency") or {}).get(figure, {}).get("mean")
        client = (client_step.get(figure) or {}).get("mean")
        if server is not None and client is not None and server > 0:
            ratio = client / server
            out[figure] = {
                "server_mean": server,
                "client_mean": client,
                "ratio": ratio,
                "flag": ratio > 1.0 + tolerance or ratio < 1.0 - tolerance,
            }
    return json_safe(out)

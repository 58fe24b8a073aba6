"""Engine metric names -> one canonical vocabulary, with each metric's kind and one unit.

Pure (no Locust, no I/O): ``analysis/`` imports it too. Sources of the names, their units and their
traps: ``shared/research/server_metrics.md``.

* Every canonical metric has one kind (counter, gauge, histogram) and one unit: token and request counts,
  ratios 0-1 (never percent), MiB (never bytes), W (never mW), seconds, MHz, degrees C, J.
* An engine lists, per canonical metric, its family names in order of preference (the first one present on
  a page wins, so a deprecated alias never double counts) and the factor to the canonical unit.
* Counters are matched with and without ``_total``; ``_created`` series and histogram buckets are ignored;
  a histogram yields ``<metric>_sum`` and ``<metric>_count``.
* A metric absent from a page yields no reading at all: absent is "missing", never zero.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from .parse import Sample

__all__ = [
    "CANONICAL",
    "COUNTER",
    "ENGINES",
    "HISTOGRAM",
    "MetricMap",
    "Reading",
    "canonical_of",
    "histogram_parts",
    "map_for",
    "normalise_nvml",
]

COUNTER, GAUGE, HISTOGRAM = "counter", "gauge", "histogram"


@dataclass(frozen=True)
class Canonical:
    kind: str
    unit: str
    combine: str = "sum"  # across label series at one instant: sum | mean | max
    group_by: str | None = None  # a label kept apart instead of combined (per position, per GPU)
    note: str = ""


CANONICAL: dict[str, Canonical] = {
    # speculative decoding (counters; deltas over a window give the acceptance formulas of docs/metrics.md)
    "spec_drafts": Canonical(COUNTER, "drafts", note="verify steps that had draft tokens"),
    "spec_draft_tokens": Canonical(COUNTER, "tokens"),
    "spec_accepted_tokens": Canonical(COUNTER, "tokens"),
    "spec_accepted_per_pos": Canonical(COUNTER, "tokens", group_by="position"),
    "spec_verify_calls": Canonical(COUNTER, "calls", note="SGLang: verify passes, counted when requests finish"),
    # SGLang's only acceptance figures: interval gauges over the last decode-log window. Never difference them.
    "spec_accept_length_gauge": Canonical(
        GAUGE, "tokens/step", combine="mean", note="interval gauge over recent decode batches (SGLang)"
    ),
    "spec_accept_rate_gauge": Canonical(
        GAUGE,
        "ratio",
        combine="mean",
        note="interval gauge; includes the bonus token (SGLang), not comparable with accepted/drafted",
    ),
    # load and memory inside the server
    "generation_tokens": Canonical(COUNTER, "tokens"),
    "prompt_tokens": Canonical(COUNTER, "tokens", note="every prompt token, cached ones included (vLLM, SGLang)"),
    # the prompt cache (``analysis.prompt_cache``: the fraction of a window's prompt tokens served from it)
    "prompt_tokens_computed": Canonical(COUNTER, "tokens", note="llama.cpp: prompt tokens evaluated, cached excluded"),
    "prompt_cached_tokens": Canonical(COUNTER, "tokens", note="prompt tokens served from the prompt/prefix cache"),
    "prefix_cache_queries": Canonical(COUNTER, "tokens", note="vLLM: prompt tokens looked up in the prefix cache"),
    "prefix_cache_hits": Canonical(COUNTER, "tokens", note="vLLM: of those, tokens found"),
    "requests_running": Canonical(GAUGE, "requests"),
    "requests_waiting": Canonical(GAUGE, "requests"),
    "kv_cache_usage": Canonical(GAUGE, "ratio", combine="mean"),
    "preemptions": Canonical(COUNTER, "preemptions"),
    "busy_slots_per_decode": Canonical(GAUGE, "slots", combine="mean"),
    "decode_calls": Canonical(COUNTER, "calls"),
    "generation_seconds": Canonical(COUNTER, "s"),
    # the server's own latency histograms (``_sum`` / ``_count`` pairs)
    "ttft_seconds": Canonical(HISTOGRAM, "s"),
    "itl_seconds": Canonical(
        HISTOGRAM, "s", note="vLLM: per engine step (several tokens under speculation); SGLang: per token"
    ),
    "tpot_seconds": Canonical(HISTOGRAM, "s", note="per finished request"),
    "e2e_seconds": Canonical(HISTOGRAM, "s"),
    "queue_seconds": Canonical(HISTOGRAM, "s"),
    "prefill_seconds": Canonical(HISTOGRAM, "s"),
    "decode_seconds": Canonical(HISTOGRAM, "s"),
    # SGLang's per-stage request histogram: one series per stage (prefill_forward, request_process, ...)
    "stage_seconds": Canonical(
        HISTOGRAM,
        "s",
        group_by="stage",
        note="SGLang: time of one request stage; prefill_forward runs from forward entry "
        "to the end of prefill (chunks included)",
    ),
    # GPU (DCGM via Prometheus or a direct scrape, or NVML), one series per GPU
    "gpu_util": Canonical(
        GAUGE,
        "ratio",
        combine="mean",
        group_by="gpu",
        note="fraction of time any kernel ran; saturates on memory-bound decode",
    ),
    "gpu_mem_copy_util": Canonical(GAUGE, "ratio", combine="mean", group_by="gpu"),
    "gpu_mem_used_mib": Canonical(GAUGE, "MiB", combine="sum", group_by="gpu"),
    "gpu_mem_free_mib": Canonical(GAUGE, "MiB", combine="sum", group_by="gpu"),
    "gpu_power_w": Canonical(GAUGE, "W", combine="sum", group_by="gpu"),
    "gpu_energy_j": Canonical(COUNTER, "J", combine="sum", group_by="gpu"),
    "gpu_sm_clock_mhz": Canonical(GAUGE, "MHz", combine="mean", group_by="gpu"),
    "gpu_mem_clock_mhz": Canonical(GAUGE, "MHz", combine="mean", group_by="gpu"),
    "gpu_temp_c": Canonical(GAUGE, "C", combine="max", group_by="gpu"),
    "gpu_gr_engine_active": Canonical(GAUGE, "ratio", combine="mean", group_by="gpu"),
    "gpu_sm_active": Canonical(GAUGE, "ratio", combine="mean", group_by="gpu"),
    "gpu_sm_occupancy": Canonical(GAUGE, "ratio", combine="mean", group_by="gpu"),
    "gpu_tensor_active": Canonical(GAUGE, "ratio", combine="mean", group_by="gpu"),
    "gpu_dram_active": Canonical(GAUGE, "ratio", combine="mean", group_by="gpu"),
    # the server process (psutil), recorded when the server's pid is known; the hardware figure without a GPU
    "process_cpu_cores": Canonical(GAUGE, "cores", note="CPU time per wall second, process and children"),
    "process_rss_mib": Canonical(GAUGE, "MiB", note="resident memory, process and children"),
}

# (canonical, engine family names in preference order, factor to the canonical unit)
Entry = tuple[str, tuple[str, ...], float]

VLLM: list[Entry] = [
    ("spec_drafts", ("vllm:spec_decode_num_drafts",), 1.0),
    ("spec_draft_tokens", ("vllm:spec_decode_num_draft_tokens",), 1.0),
    ("spec_accepted_tokens", ("vllm:spec_decode_num_accepted_tokens",), 1.0),
    ("spec_accepted_per_pos", ("vllm:spec_decode_num_accepted_tokens_per_pos",), 1.0),
    ("generation_tokens", ("vllm:generation_tokens",), 1.0),
    ("prompt_tokens", ("vllm:prompt_tokens",), 1.0),
    ("prefix_cache_queries", ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"), 1.0),
    ("prefix_cache_hits", ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"), 1.0),
    ("prompt_cached_tokens", ("vllm:prompt_tokens_cached",), 1.0),
    ("requests_running", ("vllm:num_requests_running",), 1.0),
    ("requests_waiting", ("vllm:num_requests_waiting",), 1.0),
    ("kv_cache_usage", ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), 1.0),  # already 0-1
    ("preemptions", ("vllm:num_preemptions",), 1.0),
    ("ttft_seconds", ("vllm:time_to_first_token_seconds",), 1.0),
    ("itl_seconds", ("vllm:inter_token_latency_seconds",), 1.0),
    ("tpot_seconds", ("vllm:request_time_per_output_token_seconds", "vllm:time_per_output_token_seconds"), 1.0),
    ("e2e_seconds", ("vllm:e2e_request_latency_seconds",), 1.0),
    ("queue_seconds", ("vllm:request_queue_time_seconds",), 1.0),
    ("prefill_seconds", ("vllm:request_prefill_time_seconds",), 1.0),
    ("decode_seconds", ("vllm:request_decode_time_seconds",), 1.0),
]

SGLANG: list[Entry] = [
    ("spec_accept_length_gauge", ("sglang:spec_accept_length",), 1.0),
    ("spec_accept_rate_gauge", ("sglang:spec_accept_rate",), 1.0),
    ("spec_verify_calls", ("sglang:spec_verify_calls",), 1.0),
    ("generation_tokens", ("sglang:generation_tokens",), 1.0),
    ("prompt_tokens", ("sglang:prompt_tokens",), 1.0),
    ("prompt_cached_tokens", ("sglang:cached_tokens",), 1.0),  # its series appears at the first cache hit
    ("requests_running", ("sglang:num_running_reqs",), 1.0),
    ("requests_waiting", ("sglang:num_queue_reqs",), 1.0),
    ("kv_cache_usage", ("sglang:token_usage",), 1.0),  # token pool usage, 0-1
    ("preemptions", ("sglang:num_retracted_requests",), 1.0),
    ("ttft_seconds", ("sglang:time_to_first_token_seconds",), 1.0),
    ("itl_seconds", ("sglang:inter_token_latency_seconds",), 1.0),
    ("tpot_seconds", ("sglang:time_per_output_token_seconds",), 1.0),
    ("e2e_seconds", ("sglang:e2e_request_latency_seconds",), 1.0),
    ("queue_seconds", ("sglang:queue_time_seconds",), 1.0),
    ("stage_seconds", ("sglang:per_stage_req_latency_seconds",), 1.0),
]

LLAMACPP: list[Entry] = [
    ("spec_drafts", ("llamacpp:spec_decode_num_drafts",), 1.0),
    ("spec_draft_tokens", ("llamacpp:spec_decode_num_draft_tokens",), 1.0),
    ("spec_accepted_tokens", ("llamacpp:spec_decode_num_accepted_tokens",), 1.0),
    ("spec_accepted_per_pos", ("llamacpp:spec_decode_num_accepted_tokens_per_pos",), 1.0),
    ("generation_tokens", ("llamacpp:tokens_predicted",), 1.0),
    ("prompt_tokens_computed", ("llamacpp:prompt_tokens",), 1.0),
    ("prompt_cached_tokens", ("llamacpp:prompt_tokens_cached",), 1.0),
    ("generation_seconds", ("llamacpp:tokens_predicted_seconds",), 1.0),
    ("decode_calls", ("llamacpp:n_decode",), 1.0),
    ("requests_running", ("llamacpp:requests_processing",), 1.0),
    ("requests_waiting", ("llamacpp:requests_deferred",), 1.0),
    ("busy_slots_per_decode", ("llamacpp:n_busy_slots_per_decode",), 1.0),
    ("kv_cache_usage", ("llamacpp:kv_cache_usage_ratio",), 1.0),  # older builds only
]

DCGM: list[Entry] = [
    ("gpu_util", ("DCGM_FI_DEV_GPU_UTIL",), 0.01),  # percent -> ratio
    ("gpu_mem_copy_util", ("DCGM_FI_DEV_MEM_COPY_UTIL",), 0.01),
    ("gpu_mem_used_mib", ("DCGM_FI_DEV_FB_USED",), 1.0),  # already MiB
    ("gpu_mem_free_mib", ("DCGM_FI_DEV_FB_FREE",), 1.0),
    ("gpu_power_w", ("DCGM_FI_DEV_POWER_USAGE",), 1.0),  # already W
    ("gpu_energy_j", ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",), 0.001),  # mJ -> J
    ("gpu_sm_clock_mhz", ("DCGM_FI_DEV_SM_CLOCK",), 1.0),
    ("gpu_mem_clock_mhz", ("DCGM_FI_DEV_MEM_CLOCK",), 1.0),
    ("gpu_temp_c", ("DCGM_FI_DEV_GPU_TEMP",), 1.0),
    ("gpu_gr_engine_active", ("DCGM_FI_PROF_GR_ENGINE_ACTIVE",), 1.0),  # already 0-1
    ("gpu_sm_active", ("DCGM_FI_PROF_SM_ACTIVE",), 1.0),
    ("gpu_sm_occupancy", ("DCGM_FI_PROF_SM_OCCUPANCY",), 1.0),
    ("gpu_tensor_active", ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",), 1.0),
    ("gpu_dram_active", ("DCGM_FI_PROF_DRAM_ACTIVE",), 1.0),
]

ENGINES: dict[str, list[Entry]] = {"vllm": VLLM, "sglang": SGLANG, "llamacpp": LLAMACPP, "dcgm": DCGM}

# NVML (nvidia-ml-py) raw readings -> canonical: (canonical, factor). The poller reads these raw keys.
NVML: dict[str, tuple[str, float]] = {
    "utilization_gpu_percent": ("gpu_util", 0.01),  # nvmlDeviceGetUtilizationRates(h).gpu
    "utilization_memory_percent": ("gpu_mem_copy_util", 0.01),
    "memory_used_bytes": ("gpu_mem_used_mib", 1.0 / 2**20),  # nvmlDeviceGetMemoryInfo(h).used
    "memory_free_bytes": ("gpu_mem_free_mib", 1.0 / 2**20),
    "power_mw": ("gpu_power_w", 0.001),  # nvmlDeviceGetPowerUsage(h)
    "energy_mj": ("gpu_energy_j", 0.001),  # nvmlDeviceGetTotalEnergyConsumption(h)
    "sm_clock_mhz": ("gpu_sm_clock_mhz", 1.0),  # nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM)
    "mem_clock_mhz": ("gpu_mem_clock_mhz", 1.0),
    "temperature_c": ("gpu_temp_c", 1.0),  # nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU)
}


def histogram_parts(metric: str) -> tuple[str, str]:
    return f"{metric}_sum", f"{metric}_count"


def canonical_of(metric: str) -> tuple[str, Canonical] | None:
    """The canonical entry of a stored metric name (``ttft_seconds_sum`` -> ``ttft_seconds``)."""
    if metric in CANONICAL:
        return metric, CANONICAL[metric]
    for suffix in ("_sum", "_count"):
        if metric.endswith(suffix):
            base = metric[: -len(suffix)]
            if base in CANONICAL and CANONICAL[base].kind == HISTOGRAM:
                return base, CANONICAL[base]
    return None


@dataclass(frozen=True)
class Reading:
    metric: str  # canonical (histograms: ``<metric>_sum`` / ``<metric>_count``)
    labels: dict
    value: float
    timestamp: float | None = None

    def labels_json(self) -> str:
        return json.dumps(self.labels, sort_keys=True, separators=(",", ":"))


class MetricMap:
    """One engine's (or several engines') names, resolved against pages."""

    def __init__(self, entries: Iterable[Entry], name: str = ""):
        self.name = name
        self.entries = list(entries)
        # exposed sample name -> (entry index, family name, part) where part is "" / "_sum" / "_count"
        self._lookup: dict[str, tuple[int, str, str]] = {}
        for index, (metric, names, _factor) in enumerate(self.entries):
            kind = CANONICAL[metric].kind
            for family in names:
                if kind == COUNTER:
                    base = family.removesuffix("_total")
                    forms = [(base, ""), (base + "_total", "")]
                elif kind == HISTOGRAM:
                    forms = [(family + "_sum", "_sum"), (family + "_count", "_count")]
                else:
                    forms = [(family, "")]
                for sample_name, part in forms:
                    self._lookup.setdefault(sample_name, (index, family, part))

    @property
    def sample_names(self) -> frozenset[str]:
        return frozenset(self._lookup)

    def wants(self, sample_name: str) -> bool:
        return sample_name in self._lookup

    def metrics(self) -> list[str]:
        return [metric for metric, _, _ in self.entries]

    def normalise(self, samples: Iterable[Sample]) -> list[Reading]:
        """Canonical readings of one page; per metric only the first family name present is used."""
        found: dict[int, dict[str, list[tuple[str, Sample]]]] = {}
        for sample in samples:
            hit = self._lookup.get(sample.name)
            if hit is None:
                continue
            index, family, part = hit
            found.setdefault(index, {}).setdefault(family, []).append((part, sample))
        readings = []
        for index, by_family in sorted(found.items()):
            metric, names, factor = self.entries[index]
            family = next(name for name in names if name in by_family)
            for part, sample in by_family[family]:
                if sample.value != sample.value:  # NaN: not a reading
                    continue
                scale = 1.0 if part == "_count" else factor
                labels = {k: v for k, v in sample.labels.items() if k != "le"}
                readings.append(Reading(metric + part, labels, sample.value * scale, sample.timestamp))
        return readings

    def prometheus_name_regex(self) -> str:
        """``__name__`` regex selecting every sample this map can use (for a PromQL instant query)."""
        return "|".join(re.escape(name).replace("\\:", ":") for name in sorted(self._lookup))


def map_for(engine: str | Iterable[str]) -> MetricMap:
    """The map of one engine (``vllm``, ``sglang``, ``llamacpp``, ``dcgm``) or several.

    An unknown engine (``external``: a server we did not launch) gets every server map: the prefixes
    (``vllm:``, ``sglang:``, ``llamacpp:``) never collide.
    """
    engines = [engine] if isinstance(engine, str) else list(engine)
    entries: list[Entry] = []
    for name in engines:
        if name in ENGINES:
            entries.extend(ENGINES[name])
        else:
            entries.extend(VLLM + SGLANG + LLAMACPP)
    return MetricMap(entries, name="+".join(engines))


def normalise_nvml(raw: dict[str, float]) -> dict[str, float]:
    """NVML's raw units (bytes, mW, mJ, percent) -> canonical (MiB, W, J, ratio). Unknown keys are dropped."""
    out = {}
    for key, value in raw.items():
        if key in NVML and value is not None:
            metric, factor = NVML[key]
            out[metric] = float(value) * factor
    return out

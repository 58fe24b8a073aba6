"""Recorded metric pages (vLLM, SGLang, DCGM exporter; tests/fixtures/metrics) -> canonical rows -> step figures."""

import locust  # noqa: F401, I001  (gevent patching first; the poller module imports requests)

import json
import math
from types import SimpleNamespace

import pandas as pd
import pytest

from tests.helpers import REPO

from locust_llm.analysis.server_metrics import VariantTelemetry, server_figures
from locust_llm.rundir import load_run
from locust_llm.rundir.steps import StepRow
from locust_llm.rundir.telemetry_meta import TelemetryMeta
from locust_llm.telemetry.maps import CANONICAL, ENGINES, map_for, normalise_nvml
from locust_llm.telemetry.parse import MetricsParseError, parse_text

PAGES = REPO / "tests" / "fixtures" / "metrics"
T0 = 1_800_000_000.0  # page i was "scraped" at T0 + 5 i


def page(name: str) -> str:
    return (PAGES / name).read_text()


def rows_of(text: str, engine: str, t: float, variant: str = "v", source: str = "scrape") -> list[dict]:
    metric_map = map_for(engine)
    return [
        {"t": t, "variant": variant, "source": source, "metric": r.metric, "labels": r.labels_json(), "value": r.value}
        for r in metric_map.normalise(parse_text(text, wanted=metric_map.wants))
    ]


def recorded(prefix: str, engine: str, variant: str = "v", source: str = "scrape") -> pd.DataFrame:
    rows = []
    for i in range(3):
        rows += rows_of(page(f"{prefix}-{i}.txt"), engine, T0 + 5 * i, variant, source)
    return pd.DataFrame(rows)


def meta(variant: str = "v", engine: str = "vllm", gaps=(), interval_s: float = 5.0) -> TelemetryMeta:
    return TelemetryMeta.model_validate(
        {
            "interval_s": interval_s,
            "timeout_s": 1.0,
            "gpu": "test",
            "gaps": list(gaps),
            "attachments": [{"variant": variant, "engine": engine}],
            "notes": [],
        }
    )


WINDOW = StepRow(variant="v", step=0, level=4, mode="closed", t_start=T0 - 5, t_steady=T0, t_end=T0 + 10)


def figures(frame: pd.DataFrame, engine: str, window: StepRow = WINDOW, gaps=()) -> dict:
    return server_figures(frame, meta(engine=engine, gaps=gaps), [window])["variants"]["v"]["steps"][0]


def missing_names(step: dict) -> set[str]:
    return {m["figure"] for m in step["missing"]}


# -- parsing ------------------------------------------------------------------------------------
def test_pages_parse_with_help_type_created_and_buckets():
    samples = parse_text(page("vllm-0.txt"))
    names = {s.name for s in samples}
    assert "vllm:spec_decode_num_drafts_total" in names
    assert "vllm:spec_decode_num_drafts_created" in names  # on the page, ignored by the map
    assert "vllm:time_to_first_token_seconds_bucket" in names
    per_pos = [s for s in samples if s.name == "vllm:spec_decode_num_accepted_tokens_per_pos_total"]
    assert {(s.labels["engine"], s.labels["position"]) for s in per_pos} == {(e, p) for e in "01" for p in "012"}
    assert all(s.labels["model_name"] == "meta-llama/Llama-3.1-8B-Instruct" for s in per_pos)


def test_filter_keeps_only_mapped_samples():
    metric_map = map_for("vllm")
    samples = parse_text(page("vllm-0.txt"), wanted=metric_map.wants)
    assert samples and all(metric_map.wants(s.name) for s in samples)
    assert not any(s.name.endswith(("_created", "_bucket")) or s.name.startswith("python_") for s in samples)


@pytest.mark.parametrize(
    "garbage",
    [
        "<!DOCTYPE html><html><body>502 Bad Gateway</body></html>",
        '{"error": "not found"}',
        "",
        "# HELP only comments\n# TYPE x counter\n",
        "\x00\x01\x02binary",
        b"\xff\xfe\x00 not utf-8",
        'vllm:num_requests_running{engine="0"} 1.0\nvllm:num_requests_waiting{engine="0",model_na',  # truncated
    ],
)
def test_garbage_raises_a_specific_error(garbage):
    with pytest.raises(MetricsParseError):
        parse_text(garbage, wanted=map_for("vllm").wants)


# -- maps ---------------------------------------------------------------------------------------
def test_every_map_entry_has_a_canonical_definition():
    for engine, entries in ENGINES.items():
        for metric, names, factor in entries:
            assert metric in CANONICAL, (engine, metric)
            assert names and factor > 0


def test_counters_match_with_and_without_total_and_created_is_ignored():
    text = (
        "# TYPE llamacpp:spec_decode_num_drafts counter\nllamacpp:spec_decode_num_drafts 7\n"
        "# TYPE llamacpp:spec_decode_num_draft_tokens_total counter\nllamacpp:spec_decode_num_draft_tokens_total 25\n"
        "llamacpp:spec_decode_num_draft_tokens_created 1.7e9\n"
    )
    readings = {r.metric: r.value for r in map_for("llamacpp").normalise(parse_text(text))}
    assert readings == {"spec_drafts": 7.0, "spec_draft_tokens": 25.0}


def test_absent_metric_is_missing_not_zero():
    readings = map_for("vllm").normalise(parse_text(page("vllm-0.txt")))
    assert "preemptions" in {r.metric for r in readings}
    text = 'vllm:num_requests_running{engine="0",model_name="m"} 3\n'
    readings = map_for("vllm").normalise(parse_text(text))
    assert [(r.metric, r.value) for r in readings] == [("requests_running", 3.0)]


def test_preferred_name_wins_over_the_deprecated_alias():
    readings = map_for("vllm").normalise(parse_text(page("vllm-0.txt")))
    kv = [r.value for r in readings if r.metric == "kv_cache_usage"]
    assert kv == [0.2, 0.2]  # kv_cache_usage_perc, not gpu_cache_usage_perc (0.99)


def test_prometheus_name_regex_covers_total_forms():
    regex = map_for("llamacpp").prometheus_name_regex()
    assert "llamacpp:spec_decode_num_drafts_total" in regex.split("|")
    assert "llamacpp:spec_decode_num_drafts" in regex.split("|")


# -- vLLM ---------------------------------------------------------------------------------------
def test_vllm_pages_give_the_step_figures():
    step = figures(recorded("vllm", "vllm"), "vllm")
    acc = step["acceptance"]
    assert acc["source"] == "server" and acc["method"] == "counter deltas"
    # Sums over the two data-parallel engines: Δaccepted 1900, Δdraft tokens 3000, Δdrafts 1000.
    assert acc["accepted_tokens"] == 1900 and acc["draft_tokens"] == 3000 and acc["drafts"] == 1000
    assert acc["rate"] == pytest.approx(1900 / 3000)
    assert acc["mean_length"] == pytest.approx(1 + 1900 / 1000)
    assert acc["positions"] == ["0", "1", "2"]
    assert acc["per_position"] == pytest.approx([0.9, 0.6, 0.4])
    assert step["requests_running"]["mean"] == pytest.approx(6.0) and step["requests_running"]["max"] == 8
    assert step["requests_waiting"]["mean"] == pytest.approx(4 / 3) and step["requests_waiting"]["max"] == 3
    assert step["kv_cache_usage"]["mean"] == pytest.approx((0.2 + 0.5 + 0.4) / 3)
    assert step["kv_cache_usage"]["max"] == pytest.approx(0.5)
    assert step["preemptions"] == 5
    assert step["server_latency"]["ttft_ms"] == {"mean": pytest.approx(150.0), "n": 100}
    assert step["server_latency"]["itl_ms"]["mean"] == pytest.approx(10.0)
    assert "per engine step" in step["server_latency"]["itl_ms"]["note"]
    # vLLM (this page) has no TPOT/queue histograms and there is no GPU source: said so, not zeros.
    assert {"server_latency.tpot_ms", "server_latency.queue_ms", "gpu"} <= missing_names(step)
    assert "acceptance.rate" not in missing_names(step)


def test_half_window_uses_the_samples_nearest_the_edges():
    # nearest to the start: page 1 (T0 + 5)
    window = WINDOW.model_copy(update={"t_steady": T0 + 4.0, "t_end": T0 + 10.0})
    acc = figures(recorded("vllm", "vllm"), "vllm", window)["acceptance"]
    assert acc["drafts"] == 500 and acc["accepted_tokens"] == 850
    assert acc["t_from"] == T0 + 5 and acc["t_to"] == T0 + 10


def test_counter_reset_is_not_a_negative_delta():
    rows = []
    for t, value in ((0, 100), (1, 150), (2, 20), (3, 60)):  # restarted between t=1 and t=2
        for metric, scale in (("spec_drafts", 1), ("spec_draft_tokens", 4), ("spec_accepted_tokens", 3)):
            rows.append(
                {
                    "t": T0 + t,
                    "variant": "v",
                    "source": "scrape",
                    "metric": metric,
                    "labels": "{}",
                    "value": float(value * scale),
                }
            )
    acc = figures(pd.DataFrame(rows), "llamacpp", WINDOW.model_copy(update={"t_end": T0 + 3}))["acceptance"]
    assert acc["drafts"] == 50 + 20 + 40
    assert acc["rate"] == pytest.approx(0.75)


def test_baseline_without_spec_metrics_reports_acceptance_missing():
    frame = pd.DataFrame(
        rows_of('vllm:num_requests_running{engine="0"} 1\n', "vllm", T0)
        + rows_of('vllm:num_requests_running{engine="0"} 2\n', "vllm", T0 + 10)
    )
    step = figures(frame, "vllm")
    assert step["acceptance"] is None
    assert {"acceptance.rate", "acceptance.mean_length", "acceptance.per_position"} <= missing_names(step)
    reasons = {m["figure"]: m["reason"] for m in step["missing"]}
    assert "not exposed" in reasons["acceptance.rate"]


# -- SGLang -------------------------------------------------------------------------------------
def test_sglang_gauges_are_averaged_never_differenced():
    step = figures(recorded("sglang", "sglang"), "sglang")
    acc = step["acceptance"]
    assert acc["method"].startswith("interval gauges")
    assert "interval gauges" in acc["note"]
    assert acc["mean_length"] == pytest.approx(3.2)  # mean of 3.1, 3.3, 3.2; a "delta" would be 0.1
    assert acc["accept_rate_gauge"]["mean"] == pytest.approx(0.6)
    assert acc["rate"] is None and acc["per_position"] is None
    assert acc["mean_length_counters"] == pytest.approx(3000 / 900)
    assert {"acceptance.rate", "acceptance.per_position"} <= missing_names(step)
    assert step["requests_running"]["mean"] == pytest.approx(12) and step["requests_running"]["max"] == 14
    assert step["requests_waiting"]["mean"] == pytest.approx(1) and step["requests_waiting"]["max"] == 2
    assert step["kv_cache_usage"]["mean"] == pytest.approx(0.4)
    assert step["server_latency"]["ttft_ms"]["mean"] == pytest.approx(150.0)


# -- DCGM and NVML ------------------------------------------------------------------------------
def test_dcgm_pages_give_gpu_figures_in_canonical_units():
    frame = pd.concat([recorded("vllm", "vllm"), recorded("dcgm", "dcgm", source="dcgm")], ignore_index=True)
    step = figures(frame, "vllm")
    gpu = step["gpu"]
    assert gpu["source"] == "dcgm" and gpu["devices"] == 2
    assert gpu["util"]["mean"] == pytest.approx((0.85 + 1.0 + 0.65) / 3)  # percent -> ratio, mean over GPUs
    assert gpu["util"]["max"] == pytest.approx(1.0)
    assert gpu["mem_used_mib"]["mean"] == pytest.approx((140500 + 142500 + 143000) / 3)  # MiB, summed over GPUs
    assert gpu["mem_peak_mib"] == pytest.approx(143000)
    assert gpu["power_w"]["mean"] == pytest.approx((710.75 + 1010 + 610) / 3)
    assert gpu["power_w"]["max"] == pytest.approx(1010)
    assert gpu["sm_clock_mhz"]["min"] == 1755 and gpu["sm_clock_mhz"]["mean"] == pytest.approx(1905)
    assert gpu["temp_c"]["max"] == 67
    assert gpu["dram_active"]["mean"] == pytest.approx((0.71 + 0.81 + 0.51) / 3)
    assert "gpu" not in missing_names(step)


def test_dcgm_energy_counter_without_total_is_converted_to_joules():
    readings = [r for r in map_for("dcgm").normalise(parse_text(page("dcgm-0.txt"))) if r.metric == "gpu_energy_j"]
    assert sorted(r.value for r in readings) == [1000.0, 2000.0]  # mJ -> J


class FakeNvml(SimpleNamespace):
    """The part of nvidia-ml-py the poller calls, answering in NVML's own units."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, devices):
        super().__init__(devices=devices)

    def nvmlInit(self):
        pass

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetUUID(self, h):
        return self.devices[h]["uuid"]

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=self.devices[h]["util"], memory=self.devices[h]["memutil"])

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=self.devices[h]["used_bytes"], free=self.devices[h]["free_bytes"], total=0)

    def nvmlDeviceGetPowerUsage(self, h):
        return self.devices[h]["power_mw"]

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        raise RuntimeError("NVMLError_NotSupported")

    def nvmlDeviceGetClockInfo(self, h, which):
        return self.devices[h]["sm_mhz"] if which == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetTemperature(self, h, which):
        return self.devices[h]["temp"]


def test_nvml_units_match_dcgm_units():
    from locust_llm.telemetry.sources import NvmlSource, probe_nvml

    # The same two GPUs as dcgm-0.txt, as NVML reports them: bytes, mW, percent.
    fake = FakeNvml(
        [
            {
                "uuid": "GPU-5f2c1a7e-3b9d-4c1e-9a51-0d6e8f2b7c10",
                "util": 80,
                "memutil": 40,
                "used_bytes": 70000 * 2**20,
                "free_bytes": 11079 * 2**20,
                "power_mw": 350500,
                "sm_mhz": 1980,
                "temp": 60,
            },
            {
                "uuid": "GPU-8a4e2d91-6c7f-4b3a-b2d8-1e9f0c5a6d22",
                "util": 90,
                "memutil": 45,
                "used_bytes": 70500 * 2**20,
                "free_bytes": 10579 * 2**20,
                "power_mw": 360250,
                "sm_mhz": 1980,
                "temp": 62,
            },
        ]
    )
    module, description = probe_nvml(fake)
    assert module is fake and "2 GPU" in description
    nvml = {(json.loads(labels)["gpu"], metric): value for _, metric, labels, value in NvmlSource(fake).poll()}
    dcgm = {(r.labels["gpu"], r.metric): r.value for r in map_for("dcgm").normalise(parse_text(page("dcgm-0.txt")))}
    for metric in (
        "gpu_util",
        "gpu_mem_copy_util",
        "gpu_mem_used_mib",
        "gpu_mem_free_mib",
        "gpu_power_w",
        "gpu_sm_clock_mhz",
        "gpu_temp_c",
    ):
        for gpu in ("0", "1"):
            assert nvml[(gpu, metric)] == pytest.approx(dcgm[(gpu, metric)]), (gpu, metric)
    assert ("0", "gpu_energy_j") not in nvml  # not supported on the board: absent, not zero


def test_normalise_nvml_units():
    assert normalise_nvml(
        {"memory_used_bytes": 2**30, "power_mw": 250_000, "utilization_gpu_percent": 87, "unknown": 1}
    ) == {"gpu_mem_used_mib": 1024.0, "gpu_power_w": 250.0, "gpu_util": 0.87}


# -- gaps and the run directory -----------------------------------------------------------------
def test_a_gap_at_the_window_end_marks_the_figures_missing():
    frame = recorded("vllm", "vllm")
    frame = frame[frame["t"] < T0 + 10]  # the endpoint died after page 1
    gap = {
        "variant": "v",
        "source": "scrape",
        "start": T0 + 5,
        "end": T0 + 30,
        "recovered": False,
        "error": "http://x/metrics unreachable: ConnectionError",
    }
    step = figures(frame, "vllm", WINDOW.model_copy(update={"t_end": T0 + 25}), gaps=[gap])
    assert step["acceptance"]["rate"] is None
    reasons = {m["figure"]: m["reason"] for m in step["missing"]}
    assert "window end" in reasons["acceptance.rate"] and "telemetry gap" in reasons["acceptance.rate"]
    assert step["gaps"][0]["recovered"] is False
    partial = {p["metric"]: p["coverage"] for p in step["partial"]}
    assert partial["requests_running"] == pytest.approx(0.2)  # window [T0, T0+25], gap from T0+5: 5/25 covered
    assert step["requests_running"]["n"] == 2  # the gauge's mean is over what exists, flagged partial


def test_server_figures_from_a_run_directory(tmp_path):
    frame = pd.concat([recorded("vllm", "vllm"), recorded("dcgm", "dcgm", source="dcgm")], ignore_index=True)
    frame.to_parquet(tmp_path / "telemetry.parquet")
    (tmp_path / "telemetry.json").write_text(json.dumps(meta(engine="vllm").written()))
    steps = [WINDOW, WINDOW.model_copy(update={"step": 1, "level": 8, "t_steady": math.nan, "t_end": math.nan})]
    rows = [step.model_dump(exclude_unset=True) for step in steps]
    (tmp_path / "steps.json").write_text(json.dumps({"steps": rows, "events": []}))
    run = load_run(tmp_path)
    summary = server_figures(run.telemetry, run.telemetry_meta, run.steps)
    variant = summary["variants"]["v"]
    assert variant["engine"] == "vllm" and variant["sources"] == ["dcgm", "scrape"]
    assert variant["acceptance_vs_load"][0]["rate"] == pytest.approx(1900 / 3000)
    assert variant["acceptance_vs_load"][1]["rate"] is None
    assert variant["steps"][1]["missing"] == [{"figure": "all", "reason": "the step has no steady window"}]
    trend = variant["memory_trend"]
    assert trend["metric"] == "gpu_mem_used_mib" and trend["unit"] == "MiB/min"
    assert trend["slope"] == pytest.approx(60 * 250.0)  # 140500 -> 142500 -> 143000 over 10 s: OLS 250 MiB/s
    assert trend["ci95"][0] < trend["slope"] < trend["ci95"][1]
    json.dumps(summary, allow_nan=False)


def test_variant_telemetry_prefers_one_source_per_metric():
    frame = pd.concat([recorded("vllm", "vllm"), recorded("vllm", "vllm", source="prometheus")], ignore_index=True)
    vt = VariantTelemetry(frame, meta(), "v")
    assert vt.source_of["spec_drafts"] == "scrape"
    deltas, _ = vt.counter_delta("spec_drafts", T0, T0 + 10)
    assert sum(deltas.values()) == 1000  # not doubled


def test_a_counter_series_that_appears_inside_the_window_starts_from_zero():
    # llama.cpp creates its per-position counters at the first speculative request.
    fresh = (
        "llamacpp:spec_decode_num_drafts_total 0\nllamacpp:spec_decode_num_draft_tokens_total 0\n"
        "llamacpp:spec_decode_num_accepted_tokens_total 0\n"
    )
    later = (
        "llamacpp:spec_decode_num_drafts_total 10\nllamacpp:spec_decode_num_draft_tokens_total 40\n"
        "llamacpp:spec_decode_num_accepted_tokens_total 25\n"
        + "".join(
            f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="{p}"}} {n}\n'
            for p, n in enumerate((9, 7, 5, 4))
        )
    )
    frame = pd.DataFrame(rows_of(fresh, "llamacpp", T0) + rows_of(later, "llamacpp", T0 + 20))
    acc = figures(frame, "llamacpp", WINDOW.model_copy(update={"t_end": T0 + 20}))["acceptance"]
    assert acc["per_position"] == pytest.approx([0.9, 0.7, 0.5, 0.4])
    # ... but not when the source itself was silent at the window start: then it is missing.
    acc = figures(frame[frame["t"] > T0], "llamacpp", WINDOW.model_copy(update={"t_end": T0 + 20}))["acceptance"]
    assert acc["rate"] is None and acc["per_position"] is None


def test_cross_check_puts_client_and_server_side_by_side_and_flags_a_ttft_gap():
    from locust_llm.analysis.server_metrics import cross_check

    server_step = figures(recorded("vllm", "vllm"), "vllm")  # server TTFT mean 150 ms, rate 0.6333
    client_step = {"ttft_ms": {"mean": 240.0}, "acceptance_client": {"rate": 0.64, "source": "client"}}
    check = cross_check(server_step, client_step)
    assert check["acceptance_rate"]["server"] == pytest.approx(1900 / 3000)
    assert check["acceptance_rate"]["client"] == 0.64
    assert check["ttft_ms"]["ratio"] == pytest.approx(1.6) and check["ttft_ms"]["flag"] is True
    assert cross_check(server_step, {"ttft_ms": {"mean": 160.0}})["ttft_ms"]["flag"] is False


# -- telemetry judged before it is believed -----------------------------------------------------


def spec_rows(values: list[tuple[float, float, float]], t_step: float = 5.0) -> pd.DataFrame:
    """llama.cpp-style counters (drafts, draft tokens, accepted tokens) at T0, T0 + t_step, ..."""
    rows = []
    for i, counts in enumerate(values):
        for metric, value in zip(("spec_drafts", "spec_draft_tokens", "spec_accepted_tokens"), counts, strict=True):
            rows.append(
                {"t": T0 + t_step * i, "variant": "v", "source": "scrape", "metric": metric, "labels": "{}",
                 "value": value}
            )  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    "values, words",
    [
        ([(0, 0, 0), (10, 100, 150), (20, 200, 300)], "more tokens accepted than drafted"),
        ([(0, 0, 0), (10, 100, 50), (20, math.inf, 100)], "not finite or above 1e+15"),
        ([(0, 0, 0), (10, 1e308, 50), (20, 1e308, 100)], "not finite or above 1e+15"),
    ],
    ids=["accepted-3x", "inf", "1e308"],
)
def test_impossible_acceptance_counters_are_missing_with_their_raw_values_never_a_rate(values, words):
    step = figures(spec_rows(values), "llamacpp")
    acc = step["acceptance"]
    assert acc["rate"] is None and acc["mean_length"] is None and acc["draft_tokens"] is None
    reasons = {m["figure"]: m["reason"] for m in step["missing"]}
    assert words in reasons["acceptance.rate"] and "Δaccepted" in reasons["acceptance.rate"], reasons


def test_metrics_never_read_are_missing_for_the_scrape_s_reason_not_as_not_exposed():
    """Every poll failed (a malformed line refused the page): no sample of the server's, only the process's."""
    frame = pd.DataFrame(
        [{"t": T0 + i, "variant": "v", "source": "process", "metric": "process_rss_mib", "labels": "{}", "value": 1.0}
         for i in range(12)]
    )  # fmt: skip
    gap = {"variant": "v", "source": "scrape", "start": T0 - 10, "first_failure": T0 - 9, "end": None,
           "failures": 20, "error": "http://x/metrics: not Prometheus text: line 3", "recovered": False}  # fmt: skip
    step = figures(frame, "vllm", gaps=[gap])
    reasons = {m["figure"]: m["reason"] for m in step["missing"]}
    assert "not exposed" not in reasons["acceptance.rate"]
    assert "not read: no sample of the server's metrics was recorded" in reasons["acceptance.rate"]
    assert "line 3" in reasons["acceptance.rate"]


def test_a_refused_page_names_its_first_bad_line():
    page = b"vllm:spec_decode_num_drafts_total 1\n# c\nvllm:spec_decode_num_drafts_total{a=} x\n"
    page += b"vllm:num_requests_running 2\n"
    with pytest.raises(MetricsParseError, match=r"\(line 3: 'vllm:spec_decode_num_drafts_total\{a=\} x'\)"):
        parse_text(page, wanted=map_for("vllm").wants)

"""Where the time goes: phases from llama.cpp's per-request timings (a synthetic run whose split is known),
from vLLM's and SGLang's request histograms (recorded pages in their real format), pooled acceptance, and the
tokens per target pass beside the speed-up."""

import json

import numpy as np
import pandas as pd
import pytest

from locust_llm.analysis.breakdown import level_acceptance, level_breakdown, phase_words
from locust_llm.analysis.samples import LevelSamples
from locust_llm.analysis.summary import build_summary
from locust_llm.rundir import load_run
from tests.synthetic import back_to_back, window, write_run
from tests.unit.telemetry.test_parse import T0, WINDOW, figures, page, rows_of

TOKENS = 40
TTFT_S, PREFILL_MS = 0.020, 15.0  # the server's prompt time; the other 5 ms of TTFT are outside it
TPOT_S = {"baseline": 0.010, "spec": 0.004}


def timed_run(path, rng):
    rows, steps, t = [], [], 1_800_000_000.0
    for variant, tpot in TPOT_S.items():
        steps.append(window(variant, 0, 1, t, 20.0))
        rows += back_to_back(path.name, variant, 1, 0, t, 20.0, TTFT_S, tpot, TOKENS, rng, server_prefill_ms=PREFILL_MS)
        t += 25.0
    for row in rows:  # the server's generation time: first token to last
        row["server_decode_ms"] = (row["t_end"] - row["t_first"]) * 1000
    return write_run(path, rows, steps)


def test_llamacpp_timings_split_each_request_and_name_the_phase_that_changed(tmp_path):
    summary = build_summary(load_run(timed_run(tmp_path, np.random.default_rng(1)))).model_dump(mode="json")
    (step,) = summary["comparisons"][0]["steps"]
    base, spec = step["breakdown"]["baseline"], step["breakdown"]["variant"]
    assert base["source"] == "server per-request timings" and base["statistic"] == "median"
    assert base["queue_ms"] is None and "no queue time" in base["note"]
    assert base["prefill_ms"] == pytest.approx(PREFILL_MS)
    # 5 ms outside the server (within the rounding of epoch-second floats)
    assert base["outside_ms"] == pytest.approx(TTFT_S * 1000 - PREFILL_MS, abs=1e-4)
    assert base["decode_ms"] == pytest.approx(39 * 10.0, rel=0.02)
    assert spec["decode_ms"] == pytest.approx(39 * 4.0, rel=0.02)
    words = step["breakdown"]["words"]
    assert words.startswith("TPOT -60%, TTFT unchanged") and "gains go to long outputs" in words
    assert "decode -60%" in words and "prefill" not in words.split("(phases")[1]
    # No server acceptance counters in this run: no tokens-per-pass figure, rather than a made-up one.
    assert step["tokens_per_pass"] is None and step["pass_efficiency"] is None


def counted_run(path, rng, accepted_per_draft: float, generated_per_s: float | None = None):
    """``timed_run`` plus the spec server's acceptance counters scraped every second: 100 drafts of 4 tokens a
    second, ``accepted_per_draft`` tokens accepted per draft, so 1 + accepted / drafts is set by construction; with
    ``generated_per_s``, the generated-token counter too."""
    timed_run(path, rng)
    steps = json.loads((path / "steps.json").read_text())["steps"]
    (spec,) = [s for s in steps if s["variant"] == "spec"]
    rows = []
    for t in np.arange(spec["t_start"], spec["t_end"] + 1.0, 1.0):
        k = t - spec["t_start"]
        rows += [
            (t, "spec", "scrape", "spec_drafts", "{}", 100.0 * k),
            (t, "spec", "scrape", "spec_draft_tokens", "{}", 400.0 * k),
            (t, "spec", "scrape", "spec_accepted_tokens", "{}", 100.0 * accepted_per_draft * k),
        ]
        if generated_per_s is not None:
            rows.append((t, "spec", "scrape", "generation_tokens", "{}", generated_per_s * k))
    pd.DataFrame(rows, columns=["t", "variant", "source", "metric", "labels", "value"]).to_parquet(
        path / "telemetry.parquet"
    )
    (path / "telemetry.json").write_text(json.dumps({"gaps": [], "notes": []}))
    return path


# Per stream a request is TTFT + 39 x TPOT: the aggregate speed-up is (20 + 39 x 10) / (20 + 39 x 4) ms.
SPEEDUP = (20 + 39 * 10) / (20 + 39 * 4)


def test_tokens_per_target_pass_against_the_measured_speedup(tmp_path):
    summary = build_summary(load_run(counted_run(tmp_path, np.random.default_rng(1), 1.5))).model_dump(mode="json")
    (step,) = summary["comparisons"][0]["steps"]
    assert step["output_tps_speedup"]["value"] == pytest.approx(SPEEDUP, rel=0.03)
    # 1 + 150 / 100 tokens per target pass would allow 2.5x; 2.33x measured is 93% of it: 7% lost.
    assert step["tokens_per_pass"] == pytest.approx(2.5)
    assert step["pass_efficiency"] == pytest.approx(SPEEDUP / 2.5, rel=0.03)
    gap = step["pass_gap"]
    assert gap.startswith("2.50 tokens per target pass would allow 2.50x; measured 2.3")
    lost = int(gap.split(": ")[1].split("%")[0])
    assert abs(lost - 100 * (1 - SPEEDUP / 2.5)) <= 3 and gap.endswith("lost to drafting, verification and scheduling")


def test_a_speedup_beyond_the_tokens_per_pass_is_said_so(tmp_path):
    summary = build_summary(load_run(counted_run(tmp_path, np.random.default_rng(1), 1.0))).model_dump(mode="json")
    (step,) = summary["comparisons"][0]["steps"]
    assert step["tokens_per_pass"] == pytest.approx(2.0)  # 1 + 100 / 100, below the 2.33x measured
    assert step["pass_efficiency"] == pytest.approx(SPEEDUP / 2.0, rel=0.03) and step["pass_efficiency"] > 1
    assert step["pass_gap"].startswith("measured 2.3") and step["pass_gap"].endswith(
        "x exceeds 2.00 tokens per target pass"
    )


def test_passes_without_a_draft_count_in_the_tokens_per_pass(tmp_path):
    # vLLM's n-gram method drafts only where the text repeats, and its drafts counter counts only the passes that
    # drafted: 100 drafted passes a second accept 150 tokens (1 + 150 / 100 = 2.5), but the server generates 400
    # tokens a second, so 400 - 150 = 250 passes yield them: 1.6 tokens per pass.
    run = counted_run(tmp_path, np.random.default_rng(1), 1.5, generated_per_s=400.0)
    (step,) = build_summary(load_run(run)).model_dump(mode="json")["comparisons"][0]["steps"]
    assert step["tokens_per_pass"] == pytest.approx(400 / 250)
    assert step["pass_efficiency"] == pytest.approx(SPEEDUP / 1.6, rel=0.03)


def client_samples(e2e_ms: list[float]) -> LevelSamples:
    samples = LevelSamples()
    samples.add(0, "clean", [], np.ones(3), np.ones(3), pd.DataFrame({"e2e_ms": e2e_ms}))
    return samples


def recorded_step(prefix: str, engine: str) -> dict:
    frame = pd.DataFrame(
        rows_of(page(f"{prefix}-0.txt"), engine, T0) + rows_of(page(f"{prefix}-1.txt"), engine, T0 + 10)
    )
    return {"status": "clean", "server": figures(frame, engine, WINDOW.model_copy(update={"t_end": T0 + 10}))}


def test_vllm_histograms_give_queue_prefill_decode_and_the_rest_is_outside():
    step = recorded_step("vllm-phases", "vllm")
    phases = level_breakdown(client_samples([260.0, 270.0]), [step])
    assert phases["source"] == "server histograms" and phases["statistic"] == "mean"
    # Page 1 minus page 0 over 100 requests: queue 2 s, prefill 3 s, decode 20 s, e2e 25.5 s.
    assert phases["queue_ms"] == pytest.approx(20.0) and phases["prefill_ms"] == pytest.approx(30.0)
    assert phases["decode_ms"] == pytest.approx(200.0)
    assert phases["outside_ms"] == pytest.approx(265.0 - 255.0) and phases["e2e_ms"] == pytest.approx(265.0)


def test_sglang_prefill_comes_from_its_prefill_forward_stage_and_decode_is_estimated():
    step = recorded_step("sglang-phases", "sglang")
    # Page 1 minus page 0 over 100 requests: queue 1.5 s, prefill_forward 3 s (request_process 0.1 s, another
    # stage, must not be added in), TTFT 5 s, e2e 24 s.
    assert step["server"]["server_latency"]["prefill_ms"]["mean"] == pytest.approx(30.0)
    assert "prefill_forward" in step["server"]["server_latency"]["prefill_ms"]["note"]
    phases = level_breakdown(client_samples([250.0]), [step])
    assert phases["queue_ms"] == pytest.approx(15.0) and phases["prefill_ms"] == pytest.approx(30.0)
    assert phases["decode_ms"] == pytest.approx(240.0 - 50.0)
    assert phases["outside_ms"] == pytest.approx(250.0 - 240.0)
    assert phases["note"] == "decode_ms estimated as the server's mean E2E minus its mean TTFT"
    # A contended step's histograms never enter the level's figures.
    assert level_breakdown(client_samples([250.0]), [{**step, "status": "contended"}]) is None


def test_sglang_without_the_per_stage_histogram_estimates_prefill_from_ttft_minus_queue():
    frame = pd.DataFrame(
        [
            r
            for r in rows_of(page("sglang-phases-0.txt"), "sglang", T0)
            + rows_of(page("sglang-phases-1.txt"), "sglang", T0 + 10)
            if not r["metric"].startswith("stage_seconds")
        ]
    )
    step = {"status": "clean", "server": figures(frame, "sglang", WINDOW.model_copy(update={"t_end": T0 + 10}))}
    assert "prefill_ms" not in step["server"]["server_latency"]
    phases = level_breakdown(client_samples([250.0]), [step])
    assert phases["prefill_ms"] == pytest.approx(50.0 - 15.0) and phases["decode_ms"] == pytest.approx(190.0)
    assert "prefill_ms estimated as the server's mean TTFT minus its mean queue time" in phases["note"]


def test_acceptance_pools_steps_by_drafts():
    def step(drafts, accepted, per_position, status="clean"):
        return {
            "status": status,
            "server": {
                "acceptance": {
                    "drafts": drafts,
                    "accepted_tokens": accepted,
                    "draft_tokens": 4 * drafts,
                    "per_position": per_position,
                }
            },
        }

    pooled = level_acceptance(
        [step(100, 150, [0.9, 0.6]), step(300, 300, [0.8, 0.2]), step(1000, 0, [0.0, 0.0], status="contended")]
    )
    assert pooled["per_position"] == pytest.approx([(90 + 240) / 400, (60 + 60) / 400])
    assert pooled["mean_length"] == pytest.approx(1 + 450 / 400)
    assert pooled["rate"] == pytest.approx(450 / 1600)
    assert level_acceptance([step(0, 0, [])]) is None


@pytest.mark.parametrize(
    "tpot, ttft, words",
    [
        ((2.0, 1.8, 2.2), (1.0, 0.9, 1.1), "TPOT -50%, TTFT unchanged (+0%, within noise): gains go to long outputs"),
        ((2.0, 1.8, 2.2), (0.8, 0.7, 0.9), "TTFT +25%: decode gains but prefill costs more"),
        ((2.0, 1.8, 2.2), (1.25, 1.2, 1.3), "TTFT -20%: both the first token and decoding got faster"),
        ((0.8, 0.7, 0.9), (1.0, 0.9, 1.1), "TPOT +25%, TTFT unchanged (+0%, within noise): decode got slower"),
        ((1.1, 0.9, 1.3), (1.0, 0.9, 1.1), "decode did not measurably change"),
    ],
)
def test_the_words_follow_the_tpot_and_ttft_intervals(tpot, ttft, words):
    def ratio(value, lo, hi):
        return {"value": value, "ci95": [lo, hi]}

    assert words in phase_words({"tpot_p50_speedup": ratio(*tpot), "ttft_p50_speedup": ratio(*ttft)}, None, None)

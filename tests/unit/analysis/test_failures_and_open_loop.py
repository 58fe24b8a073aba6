"""Failures never improve a percentile; open loop is judged from the intended send time; pairs decide A/B.

Each run here is built by hand with a known answer (tests/synthetic.py) and goes through the pipeline.
"""

import numpy as np
import pandas as pd
import pytest

from locust_llm.analysis.samples import LevelSamples
from locust_llm.analysis.speedup import ratio_ci
from locust_llm.analysis.stats import percentile_stat
from locust_llm.analysis.summary import context_figures
from locust_llm.pipeline import finish_run
from locust_llm.records import RequestRecord
from tests.synthetic import open_loop_run, stream_record, window, write_run

TIMEOUT_S = 120.0


def test_timeouts_count_at_their_deadline_and_fail_the_gate(tmp_path):
    """90 requests at 50 ms TTFT and 10 first-token timeouts at 120 s: P99 over all requests is the timeout."""
    start = 1_700_000_000.0
    rows = [
        stream_record("t", "baseline", 1, 0, start + i * 0.5, 0.050, 0.01, 10, request_id=f"ok-{i}") for i in range(90)
    ]
    rows += [
        RequestRecord(
            run_id="t",
            variant="baseline",
            level=1,
            step=0,
            phase="steady",
            request_id=f"to-{i}",
            t_send=start + 45 + i,
            t_done=start + 45 + i + TIMEOUT_S,
            error_class="first_token_timeout",
            error_message="no first token within 120 s",
        ).to_dict()
        for i in range(10)
    ]
    run = write_run(tmp_path, rows, [window("baseline", 0, 1, start, 60)], gates={"ttft_p99_ms": 500})
    outcome = finish_run(run)
    step = outcome.summary.variants["baseline"].steps[0]
    assert step.ttft_ms.p99 == pytest.approx(50, abs=0.5)  # successful requests alone look fine...
    assert step.ttft_all_ms.p99 >= TIMEOUT_S * 1000  # ...all requests do not
    assert step.ttft_all_ms.n == 100 and step.e2e_all_ms.n == 100
    assert outcome.verdict.exit_code == 3
    assert "ttft_p99_ms" in outcome.verdict.reasons["3"][0]


def test_open_loop_sent_late_is_judged_from_the_intended_time(tmp_path):
    """At 10 req/s requests leave on time; at 20 req/s each leaves 500 ms behind its schedule."""
    run = open_loop_run(tmp_path, lag_s={10.0: 0.0, 20.0: 0.5}, slo={"ttft_ms": 200}, gates={"ttft_p99_ms": 500})
    outcome = finish_run(run)
    on_time, late = outcome.summary.variants["baseline"].steps
    assert late.ttft_ms.p99 < 40  # from the actual send the client's lateness would disappear...
    assert late.ttft_sched_ms.p99 >= 500 and late.ttft_sched_all_ms.p99 >= 500  # ...from the intended, it shows
    assert late.goodput_rps == 0  # nobody got a first token within 200 ms of when they should have been sent
    assert on_time.goodput_rps == pytest.approx(10.0)
    # Sent late, but every arrival sent: the latency figures are marked, the throughput (the offered rate) holds.
    assert late.client_validity.latency_valid is False and "sent late" in late.client_validity.latency_reasons[0]
    assert late.client_valid is True and late.status == "clean"
    assert outcome.verdict.exit_code == 3
    # The console's table shows the same TTFT as the summary's headline: from the intended send.
    header, *rows = [line.split() for line in outcome.text.splitlines()[1:4]]
    assert header[5:7] == ["TTFT_sched", "p50"]
    late_row = next(row for row in rows if row[1] == "20")
    assert float(late_row[5].removesuffix("ms")) >= 500


def test_context_figures_take_ttft_from_the_intended_send_in_open_loop():
    sent_late = pd.DataFrame(
        {"worker": 0, "step": 0, "seq": range(4), "ttft_ms": [30.0] * 4, "ttft_sched_ms": [530.0] * 4}
    )
    samples = LevelSamples(requests=sent_late)
    assert context_figures(10.0, samples, [], "open")["ttft_p50_ms"] == pytest.approx(530.0)
    assert context_figures(10.0, samples, [], "closed")["ttft_p50_ms"] == pytest.approx(30.0)


def test_open_loop_ab_with_half_the_tpot_is_faster_with_a_paired_ci(tmp_path):
    run = open_loop_run(tmp_path, tpot_s={"baseline": 0.020, "spec": 0.010})
    outcome = finish_run(run)
    (comparison,) = outcome.summary.comparisons
    assert comparison.metric == "e2e_sched_p95"
    step = comparison.steps[0]
    assert step.output_tps_speedup.value == pytest.approx(1.0, abs=0.05)  # the offered rate fixes throughput
    assert step.tpot_p50_speedup.value == pytest.approx(2.0, rel=0.05) and step.tpot_p50_speedup.pairs == 200
    lo, hi = step.e2e_sched_p95_speedup.ci95
    assert lo > 1.3 and step.e2e_sched_p95_speedup.pairs == 200
    assert step.tpot_p50_speedup.ci95[0] > 1.5  # half the TPOT: about 2x, clearly
    assert step.verdict == "better" and "TPOT P50" in step.verdict_basis
    assert comparison.recommendation.startswith("enable spec")
    html = (run / "report.html").read_text()
    assert "E2E P95 from the intended send time" in html


def test_open_loop_ab_with_equal_latency_is_not_faster(tmp_path):
    """The same TPOT and TTFT on both sides (independent noise): no level may be called faster."""
    run = open_loop_run(tmp_path, tpot_s={"baseline": 0.010, "spec": 0.010})
    (comparison,) = finish_run(run).summary.comparisons
    (step,) = comparison.steps
    assert step.tpot_p50_speedup.value == pytest.approx(1.0, abs=0.05) and step.tpot_p50_speedup.pairs == 200
    assert step.verdict != "better"
    assert not comparison.recommendation.startswith("enable") and comparison.crossover_level is None


def test_pairing_makes_the_interval_narrower_than_independent_samples(tmp_path):
    """Prompt lengths vary a lot, identically in both variants: the pairs cancel that variation."""
    rng = np.random.default_rng(4)
    rows, steps, start = [], [], 1_700_000_000.0
    sizes = rng.integers(5, 200, 300)
    for v, (variant, factor) in enumerate((("baseline", 1.0), ("spec", 0.8))):
        t0 = start + v * 100
        steps.append(window(variant, 0, 1, t0, 74))  # the 300 sends span 75 s: a longer window would drift
        send = t0
        for k, n in enumerate(sizes):
            ttft = 0.001 * n * factor * rng.uniform(0.98, 1.02)
            rows.append(stream_record("p", variant, 1, 0, send, ttft, 0.002, 3, seq=k, request_id=f"{variant}{k}"))
            send += 0.25
    outcome = finish_run(write_run(tmp_path, rows, steps))
    paired = outcome.summary.comparisons[0].steps[0].ttft_p95_speedup
    assert paired.pairs > 100 and paired.value == pytest.approx(1.25, rel=0.05)
    frame = pd.DataFrame(rows)
    ttft = {v: ((g["t_first"] - g["t_send"]) * 1000).to_numpy() for v, g in frame.groupby("variant")}
    independent = ratio_ci(ttft["spec"], ttft["baseline"], percentile_stat(95), False, 1000, 0)["ci95"]
    assert paired.ci95[0] < 1.25 < paired.ci95[1] or abs(paired.value - 1.25) < 0.02
    assert paired.ci95[1] - paired.ci95[0] < 0.7 * (independent[1] - independent[0])


def test_goodput_with_a_tpot_slo_counts_one_token_answers(tmp_path):
    start = 1_700_000_000.0
    rows = [
        stream_record("g", "baseline", 1, 0, start + i * 0.5, 0.05, 0.01, 1, request_id=f"one-{i}") for i in range(20)
    ]
    outcome = finish_run(write_run(tmp_path, rows, [window("baseline", 0, 1, start, 10)], slo={"tpot_ms": 20}))
    step = outcome.summary.variants["baseline"].steps[0]
    assert step.tpot_ms.n == 0 and step.goodput_rps == pytest.approx(2.0)


def test_goodput_with_a_tpot_slo_counts_a_multi_token_answer_in_one_chunk(tmp_path):
    """Five tokens in a single chunk (a short answer from a speculative server): TPOT is undefined, so the TPOT
    SLO does not fail it; 20 such answers in a 10 s window are 2 good requests per second."""
    start = 1_700_000_000.0
    rows = [
        RequestRecord(
            run_id="g",
            variant="baseline",
            level=1,
            step=0,
            phase="steady",
            request_id=f"one-{i}",
            output_tokens=5,
            token_source="usage_deltas",
            t_send=start + i * 0.5,
            t_first=start + i * 0.5 + 0.05,
            t_end=start + i * 0.5 + 0.05,
            t_done=start + i * 0.5 + 0.051,
            chunk_offsets=[0.05],
            chunk_tokens=[5],
            finish_reason="length",
            http_status=200,
        ).to_dict()
        for i in range(20)
    ]
    outcome = finish_run(write_run(tmp_path, rows, [window("baseline", 0, 1, start, 10)], slo={"tpot_ms": 20}))
    step = outcome.summary.variants["baseline"].steps[0]
    assert step.tpot_ms.n == 0 and step.output_tokens == 100 and step.goodput_rps == pytest.approx(2.0)


def test_repeated_levels_pool_and_a_rising_curve_has_no_saturation(tmp_path):
    """A ladder 1, 2, 4 measured twice: throughput still rises at the top, so nothing saturated."""
    rows, steps, t = [], [], 1_700_000_000.0
    for step, level in enumerate([1, 2, 4, 1, 2, 4]):
        steps.append(window("baseline", step, level, t, 10))
        for stream in range(level):
            send = t + 0.01 * stream
            while send < t + 10:
                rows.append(
                    stream_record(
                        "r", "baseline", level, step, send, 0.02, 0.01, 20, request_id=f"{step}-{stream}-{send}"
                    )
                )
                send += 0.02 + 0.01 * 19
        t += 15
    summary = finish_run(write_run(tmp_path, rows, steps)).summary
    entry = summary.variants["baseline"]
    assert [s.level for s in entry.steps] == [1, 2, 4, 1, 2, 4]
    assert entry.saturation_level is None

"""Client validity per figure: what the load generator could have done to each figure, against a known truth.

Each run is built by hand: requests with their true stamps, then the client's stalls applied as a stalled event
loop would apply them (a stamp whose true time falls inside a stall is taken when the stall ends), and the load
process's per-second samples written beside them. The truth (the figures without the stalls) is computed from the
true stamps, never from the code under test.
"""

import numpy as np
import pytest

from locust_llm.analysis.validity import figure_bound, widened
from locust_llm.pipeline import finish_run
from locust_llm.records import RequestRecord
from tests.synthetic import patch_env, window, write_client, write_run

START = 1_700_000_000.0
SECONDS = 30


def stamped(t, stalls):
    """Where a stalled loop stamps time ``t``: at the end of the stall it falls in."""
    for begin, end in stalls:
        if begin <= t < end:
            return end
    return t


def closed_loop(
    variant, step, ttft, tpot, tokens=20, gap=0.001, stalls=(), worker=0, start=START, level=1, turns=0, think_s=0.0
):
    """One closed-loop user over the window: its requests as recorded, and their true TTFTs (ms). With ``turns``,
    the user holds conversations of that many turns, waiting ``think_s`` after each answer before the next turn
    (and ``gap`` between conversations)."""
    rows, truth, send, seq = [], [], start, 0
    while send < start + SECONDS:
        true_times = send + ttft + tpot * np.arange(tokens)
        times = np.array([stamped(t, stalls) for t in true_times])
        done = times[-1] + 0.0005
        rows.append(
            RequestRecord(
                run_id="v",
                variant=variant,
                level=level,
                step=step,
                phase="steady",
                worker=worker,
                user=0,
                seq=seq,
                request_id=f"{variant}-{step}-{worker}-{seq}",
                output_tokens=tokens,
                token_source="usage_deltas",
                t_send=send,
                t_first=times[0],
                t_end=times[-1],
                t_done=done,
                chunk_offsets=(times - send).tolist(),
                chunk_tokens=[1] * tokens,
                finish_reason="length",
                http_status=200,
                **({"conversation": seq // turns, "turn": seq % turns + 1, "turns": turns} if turns else {}),
            ).to_dict()
        )
        truth.append((true_times[0] - send) * 1000)
        mid_conversation = turns and seq % turns < turns - 1
        send, seq = done + (think_s if mid_conversation else gap), seq + 1
    return rows, np.array(truth)


def stall_seconds(seconds, length_s, start=START):
    """Five stalls of ``length_s`` in each of ``seconds`` (counted from the window's start), 0.2 s apart."""
    return [(start + s + at, start + s + at + length_s) for s in seconds for at in (0.1, 0.3, 0.5, 0.7, 0.9)]


def test_a_stall_that_spoils_ttft_p99_marks_the_latency_figures_and_leaves_the_throughput_verdict(tmp_path):
    """Five 60 ms stalls in each of three seconds of the spec step's 30 s window: the loop-lag P95 is over the strict
    20 ms limit and the TTFT P99 is mostly the client's, so the latency figures are marked (with a bound that holds the
    true TTFT P99), while the 2x output tok/s speed-up stands: the level is judged, the run exits 0."""
    stalls = stall_seconds([3, 13, 23], 0.060)
    base, _ = closed_loop("baseline", 0, 0.030, 0.010)
    spec, truth = closed_loop("spec", 0, 0.030, 0.005, stalls=stalls)
    run = write_run(
        tmp_path, base + spec, [window("baseline", 0, 1, START, SECONDS), window("spec", 0, 1, START, SECONDS)]
    )
    write_client(run, START, SECONDS, lag_ms=lambda i: (60.0, 3.0) if i in (3, 13, 23) else (0.5, 0.5))
    outcome = finish_run(run)
    step = outcome.summary.variants["spec"].steps[0]
    cv = step.client_validity
    assert cv.loop_lag_ms_p95 > 20 and cv.loop_lag_ms_max == pytest.approx(60.0)
    assert step.ttft_ms.p99 > 60  # the stalls are in the measured TTFT P99...
    assert np.percentile(truth, 99) < 35  # ...and not in the true one
    ttft = cv.bounds["ttft_ms"]
    assert ttft.distorted and cv.latency_valid is False
    assert any("event-loop lag P95" in reason for reason in cv.latency_reasons)
    below, above = ttft.p99
    assert step.ttft_ms.p99 * (1 - below) <= np.percentile(truth, 99) <= step.ttft_ms.p99 * (1 + above)
    assert max(cv.bounds["tpot_ms"].p50) < 0.01  # the median request's pace: no stall near it
    # The throughput verdict stands: the step is clean, the level judged, the speed-up clearly above 1.
    assert step.client_valid is True and step.status == "clean"
    level = outcome.summary.comparisons[0].steps[0]
    assert level.status == "clean" and level.verdict == "better"
    assert level.output_tps_speedup.client_ci95[0] > 1
    # The latency speed-up the stalls could move shows it: its interval without the client reaches further.
    ttft_speedup = level.ttft_p95_speedup
    assert ttft_speedup.client_ci95[1] > ttft_speedup.ci95[1]
    assert outcome.verdict.exit_code == 0


def test_a_client_at_its_cores_end_still_invalidates_the_throughput_verdict(tmp_path):
    base, _ = closed_loop("baseline", 0, 0.030, 0.010)
    spec, _ = closed_loop("spec", 0, 0.030, 0.005)
    run = write_run(
        tmp_path, base + spec, [window("baseline", 0, 1, START, SECONDS), window("spec", 0, 1, START, SECONDS)]
    )
    write_client(run, START, SECONDS, cpu=100.0)
    outcome = finish_run(run)
    step = outcome.summary.variants["spec"].steps[0]
    assert step.client_valid is False and step.status == "client-invalid"
    assert "client CPU 100%" in step.client_validity.reasons[0]
    level = outcome.summary.comparisons[0].steps[0]
    assert level.status == "client-invalid" and level.verdict is None
    assert outcome.verdict.exit_code == 5


def test_users_waiting_on_the_client_are_measured_as_their_share_of_the_cycle(tmp_path):
    """Each request cycle of 125 ms is followed by 40 ms in which the user sends nothing: 24% of the users' time
    was the client's, and the throughput verdict is left out; with 1 ms it is under 1% and stands."""
    busy, _ = closed_loop("baseline", 0, 0.030, 0.005, gap=0.040)
    quick, _ = closed_loop("baseline", 1, 0.030, 0.005, gap=0.001, start=START + 40)
    steps = [window("baseline", 0, 1, START, SECONDS), window("baseline", 1, 1, START + 40, SECONDS)]
    run = write_run(tmp_path, busy + quick, steps)
    write_client(run, START, SECONDS + 40)
    slow, fast = finish_run(run).summary.variants["baseline"].steps
    cycle = 0.030 + 0.005 * 19 + 0.0005
    assert slow.client_validity.client_share == pytest.approx(0.040 / (cycle + 0.040), abs=0.01)
    assert slow.status == "client-invalid" and "waiting on the client" in slow.status_reasons[0]
    assert fast.client_validity.client_share == pytest.approx(0.001 / (cycle + 0.001), abs=0.01)
    assert fast.status == "clean"
    assert fast.client_validity.bounds["output_tps"].mean[1] == pytest.approx(
        fast.client_validity.client_share / (1 - fast.client_validity.client_share)
    )


def test_a_conversation_s_think_time_is_the_user_s_wait_not_the_client_s(tmp_path):
    """3-turn conversations that wait 0.5 s after each answer before the next turn, 1 ms between conversations:
    the client took 1 ms of each conversation, so the step is clean. Read without the conversation's think time,
    the same requests would give the waits to the client (about 0.5 s of each 0.63 s turn after the first)."""
    rows, _ = closed_loop("baseline", 0, 0.030, 0.005, turns=3, think_s=0.5)
    run = write_run(tmp_path, rows, [window("baseline", 0, 1, START, SECONDS)])
    write_client(run, START, SECONDS)
    cycle = 0.030 + 0.005 * 19 + 0.0005
    waits = 2 * 0.5 + 0.001  # per conversation of 3 turns
    patch_env(run, "load", conversation={"turns": 3, "think_s": 0.5})
    (step,) = finish_run(run).summary.variants["baseline"].steps
    assert step.client_validity.client_share == pytest.approx(0.001 / (3 * cycle + waits), abs=0.005)
    assert step.status == "clean", step.status_reasons
    patch_env(run, "load", conversation=None)
    (unaware,) = finish_run(run).summary.variants["baseline"].steps
    assert unaware.client_validity.client_share == pytest.approx(waits / (3 * cycle + waits), abs=0.02)
    assert unaware.status == "client-invalid"


def open_loop_pair(rate, e2e_s, lag_s):
    """Constant arrivals at ``rate`` for 30 s per variant (after 2 s of warm-up arrivals), each request sent
    ``lag_s[variant]`` late and lasting ``e2e_s[variant]`` (20 tokens), with the matching schedule lag in the
    client's samples."""
    rows, steps = [], []
    for step, variant in enumerate(e2e_s):
        start = START + step * 40
        steps.append(window(variant, 0, rate, start, SECONDS, "open"))
        for k in range(-int(rate * 2), int(rate * SECONDS)):
            intended = start + k / rate
            send = intended + lag_s[variant]
            offsets = 0.030 + (e2e_s[variant] - 0.030) / 19 * np.arange(20)
            rows.append(
                RequestRecord(
                    run_id="o",
                    variant=variant,
                    level=rate,
                    step=0,
                    phase="steady" if k >= 0 else "warmup",
                    mode="open",
                    seq=k,
                    request_id=f"{variant}-{k}",
                    output_tokens=20,
                    token_source="usage_deltas",
                    t_intended=intended,
                    t_send=send,
                    t_first=send + offsets[0],
                    t_end=send + offsets[-1],
                    t_done=send + offsets[-1] + 0.0005,
                    chunk_offsets=offsets.tolist(),
                    chunk_tokens=[1] * 20,
                    finish_reason="length",
                    http_status=200,
                ).to_dict()
            )
    return rows, steps


@pytest.mark.parametrize(
    ("e2e_s", "expected"),
    [
        ({"baseline": 1.0, "spec": 0.5}, "better"),  # 2x: 25 ms of lag cannot change it
        ({"baseline": 0.210, "spec": 0.200}, None),  # 5%: 25 ms of lag could be all of it
    ],
)
def test_an_open_loop_level_is_left_out_only_when_the_schedule_lag_could_change_its_verdict(tmp_path, e2e_s, expected):
    rows, steps = open_loop_pair(4.0, e2e_s, {"baseline": 0.025, "spec": 0.025})
    run = write_run(tmp_path, rows, [s | {"step": 0} for s in steps], mode="open")
    write_client(run, START, 80)
    outcome = finish_run(run)
    step = outcome.summary.variants["spec"].steps[0]
    assert step.client_validity.latency_valid is False  # schedule lag P99 25 ms: over the strict limit
    assert step.status == "clean" and step.client_valid is True  # every arrival sent: throughput holds
    level = outcome.summary.comparisons[0].steps[0]
    assert level.verdict == expected
    assert level.status == ("clean" if expected else "client-invalid")
    if expected is None:
        assert "could have moved E2E_sched P95" in level.excluded[-1]


def test_a_figure_bound_is_the_percentile_of_the_shifted_values():
    values = np.array([10.0, 20.0, 30.0, 40.0])
    down = np.array([0.0, 0.0, 0.0, 40.0])  # the slowest value could be all the client's
    bound = figure_bound(values, down, np.zeros(4))
    # P50 25 (numpy's linear), of the shifted 0, 10, 20, 30: 15; mean 25, shifted 15
    assert bound["p50"] == [pytest.approx((25.0 - 15.0) / 25.0), 0.0]
    assert bound["mean"] == [pytest.approx((25.0 - 15.0) / 25.0), 0.0]
    assert bound["worst"] == pytest.approx(0.4)  # the largest fraction of any statistic


def test_an_interval_widens_by_each_sides_bound_in_the_ratios_direction():
    ratio = {"ci95": [1.2, 1.5]}
    # throughput (variant / baseline): the variant may be 10% higher, the baseline 5% higher than measured
    assert widened(ratio, [0.0, 0.10], [0.0, 0.05], True)["client_ci95"] == pytest.approx([1.2 / 1.05, 1.5 * 1.10])
    # latency (baseline / variant): each side's value may be 20% (variant) / 10% (baseline) lower than measured
    assert widened(ratio, [0.20, 0.0], [0.10, 0.0], False)["client_ci95"] == pytest.approx([1.2 * 0.9, 1.5 / 0.8])
    assert widened({"ci95": None}, [0.2, 0.0], None, False)["client_ci95"] is None

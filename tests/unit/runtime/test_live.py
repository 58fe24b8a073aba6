"""The web UI's running figures against hand-computed answers: tokens by arrival time, steady-window latencies,
a level's point with its intervals, and the server's live acceptance from counter deltas."""

import math

import numpy as np
import pytest

from locust_llm.analysis.cycles import batch_ratio
from locust_llm.records import Phase
from locust_llm.runtime.live import LiveStats
from locust_llm.telemetry.poller import TelemetryPoller


def record(t_send, offsets, tokens, phase=Phase.STEADY, variant="v", level=2.0, error=None):
    return {
        "variant": variant,
        "level": level,
        "phase": phase,
        "error_class": error,
        "t_send": t_send,
        "t_first": t_send + offsets[0] if offsets else math.nan,
        "t_end": t_send + offsets[-1] if offsets else math.nan,
        "output_tokens": sum(tokens),
        "chunk_offsets": offsets,
        "chunk_tokens": tokens,
        "draft_n": None,
        "draft_accepted": None,
    }


def test_tokens_count_in_the_second_they_arrived_not_when_the_request_ended():
    live = LiveStats()
    # arrivals 100.25 (1 token), 101.25 (2), 101.75 (3), 103.5 (4): the request ends at 103.5
    live.add([record(100.0, [0.25, 1.25, 1.75, 3.5], [1, 2, 3, 4])], [])
    assert live.token_rates("v", 2.0, 100.0, 104.0).tolist() == [1, 5, 0, 4]
    assert live.token_rates("v", 2.0, 100.5, 102.5).tolist() == [2, 3]  # 101.25 in [100.5, 101.5), 101.75 after
    assert live.token_rates("other", 2.0, 100.0, 104.0).size == 0


def test_latencies_come_from_the_steady_window_and_failures_count_as_requests():
    live = LiveStats()
    live.add(
        [
            record(10.0, [0.5, 1.0, 1.5], [1, 1, 1], phase=Phase.WARMUP),  # TTFT 500 ms, warm-up: left out
            record(20.0, [0.1, 0.3, 0.5], [1, 1, 1]),  # TTFT 100 ms, TPOT (0.5 - 0.1) / 2 = 200 ms
            record(30.0, [], [], error="http_error"),
        ],
        [],
    )
    (row,) = live.rows()
    assert (row["requests"], row["errors"]) == (3, 1)
    assert row["ttft_p50_ms"] == pytest.approx(100.0) and row["tpot_p50_ms"] == pytest.approx(200.0)


def test_open_loop_ttft_is_from_the_intended_send_and_says_so():
    """Sent 300 ms after its intended time, first token 100 ms after the send: TTFT_sched is 400 ms."""
    live = LiveStats()
    late = {**record(20.0, [0.1, 0.3], [1, 1], level=4.0), "t_intended": 19.7}
    live.add([late, {**record(30.0, [0.05, 0.1], [1, 1], level=1.0), "t_intended": math.nan}], [])
    rows = {row["level"]: row for row in live.rows()}
    assert rows[4.0]["ttft_p50_ms"] == pytest.approx(400.0) and rows[4.0]["ttft_from"] == "intended send (sched)"
    assert rows[1.0]["ttft_p50_ms"] == pytest.approx(50.0) and rows[1.0]["ttft_from"] == "send"
    assert live.recent[0][2] == pytest.approx(400.0)


def test_a_done_level_gets_its_intervals_from_its_request_cycles_and_a_running_one_does_not():
    live = LiveStats()
    rng = np.random.default_rng(0)
    rows, durations = [], []
    for user in (0, 1):  # two users, each sending again when its answer ends: 20 cycles of 1 s +-2%, 100 tokens each
        t = 100.0
        for _ in range(20):
            e2e = 1.0 + rng.uniform(-0.02, 0.02)
            closed = {"user": user, "mode": "closed", "step": 3, "worker": 0, "turn": 0, "t_done": t + e2e}
            rows.append({**record(t, [0.1 + rng.uniform(0, 0.02), e2e], [50, 50]), **closed})
            durations.append(e2e)
            t += e2e
    live.collect("v", 3)
    live.add([{**rows[0], "step": 4}], [])  # a step not being collected: its requests are not held
    live.add(rows, [])
    assert list(live.cycles) == [("v", 3)]
    batches = live.step_batches("v", 3, 100.0, 125.0)
    throughput = batch_ratio(batches)
    assert throughput.value == pytest.approx(4000 / (sum(durations) / 2))  # tokens over cycle time per user
    running = live.point("v", 2.0, [(100.0, 125.0)], done=False, batches=[])
    assert running["tps_ci"] is None and running["tpot_p50_ci"] is None
    done = live.point("v", 2.0, [(100.0, 125.0)], done=True, batches=[batches])
    lo, hi = done["tps_ci"]
    assert 0 < lo < throughput.value < hi and hi / lo < 1.1  # the spread of cycles and of a count
    assert done["tpot_p50_ci"][0] <= done["tpot_p50"] <= done["tpot_p50_ci"][1]
    live.forget("v", 3)
    assert live.step_batches("v", 3, 100.0, 125.0).tokens.size == 0


def test_live_acceptance_is_the_counters_delta_over_the_window(tmp_path):
    poller = TelemetryPoller(tmp_path, interval_s=1.0)
    try:
        for t, drafted, accepted, kv in ((0.0, 100, 60, 0.1), (5.0, 150, 90, 0.2), (12.0, 300, 150, 0.3)):
            poller._keep_live(
                "v",
                t,
                [
                    (None, "spec_draft_tokens", "{}", drafted),
                    (None, "spec_accepted_tokens", "{}", accepted),
                    (None, "kv_cache_usage", '{"gpu": "0"}', kv),
                    (None, "kv_cache_usage", '{"gpu": "1"}', kv + 0.2),
                ],
            )
        figures = poller.live_figures("v", window_s=10.0)
        assert figures["acceptance"] == pytest.approx((150 - 60) / (300 - 100))  # from t=0, the last <= 12 - 10
        assert figures["kv_cache_usage"] == pytest.approx(0.4)  # the mean over GPUs of the last reading
        assert poller.live_figures("w") == {"acceptance": None, "acceptance_gauge": None, "kv_cache_usage": None}
    finally:
        poller.close()

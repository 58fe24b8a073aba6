"""Step throughput over request cycles and the inflection points built on it, against simulated closed loops whose
throughput is known by design (``tests.synthetic_cycles``) and hand-computed batches."""

import math

import numpy as np
import pandas as pd
import pytest

from locust_llm.analysis.curves import LevelThroughput, saturation, throughput_knee
from locust_llm.analysis.cycles import (
    TOO_SHORT,
    Batches,
    batch_lag1,
    batch_ratio,
    block_throughput_ratio,
    step_batches,
)
from tests.synthetic_cycles import closed_loop, true_throughput


def test_batch_ratio_by_hand():
    tokens = np.array([10000.0, 12000.0, 8000.0, 11000.0, 9000.0])
    seconds = np.array([1.0, 1.2, 0.8, 1.0, 1.0])
    figure = batch_ratio(Batches(tokens, seconds, "cycles"))
    value = 50000.0 / 5.0
    residuals = tokens - value * seconds  # 0, 0, 0, 1000, -1000: 3.2% on the log scale, above the count's 0.45%
    se_log = math.sqrt(5 / 4 * float(residuals @ residuals) / 25.0) / value
    t4 = 2.7764451051977987  # Student's t, 4 degrees of freedom, 0.975
    assert figure.value == pytest.approx(value)
    assert figure.ci95 == pytest.approx([value * math.exp(-t4 * se_log), value * math.exp(t4 * se_log)])
    assert figure.covered_s == pytest.approx(5.0)


def test_a_steady_count_keeps_its_poisson_spread():
    figure = batch_ratio(Batches(np.full(5, 100.0), np.ones(5), "cycles"))  # identical batches: no spread of their own
    assert figure.se_log == pytest.approx(1.0 / math.sqrt(500.0))


def test_fewer_than_five_batches_give_no_interval():
    figure = batch_ratio(Batches(np.array([10.0, 12.0, 9.0, 11.0]), np.ones(4), "cycles"))
    assert figure.value == pytest.approx(10.5)
    assert figure.ci95 is None and figure.note == TOO_SHORT


def test_batch_autocorrelation_by_hand_with_its_short_series_bias_removed():
    # Rates 1 or 2 about their mean 1.5 (+-0.5): 6 of the 9 neighbours agree in sign, 3 do not, so
    # r = (6 - 3) * 0.25 / (10 * 0.25) = 0.3; unbiased for a 10-point series, (0.3 * 10 + 1) / (10 - 3) = 4/7.
    wandering = Batches(np.array([1.0, 1, 1, 2, 2, 2, 1, 1, 2, 2]), np.ones(10), "cycles")
    too_short = Batches(np.array([5.0, 9.0]), np.ones(2), "cycles")  # two batches carry no lag-1 of their own
    assert batch_lag1([wandering, too_short]) == pytest.approx(4 / 7)
    alternating = Batches(np.array([1.0, 2] * 5), np.ones(10), "cycles")
    assert batch_lag1([alternating]) == 0.0
    assert batch_lag1([too_short]) == 0.0


def test_a_wandering_servers_batches_widen_the_speedup_interval():
    # The same batches in two orders: shuffled, and sorted as a server that slows down then recovers. Their spread is
    # the same, so only the batches' autocorrelation (each neighbour like the last) can widen the interval.
    rng = np.random.default_rng(4)
    rates = 100.0 * (1.0 + 0.1 * rng.standard_normal((4, 10)))
    blocks = [np.sort(r) if i % 2 else np.sort(r)[::-1] for i, r in enumerate(rates)]

    def ratio(order):
        sides = [Batches(order(b), np.ones(10), "cycles") for b in blocks]
        return block_throughput_ratio({0: sides[1], 1: sides[2]}, {0: sides[0], 1: sides[3]})

    shuffled = ratio(lambda b: rng.permutation(b))
    wandering = ratio(lambda b: b)
    assert shuffled["value"] == pytest.approx(wandering["value"])
    assert batch_lag1([Batches(b, np.ones(10), "cycles") for b in blocks]) > 0.5

    def width(r):
        return math.log(r["ci95"][1] / r["ci95"][0])

    assert width(wandering) > 1.5 * width(shuffled)


def test_cycles_of_two_users_by_hand():
    # user 0 sends every 1 s, 10 tokens; user 1 every 2 s, 30 tokens, its second request fails (earns 0)
    rows = [(0, 0, t, 10, None) for t in np.arange(0.0, 12.0, 1.0)]
    rows += [(0, 1, t, 30, "http_error" if t == 2.0 else None) for t in np.arange(0.0, 12.0, 2.0)]
    frame = pd.DataFrame(rows, columns=["worker", "user", "t_send", "output_tokens", "error_class"])
    frame["mode"] = "closed"
    frame["t_done"] = frame["t_end"] = frame["t_send"] + 0.5
    batches = step_batches(frame, 0.0, 10.0)
    # cycles starting in [0, 10): user 0 ten of 1 s (100 tokens), user 1 five of 2 s (4 x 30 tokens): 20 s of cycles
    # over 2 users is 10 s, so 220 tokens / 10 s
    assert batches.method == "cycles" and batches.cycles == 15 and batches.users == 2
    assert batch_ratio(batches).value == pytest.approx(22.0)
    assert batches.tokens.sum() == pytest.approx(220.0)


def test_time_batches_without_users_count_requests_sent_in_the_window():
    frame = pd.DataFrame({"t_send": np.arange(0.5, 20.0, 0.5), "output_tokens": 8, "error_class": None})
    frame["user"], frame["mode"] = -1, "closed"
    batches = step_batches(frame, 0.0, 10.0, p95_e2e_s=0.4)
    assert batches.method == "time" and batches.tokens.size == 5  # batches of max(2 s, 2 x 0.4 s)
    assert batch_ratio(batches).value == pytest.approx(19 * 8 / 10.0)  # sends at 0.5 ... 9.5


def test_single_user_interval_is_positive_and_covers_the_truth_at_its_rate():
    """The issue's case: one user, cycles that begin with a 100 ms prefill earning no token. 300 seeded 30 s
    windows: the interval never goes below 0 and covers the true throughput in about 95% of them."""
    rng = np.random.default_rng(34)
    truth = true_throughput(1, 1, 32, 0.1, (0.01, 0.03))
    covered, lows = 0, []
    for _ in range(300):
        frame, start, end = closed_loop(rng, users=1, slots=1, window_s=30.0)
        figure = batch_ratio(step_batches(frame, start, end))
        assert figure.ci95 is not None
        lows.append(figure.ci95[0])
        covered += figure.ci95[0] <= truth <= figure.ci95[1]
    assert min(lows) > 0
    assert 0.90 <= covered / 300 <= 0.99, covered


TPOT_S = (0.018, 0.022)  # a steady server: each request's time within 5% of the mean


def _level(rng, users: int, slots: int = 4) -> LevelThroughput:
    frame, start, end = closed_loop(rng, users=users, slots=slots, window_s=40.0, tpot_s=TPOT_S)
    figure = batch_ratio(step_batches(frame, start, end))
    assert figure.value is not None and figure.se_log is not None
    return LevelThroughput(users, figure.value, figure.se_log, figure.df)


def test_saturation_and_knee_of_a_four_slot_server_are_at_four():
    rng = np.random.default_rng(4)
    points = [_level(rng, users) for users in (1, 2, 4, 8, 16)]
    for p in points:
        truth = true_throughput(int(p.level), 4, 32, 0.1, TPOT_S)
        assert abs(math.log(p.value / truth)) < 4 * p.se_log + 0.02, (p, truth)
    sat, knee = saturation(points), throughput_knee(points)
    assert (sat["level"], sat["status"]) == (4, "reached"), sat
    assert (knee["level"], knee["status"]) == (4, "reached"), knee
    assert all(g["ci95"][1] < 0.05 for g in sat["gains"])
    # the segments below 4 have elasticity 1, above it 0 (one 95% interval of four may miss: checked by value)
    for seg, truth in zip(knee["segments"], (1.0, 1.0, 0.0, 0.0), strict=True):
        assert abs(seg["elasticity"] - truth) < 0.1, seg


def test_a_curve_still_rising_is_not_saturated_and_a_wide_low_level_is_not_saturation():
    rising = [LevelThroughput(lv, 100.0 * lv**0.7, 0.03, 9) for lv in (1, 2, 4, 8)]
    sat = saturation(rising)
    assert sat["level"] is None and sat["status"] == "not reached"
    assert "from 4 to 8" in sat["text"]
    # the issue's run: a very uncertain level 1 then steady gains; overlap of intervals must not make 1 saturated
    issue = [
        LevelThroughput(1, 147.0, 0.45, 1),
        *(LevelThroughput(lv, v, 0.03, 9) for lv, v in ((2, 161.0), (4, 171.0), (8, 224.0))),
    ]
    assert saturation(issue)["level"] is None
    assert throughput_knee(issue)["level"] is None or throughput_knee(issue)["level"] >= 2
    assert saturation(rising[:1])["status"] == "undetermined"

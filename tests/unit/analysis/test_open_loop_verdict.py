"""Open loop judges a level on latency (E2E P95 from the intended send, TPOT P50; paired) and goodput, never on
aggregate output tok/s, which the offered rate fixes. Samples are built by hand with a known answer."""

import numpy as np
import pandas as pd
import pytest

from locust_llm.analysis.comparison import comparison, level_comparison, open_loop_verdict
from locust_llm.analysis.samples import LevelSamples

CLEAR_UP, CLEAR_DOWN, FLAT = [1.4, 1.6], [0.6, 0.8], [0.9, 1.1]


def ratios(e2e, tpot, goodput) -> dict:
    return {
        "e2e_sched_p95_speedup": {"value": 1.0, "ci95": e2e},
        "tpot_p50_speedup": {"value": 1.0, "ci95": tpot},
        "goodput_speedup": {"value": 1.0, "ci95": goodput},
    }


@pytest.mark.parametrize(
    "e2e, tpot, goodput, verdict",
    [
        (CLEAR_UP, CLEAR_UP, FLAT, "better"),
        (CLEAR_UP, CLEAR_UP, None, "better"),  # goodput with no interval is not clearly worse
        (CLEAR_UP, FLAT, FLAT, "unclear"),  # both latencies must be clearly better
        (FLAT, CLEAR_UP, FLAT, "unclear"),
        (CLEAR_UP, CLEAR_UP, CLEAR_DOWN, "worse"),  # faster, but fewer requests served within their SLOs
        (FLAT, FLAT, CLEAR_DOWN, "worse"),
        (FLAT, CLEAR_DOWN, FLAT, "worse"),
        (CLEAR_UP, CLEAR_DOWN, FLAT, "unclear"),  # mixed
        (FLAT, FLAT, FLAT, "unclear"),
    ],
)
def test_the_open_loop_rule(e2e, tpot, goodput, verdict):
    assert open_loop_verdict(ratios(e2e, tpot, goodput))[0] == verdict


def samples(tpot_ms: float, token_rates: dict[int, float], good_rate: float, seed: int, n: int = 100) -> LevelSamples:
    """Blocks (steps) of one variant at one level: ``n`` paired requests each at ``tpot_ms`` (+-5%), 20 tokens, and
    per-second bins of output tokens and good requests."""
    rng = np.random.default_rng(seed)
    out = LevelSamples()
    for step, rate in token_rates.items():
        tpot = tpot_ms * rng.uniform(0.95, 1.05, n)
        ttft = 30.0 * rng.uniform(0.95, 1.05, n)
        requests = pd.DataFrame(
            {
                "worker": 0,
                "step": step,
                "seq": np.arange(n),
                "tpot_ms": tpot,
                "decode_tps": 1000.0 / tpot,
                "ttft_ms": ttft,
                "ttft_sched_ms": ttft,
                "e2e_sched_all_ms": ttft + 19 * tpot,
            }
        )
        out.add(step, "clean", [], np.full(20, rate) + rng.normal(0, 1, 20), np.full(20, good_rate), requests)
    return out


def test_output_tps_blocks_that_disagree_do_not_make_an_open_loop_level_inconclusive():
    """Two ABBA blocks: the variant's second block shows twice the output tok/s (as if the offered rate had
    changed), but every request is paired and has half the TPOT, and goodput is the same."""
    base = samples(20.0, {0: 200.0, 1: 200.0}, 10.0, seed=1)
    spec = samples(10.0, {0: 200.0, 1: 400.0}, 10.0, seed=2)
    opened = level_comparison(10.0, base, spec, "baseline", "spec", "open", seed=0)
    assert opened["output_tps_speedup"]["blocks_agree"] is False  # the rate's blocks do disagree...
    assert opened["status"] == "clean" and opened["verdict"] == "better"  # ...and do not decide in open loop
    assert opened["tpot_p50_speedup"]["ci95"][0] > 1.8 and opened["tpot_p50_speedup"]["pairs"] == 200
    closed = level_comparison(10.0, base, spec, "baseline", "spec", "closed", seed=0)
    assert closed["status"] == "inconclusive" and closed["verdict"] == "unclear"  # closed loop: unchanged


def test_goodput_clearly_worse_is_the_crossover_and_named():
    """Level 5: half the TPOT, same goodput. Level 10: the same latency, but half the good requests per second."""
    base = {5.0: samples(20.0, {0: 100.0}, 5.0, seed=1), 10.0: samples(20.0, {2: 200.0}, 10.0, seed=3)}
    spec = {5.0: samples(10.0, {0: 100.0}, 5.0, seed=2), 10.0: samples(20.0, {2: 200.0}, 5.0, seed=4)}
    result = comparison("baseline", "spec", base, spec, "open")
    low, high = result["steps"]
    assert low["verdict"] == "better"
    assert high["verdict"] == "worse" and high["verdict_basis"] == "goodput clearly worse"
    assert result["crossover_level"] == 10.0
    assert result["recommendation"].startswith("enable spec up to 5 req/s")
    assert "disable from 10" in result["recommendation"] and "goodput" in result["recommendation"]

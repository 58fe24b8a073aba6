"""Scale-out: the slope of goodput from one server to N against hand-built runs whose answer is known, the gate,
an unjudged scale-out, and the capacity answer with the measured efficiency."""

import json
import math

import numpy as np
import pytest

from locust_llm.analysis.cost import LevelRates, variant_cost
from locust_llm.analysis.documents.scale_out import ScaleOutVariant
from locust_llm.pipeline import finish_run
from locust_llm.scenario import CostSpec
from tests.synthetic import back_to_back, patch_env, window, write_run

TTFT, TPOT, TOKENS, SECONDS = 0.05, 0.01, 20, 30.0
PER_REQUEST_S = TTFT + TPOT * (TOKENS - 1) + 0.001  # back_to_back's spacing at the mean per-token time


def scale_run(
    path, many_tpot: float, servers: int = 2, level: int = 2, many_seconds: float = SECONDS, min_efficiency=None
):
    """A short ladder step, then two ABBA pairs: one server with ``level`` streams at TPOT, ``servers`` servers
    with ``servers x level`` streams at ``many_tpot`` (the round-robin alternates the server index)."""
    path.mkdir()
    rng = np.random.default_rng(3)
    rows, steps, t = [], [], 1_700_000_000.0
    steps.append(window("baseline", 0, level, t, SECONDS))
    for stream in range(level):
        rows += back_to_back(path.name, "baseline", level, 0, t, SECONDS, TTFT, TPOT, TOKENS, rng, stream=stream)
    t += SECONDS + 5
    order = [(0, 1), (0, servers), (1, servers), (1, 1)]
    for index, (pair, n) in enumerate(order):
        step, streams = 10 + index, n * level
        seconds = SECONDS if n == 1 else many_seconds
        steps.append(
            {**window("baseline", step, streams, t, seconds), "servers": n, "server_level": level, "pair": pair}
        )
        for stream in range(streams):
            rows += back_to_back(
                path.name,
                "baseline",
                streams,
                step,
                t,
                seconds,
                TTFT,
                TPOT if n == 1 else many_tpot,
                TOKENS,
                rng,
                stream=stream,
                server=stream % n,
            )
        t += seconds + 5
    write_run(path, rows, steps)
    patch_env(path, "scale_out", servers=servers, level=level, pairs=2, min_efficiency=min_efficiency, urls=[])
    return path


def rate(streams: int, tpot: float) -> float:
    return streams / (TTFT + tpot * (TOKENS - 1) + 0.001)


def tpot_for(slower: float) -> float:
    """The per-token time that makes a request ``slower`` times as long as one server's."""
    return (slower * PER_REQUEST_S - TTFT - 0.001) / (TOKENS - 1)


@pytest.mark.parametrize("slower, verdict", [(1.0, "linear"), (2.0, "no gain")])
def test_slope_against_a_known_answer(tmp_path, slower, verdict):
    """Linear: two servers each as fast as one (twice the streams, same pace). Shared: twice the streams, each
    request twice as long as one server's, so the two serve what one does."""
    many_tpot = tpot_for(slower)
    outcome = finish_run(scale_run(tmp_path / "run", many_tpot))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    (scale,) = summary["scale_out"]["variants"]
    truth = rate(4, many_tpot) / rate(2, TPOT)  # hand-computed from the streams' schedules
    assert truth == pytest.approx(2.0 if verdict == "linear" else 1.0, rel=1e-9)
    assert scale["slope"] == pytest.approx(truth, rel=0.04)
    assert scale["slope_ci95"][0] <= truth <= scale["slope_ci95"][1]
    assert scale["efficiency"] == pytest.approx(scale["slope"] / 2)
    assert scale["scaling"] == verdict and scale["pairs"] == 2
    assert scale["one_goodput_rps"] == pytest.approx(rate(2, TPOT), rel=0.04)
    # The ladder never sees the scale-out steps: level 4 (2 servers x 2) is no ladder level.
    assert [s["level"] for s in summary["variants"]["baseline"]["steps"]] == [2.0]
    many = [s for s in scale["steps"] if s["servers"] == 2]
    assert all([p["server"] for p in s["per_server"]] == [0, 1] for s in many)
    assert all(p["share"] == pytest.approx(0.5, abs=0.05) for s in many for p in s["per_server"])
    assert outcome.verdict.exit_code == 0
    assert summary["scale_out"]["text"].startswith("baseline: 2 servers at 2 concurrent streams each served")


def test_the_efficiency_gate_and_a_scale_out_without_a_clean_pair(tmp_path):
    outcome = finish_run(scale_run(tmp_path / "gated", tpot_for(2.0), min_efficiency=0.8))
    assert outcome.verdict.exit_code == 3
    assert any("efficiency" in r and "min_efficiency 0.8" in r for r in outcome.verdict.reasons["3"])
    held = finish_run(scale_run(tmp_path / "held", TPOT, min_efficiency=0.8))
    assert held.verdict.exit_code == 0
    assert [c.ok for c in held.verdict.checks if c.gate == "scale_out_min_efficiency"] == [True]
    # The N-server steps see too few requests (0.2 s each): no clean pair, no slope, the run is invalid.
    short = finish_run(scale_run(tmp_path / "short", TPOT, many_seconds=0.2))
    summary = json.loads((tmp_path / "short" / "summary.json").read_text())
    (scale,) = summary["scale_out"]["variants"]
    assert scale["slope"] is None and scale["scaling"] == "not judged" and scale["excluded"]
    assert short.verdict.exit_code == 5
    assert any(r.startswith("scale-out: baseline") for r in short.verdict.reasons["5"])


def test_capacity_with_the_measured_efficiency():
    price = CostSpec(gpu_hour_usd=2.0, gpus=1, target_rps=10.0)
    rates = [
        LevelRates(
            4,
            "clean",
            output_tps=100.0,
            output_tps_ci95=[90.0, 110.0],
            goodput_rps=1.0,
            goodput_rps_ci95=[0.8, 1.25],
            tokens_per_request=100.0,
            good_token_share=1.0,
        )
    ]
    half = ScaleOutVariant(
        variant="spec",
        servers=2,
        server_level=4,
        unit="concurrent streams",
        slope=1.0,
        slope_ci95=[0.8, 1.6],
        efficiency=0.5,
        efficiency_ci95=[0.4, 0.8],
        scaling="sub-linear",
        text="",
    )
    capacity = variant_cost("spec", rates, price, "concurrent streams", half)["capacity"]
    assert capacity["servers"] == 10  # linear: 10 / 1.0
    assert capacity["servers_measured"] == 20  # 10 / (1.0 x 0.5)
    # 10 / (1.25 x 0.8) = 10 -> 10; 10 / (0.8 x 0.4) = 31.25 -> 32
    assert capacity["servers_measured_ci95"] == [10, 32]
    above = half.model_copy(update={"efficiency": 1.1, "efficiency_ci95": [0.95, 1.3]})
    capacity = variant_cost("spec", rates, price, "concurrent streams", above)["capacity"]
    # Above linear is noise: never fewer servers than linear scaling needs.
    assert capacity["servers_measured"] == 10 and capacity["servers_measured_ci95"][0] == 8
    assert "efficiency 1.1" in capacity["scaling_text"]
    assert math.isclose(capacity["measured_efficiency"], 1.1)

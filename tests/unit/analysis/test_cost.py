"""Cost per million tokens: the formulas and their intervals, the cheapest clean level within the gates, the
capacity answer, and cost in summary.json, the report, summary.md and the console only when the scenario prices it.

Every expected figure is worked out by hand in the test (the numbers in the comments), never taken from the code.
"""

import json

import numpy as np
import pytest

from locust_llm.analysis.cost import LevelRates, level_cost, servers_needed, usd_per_mtok, usd_per_mtok_ci, variant_cost
from locust_llm.analysis.documents.summary import Summary
from locust_llm.analysis.timeline import Timeline
from locust_llm.pipeline import finish_run
from locust_llm.report import ReportInput, RunView
from locust_llm.report.html import render_html
from locust_llm.rundir.env import RunEnv
from locust_llm.scenario import CostSpec
from tests.browser import assert_inert
from tests.synthetic import EVIL_VARIANT, back_to_back, hostile_run, patch_env, window, write_run
from tests.unit.report.test_report import strip_optional

GPU_PRICE = CostSpec(gpu_hour_usd=3.6, gpus=2)  # 3.6 x 2 + 0 = 7.2 USD per server-hour


def clean(level: float, tps: float, goodput: float, tokens: float = 100.0, **fields) -> LevelRates:
    return LevelRates(
        level,
        "clean",
        output_tps=tps,
        output_tps_ci95=[0.9 * tps, 1.1 * tps],
        goodput_rps=goodput,
        goodput_rps_ci95=[0.8 * goodput, 1.2 * goodput],
        tokens_per_request=tokens,
        good_token_share=goodput * tokens / tps,  # the good requests' tokens over all output tokens
        **fields,
    )


def test_cost_per_million_tokens_and_its_interval():
    assert GPU_PRICE.hourly_usd == pytest.approx(7.2)
    # 7.2 / (1000 x 3600) x 1e6 = 2.0; the interval swaps: 7.2 / (1100 x 3600) x 1e6 = 20/11, 7.2 / 900 ... = 20/9
    assert usd_per_mtok(7.2, 1000.0) == pytest.approx(2.0)
    assert usd_per_mtok_ci(7.2, [900.0, 1100.0]) == pytest.approx([1.8181818, 2.2222222])
    assert usd_per_mtok(7.2, 0.0) is None and usd_per_mtok(7.2, None) is None
    assert usd_per_mtok_ci(7.2, [-5.0, 1100.0]) is None  # a rate that may be 0: the cost has no upper bound


def test_a_level_priced_by_gpu():
    rates = LevelRates(
        4,
        "clean",
        output_tps=1000.0,
        output_tps_ci95=[900.0, 1100.0],
        goodput_rps=5.0,
        goodput_rps_ci95=[4.0, 6.0],
        tokens_per_request=100.0,
        good_token_share=0.5,
    )
    row = level_cost(rates, GPU_PRICE)
    assert row["usd_per_mtok"] == pytest.approx(2.0)
    assert row["usd_per_mtok_ci95"] == pytest.approx([20 / 11, 20 / 9])
    assert row["tps_per_gpu"] == pytest.approx(500.0) and row["tps_per_gpu_ci95"] == pytest.approx([450.0, 550.0])
    # effective: half the output tokens were good: 500 tok/s [450, 550] -> 7.2 / (500 x 3600) x 1e6 = 4.0,
    # [7.2 / (550 x 3600) x 1e6, 7.2 / (450 x 3600) x 1e6] = [40/11, 40/9]; never above the output rate
    assert row["effective_tps"] == pytest.approx(500.0) and row["effective_tps_ci95"] == pytest.approx([450.0, 550.0])
    assert row["usd_per_effective_mtok"] == pytest.approx(4.0)
    assert row["usd_per_effective_mtok_ci95"] == pytest.approx([40 / 11, 40 / 9])
    assert row["eligible"]


def test_a_cpu_host_price_and_other_costs():
    price = CostSpec(cpu_hour_usd=0.10, other_hour_usd=0.08)  # 0.10 + 0.08 = 0.18 USD/h
    row = level_cost(clean(1, 50.0, 0.5), price)
    assert row["usd_per_mtok"] == pytest.approx(1.0)  # 0.18 / (50 x 3600) x 1e6
    assert row["tps_per_gpu"] is None  # no GPU in the price: no per-GPU figure
    # A GPU price wins over a CPU one: 1.5 x 1 + 0.5 = 2.0 USD/h.
    assert CostSpec(gpu_hour_usd=1.5, cpu_hour_usd=9.0, other_hour_usd=0.5).hourly_usd == pytest.approx(2.0)


def test_the_cheapest_level_skips_unclean_and_gate_failing_levels():
    rates = [
        clean(1, 100.0, 1.0),  # effective 100 tok/s -> 7.2 / 0.36 = 20 USD per M
        clean(2, 200.0, 2.0),  # 10 USD per M: the answer
        # cheaper, but unsteady: 800 tok/s -> 2.5 USD per M
        LevelRates(4, "unsteady", ["spec step 2: unsteady: drifted"], 800.0, [700.0, 900.0], 8.0, [7.0, 9.0], 100.0),
        clean(8, 400.0, 4.0, gate_failures=["ttft_p99_ms 900 > 500"]),
    ]  # 5 USD per M, but over a gate
    cost = variant_cost("spec", rates, GPU_PRICE, "concurrent streams")
    assert [row["eligible"] for row in cost["levels"]] == [True, True, False, False]
    assert cost["best_level"] == 2
    assert cost["levels"][1]["usd_per_effective_mtok"] == pytest.approx(10.0)
    assert cost["text"].startswith("spec at 2 concurrent streams: 10 USD per million effective tokens")
    assert cost["capacity"] is None  # no target given
    # A level whose requests miss the per-request SLO is cheap per output token and dear per effective token.
    slow = variant_cost("spec", [clean(1, 100.0, 1.0), clean(2, 400.0, 0.1)], GPU_PRICE, "concurrent streams")
    assert slow["levels"][1]["usd_per_mtok"] == pytest.approx(5.0) and slow["best_level"] == 1


def test_no_eligible_level_means_no_choice():
    cost = variant_cost(
        "spec",
        [LevelRates(1, "contended", ["spec step 0: contended: host busy"])],
        CostSpec(gpu_hour_usd=2.0, target_rps=10.0),
        "req/s",
    )
    assert cost["best_level"] is None and cost["levels"][0]["usd_per_mtok"] is None
    assert "no level" in cost["text"] and cost["capacity"].get("servers") is None


def test_capacity_is_a_ceiling_with_its_interval():
    price = CostSpec(gpu_hour_usd=3.6, gpus=2, target_rps=25.0)
    rates = [
        clean(1, 100.0, 2.0),
        LevelRates(
            2,
            "insufficient",
            output_tps=900.0,
            output_tps_ci95=[800.0, 1000.0],
            goodput_rps=30.0,
            goodput_rps_ci95=[25.0, 35.0],
            tokens_per_request=100.0,
        ),  # most goodput, but not clean
        LevelRates(
            4,
            "clean",
            output_tps=600.0,
            output_tps_ci95=[550.0, 650.0],
            goodput_rps=6.0,
            goodput_rps_ci95=[5.0, 7.0],
            tokens_per_request=100.0,
            good_token_share=1.0,
        ),
    ]
    capacity = variant_cost("spec", rates, price, "concurrent streams")["capacity"]
    # 25 / 6 = 4.17 -> 5 servers; 25 / 7 = 3.57 -> 4, 25 / 5 = 5 -> 5; 2 GPUs each
    assert capacity["level"] == 4 and capacity["servers"] == 5 and capacity["servers_ci95"] == [4, 5]
    assert capacity["gpus"] == 10 and capacity["gpus_ci95"] == [8, 10]
    assert "assuming linear scaling" in capacity["text"]
    assert servers_needed(1.1, 0.1) == 11  # 11.000000000000002 in floating point
    assert servers_needed(10.0, 0.0) is None


# -- through the pipeline -------------------------------------------------------------------------------------
def ladder_run(path, cost: dict | None, gates: dict | None = None):
    """One variant, 1 and 2 streams for 30 s, and 4 streams for 0.5 s (about 10 requests: too few, insufficient)."""
    path.mkdir()
    rng = np.random.default_rng(11)
    rows, steps, t = [], [], 1_700_000_000.0
    for step, (level, seconds) in enumerate(((1, 30.0), (2, 30.0), (4, 0.5))):
        steps.append(window("baseline", step, level, t, seconds))
        for stream in range(level):
            rows += back_to_back(path.name, "baseline", level, step, t, seconds, 0.05, 0.01, 20, rng, stream=stream)
        t += seconds + 5.0
    write_run(path, rows, steps, gates=gates, slo={"tpot_ms": 50.0})
    if cost is not None:
        patch_env(path, "scenario", cost=cost)
    return path


def test_summary_prices_the_clean_levels(tmp_path):
    outcome = finish_run(ladder_run(tmp_path / "run", {"gpu_hour_usd": 3.6, "gpus": 2, "target_rps": 25}))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    steps = {s["level"]: s for s in summary["variants"]["baseline"]["steps"]}
    (variant,) = summary["cost"]["variants"]
    levels = {row["level"]: row for row in variant["levels"]}
    assert steps[4.0]["status"] == "insufficient"
    assert levels[4.0]["status"] == "insufficient" and levels[4.0]["usd_per_mtok"] is None
    assert not levels[4.0]["eligible"] and levels[4.0]["excluded"]
    for level in (1.0, 2.0):  # one clean step per level: its figures are the step's own
        tps, (lo, hi) = steps[level]["output_tps"], steps[level]["output_tps_ci95"]
        assert levels[level]["usd_per_mtok"] == pytest.approx(7.2 / (tps * 3600) * 1e6)
        assert levels[level]["usd_per_mtok_ci95"] == pytest.approx([7.2 / (hi * 3600) * 1e6, 7.2 / (lo * 3600) * 1e6])
        assert levels[level]["tokens_per_request"] == pytest.approx(20.0)
        assert levels[level]["goodput_rps"] == pytest.approx(steps[level]["goodput_rps"])
    # Two streams deliver about twice the tokens for the same price: level 2 is the cheapest clean level.
    assert variant["best_level"] == 2.0
    capacity = variant["capacity"]
    assert capacity["level"] == 2.0 and capacity["servers"] == -(-25 // steps[2.0]["goodput_rps"])
    assert "USD per million effective tokens" in summary["cost"]["text"]
    assert "cost at 2 x 3.6 USD/h per GPU" in outcome.text


def test_a_failed_gate_keeps_a_level_out(tmp_path):
    # TTFT is 50 ms on every request: a 40 ms P99 gate fails at every level.
    finish_run(ladder_run(tmp_path / "run", {"cpu_hour_usd": 0.1}, gates={"ttft_p99_ms": 40.0}))
    cost = json.loads((tmp_path / "run" / "summary.json").read_text())["cost"]
    (variant,) = cost["variants"]
    assert variant["best_level"] is None and not any(row["eligible"] for row in variant["levels"])
    assert all(row["gate_failures"][0].startswith("ttft_p99_ms 50") for row in variant["levels"][:2])
    assert "ttft_p99_ms <= 40" in cost["rule"] and cost["text"].startswith("no level")


def test_report_shows_cost_only_when_priced(tmp_path):
    priced = finish_run(ladder_run(tmp_path / "priced", {"cpu_hour_usd": 0.1}))
    html = (tmp_path / "priced" / "report.html").read_text()
    assert '<section id="cost">' in html and "Cost per million tokens" in html
    assert "CPU host 0.1 USD/h + 0 USD/h other = 0.1 USD/h per server" in html
    assert_inert(html)
    assert "- Cost at CPU host 0.1 USD/h" in (tmp_path / "priced" / "summary.md").read_text()
    assert "cost at CPU host" in priced.text

    plain = finish_run(ladder_run(tmp_path / "plain", None))
    html = (tmp_path / "plain" / "report.html").read_text()
    assert 'id="cost"' not in html and "USD" not in html and "per million" not in html
    assert "USD" not in (tmp_path / "plain" / "summary.md").read_text() and "USD" not in plain.text
    assert json.loads((tmp_path / "plain" / "summary.json").read_text())["cost"] is None


def test_cost_section_escapes_variant_names(tmp_path):
    path = patch_env(hostile_run(tmp_path), "scenario", cost={"gpu_hour_usd": 2.0})
    finish_run(path)
    html = (path / "report.html").read_text()
    section = html[html.index('<section id="cost">') : html.index('<section id="consistency">')]
    assert_inert(section)
    assert EVIL_VARIANT not in section and "spec&#34;&gt;&lt;svg onload=alert(4)&gt;" in section


def test_cost_section_with_every_optional_figure_missing(tmp_path):
    finish_run(ladder_run(tmp_path / "run", {"gpu_hour_usd": 1.0, "target_rps": 5}))
    summary = Summary.model_validate_json((tmp_path / "run" / "summary.json").read_text())
    sparse = strip_optional(summary).model_copy(update={"cost": strip_optional(summary.cost)})
    html = render_html(RunView(ReportInput(summary=sparse, env=RunEnv(), timeline=Timeline(None))))
    assert "could not be rendered" not in html and '<section id="cost">' in html

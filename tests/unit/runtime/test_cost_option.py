"""--gpu-hour-usd: replaces the scenario's GPU price (or prices a scenario without one), recorded with the options."""

import pytest

from locust_llm.runtime.plan import load_plan
from locust_llm.scenario import ScenarioError
from tests.helpers import REPO

from .fakes import options

TINY_CPU = str(REPO / "scenarios" / "tiny-cpu.yaml")  # prices a CPU host at 0.10 USD/h


def test_gpu_hour_usd_overrides_the_scenario():
    plan = load_plan(options(scenario=TINY_CPU))
    assert plan.scenario.cost.gpu_hour_usd is None and plan.scenario.cost.hourly_usd == pytest.approx(0.10)
    plan = load_plan(options(scenario=TINY_CPU, gpu_hour_usd=2.5))
    cost = plan.scenario.cost
    assert cost.gpu_hour_usd == 2.5 and cost.cpu_hour_usd == 0.10 and cost.hourly_usd == pytest.approx(2.5)
    assert plan.options["gpu_hour_usd"] == 2.5  # env.json records the command line
    assert plan.scenario.model_dump(mode="json")["cost"]["gpu_hour_usd"] == 2.5  # and the scenario it ran


def test_gpu_hour_usd_prices_a_scenario_without_cost():
    scenario = str(REPO / "scenarios" / "tiny-cpu-test.yaml")
    assert load_plan(options(scenario=scenario)).scenario.cost is None
    assert load_plan(options(scenario=scenario, gpu_hour_usd=4.0)).scenario.cost.hourly_usd == pytest.approx(4.0)


def test_a_negative_price_names_the_option():
    with pytest.raises(ScenarioError, match=r"--gpu-hour-usd is invalid: cost.gpu_hour_usd: Input should be greater"):
        load_plan(options(scenario=TINY_CPU, gpu_hour_usd=-1.0))

"""Options + scenario -> Plan: overrides, variants chosen, gates, and errors that name the fix."""

import pytest

from locust_llm.runtime.plan import load_plan, recordable_options
from locust_llm.scenario import ScenarioError
from tests.helpers import REPO

from .fakes import options

SCENARIO = str(REPO / "scenarios" / "tiny-cpu-test.yaml")


def test_scenario_values_unless_overridden():
    plan = load_plan(options(scenario=SCENARIO))
    assert plan.load.ladder == [1, 2] and plan.load.step_duration_s == 5 and plan.load.warmup_s == 1
    assert plan.variants == ["baseline", "spec-k4"] and plan.engine == "llamacpp" and plan.external_url is None
    plan = load_plan(options(scenario=SCENARIO, ladder="4, 1", step_duration=2.5, warmup=0, mode="open",
                             max_tokens=7, api="chat", run_id="r1"))
    assert plan.load.ladder == [4.0, 1.0] and plan.load.step_duration_s == 2.5 and plan.load.warmup_s == 0
    assert plan.load.mode == "open" and plan.load.max_tokens == 7 and plan.load.api == "chat"
    assert plan.run_id == "r1"


def test_host_means_one_external_variant():
    plan = load_plan(options(scenario=SCENARIO), host="http://127.0.0.1:8000")
    assert plan.variants == ["external"] and plan.engine == "external"
    assert plan.external_url == "http://127.0.0.1:8000"
    assert load_plan(options(scenario=SCENARIO, variant="spec-k4")).variants == ["spec-k4"]


def test_gate_options_override_the_scenario():
    plan = load_plan(options(scenario=SCENARIO, slo_ttft_p99_ms=250, slo_error_rate=0.0, max_regression_pct=3,
                             baseline_run="nightly"))
    gates = plan.gates
    assert gates.ttft_p99_ms == 250 and gates.error_rate == 0.0 and gates.max_regression_pct == 3
    assert gates.baseline_run == "nightly" and gates.tpot_p99_ms is None


@pytest.mark.parametrize("given, message", [
    ({"mode": "sideways"}, "--mode must be 'closed' or 'open'"),
    ({"ladder": "1,two"}, "--ladder must be a comma list of numbers"),
    ({"ladder": "0"}, "overrides are invalid"),
    ({"variant": "nope"}, "--variant 'nope' is not in"),
    ({"slo_error_rate": 2.0}, "gate options are invalid"),
])
def test_bad_options_name_the_fix(given, message):
    with pytest.raises(ScenarioError, match=message):
        load_plan(options(scenario=SCENARIO, **given))


def test_recorded_options_hold_no_secret():
    recorded = recordable_options(options(api_key="sk-1", auth_token="t", password="p", ladder="1"))
    assert "ladder" in recorded and not {"api_key", "auth_token", "password"} & set(recorded)

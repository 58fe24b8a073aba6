"""Options + scenario -> Plan: overrides, variants chosen, gates, and errors that name the fix."""

import os

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
    ({"ladder": "0"}, "options are invalid: load.ladder"),
    ({"ladder": "nan"}, "finite number"),
    ({"ladder": "1e12"}, "<= 100000"),
    ({"run_id": "../../x"}, "not a plain name"),
    ({"variant": "nope"}, "--variant 'nope' is not in"),
    ({"slo_error_rate": 2.0}, "gate options are invalid"),
])
def test_bad_options_name_the_fix(given, message):
    with pytest.raises(ScenarioError, match=message):
        load_plan(options(scenario=SCENARIO, **given))


def test_recorded_options_hold_no_secret():
    recorded = recordable_options(options(api_key="sk-1", auth_token="t", password="p", ladder="1"))
    assert "ladder" in recorded and not {"api_key", "auth_token", "password"} & set(recorded)


def test_host_must_be_a_url():
    with pytest.raises(ScenarioError, match="--host must be an http"):
        load_plan(options(scenario=SCENARIO), host="notaurl")


def test_a_run_directory_is_never_reused_without_overwrite(tmp_path):
    from locust_llm.runtime.plan import claim_run_dir

    plan = load_plan(options(scenario=SCENARIO, report_dir=str(tmp_path), run_id="r1"))
    claim_run_dir(plan, overwrite=False)
    (tmp_path / "r1" / "requests.parts").mkdir()
    with pytest.raises(ScenarioError, match="exists already"):
        claim_run_dir(plan, overwrite=False)
    claim_run_dir(plan, overwrite=True)
    assert list((tmp_path / "r1").iterdir()) == []
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    plan = load_plan(options(scenario=SCENARIO, report_dir=str(locked), run_id="r2"))
    if os.geteuid() != 0:  # root writes anywhere
        with pytest.raises(ScenarioError, match="cannot write"):
            claim_run_dir(plan, overwrite=False)
    bad = load_plan(options(scenario=SCENARIO, report_dir=str(tmp_path / "file.txt"), run_id="r3"))
    (tmp_path / "file.txt").write_text("not a folder")
    with pytest.raises(ScenarioError, match="cannot write"):
        claim_run_dir(bad, overwrite=False)


def test_the_web_form_runs_only_the_projects_scenarios_or_the_command_lines(tmp_path, monkeypatch):
    from locust_llm.runtime.webform import check_web_scenario

    monkeypatch.chdir(REPO)
    check_web_scenario("scenarios/tiny-cpu.yaml", "")
    check_web_scenario(str(tmp_path / "mine.yaml"), str(tmp_path / "mine.yaml"))
    for elsewhere in ("/etc/passwd", "../scenarios/tiny-cpu.yaml", str(tmp_path / "other.yaml")):
        with pytest.raises(ScenarioError, match="the web form runs"):
            check_web_scenario(elsewhere, "scenarios/tiny-cpu.yaml")

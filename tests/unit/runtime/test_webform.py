"""The web form: what it shows for a scenario (compared with the YAML file itself), and the values it refuses
with the command line's words."""

import pytest
import yaml

from locust_llm.runtime.plan import chosen_variants, load_plan
from locust_llm.runtime.webform import allowed_scenarios, check_form, form_values, options_for
from locust_llm.scenario import ScenarioError, load_scenario
from tests.helpers import REPO

from .fakes import options

TEST_SCENARIO = "scenarios/tiny-cpu-test.yaml"


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


def test_the_fields_hold_the_scenarios_values():
    raw = yaml.safe_load((REPO / TEST_SCENARIO).read_text())
    values = form_values(options(scenario=TEST_SCENARIO), None)
    fields, load = values["fields"], raw["load"]
    assert fields["ladder"] == ",".join(f"{x:g}" for x in load["ladder"])
    assert (fields["step_duration"], fields["warmup"]) == (load["step_duration_s"], load["warmup_s"])
    assert (fields["prompt_tokens"], fields["max_tokens"], fields["mode"]) == (
        load["prompt_tokens"], load["max_tokens"], load["mode"])
    assert values["variants"] == list(raw["variants"]) and values["baseline"] == "baseline"
    assert fields["variant"] == ",".join(raw["variants"])
    assert values["steps_per_variant"] == len(load["ladder"]) and values["engine"] == raw["server"]["engine"]


def test_command_line_overrides_stay_with_its_scenario_only():
    current = options(scenario=TEST_SCENARIO, ladder="3,5", step_duration=9.0)
    assert form_values(options_for(TEST_SCENARIO, current, TEST_SCENARIO), None)["fields"]["ladder"] == "3,5"
    other = "scenarios/tiny-cpu.yaml"
    shown = form_values(options_for(other, current, TEST_SCENARIO), None)["fields"]
    own = yaml.safe_load((REPO / other).read_text())["load"]
    assert shown["ladder"] == ",".join(f"{x:g}" for x in own["ladder"]) and shown["scenario"] == other
    assert shown["step_duration"] == own["step_duration_s"]
    assert allowed_scenarios(TEST_SCENARIO)[0] == TEST_SCENARIO and other in allowed_scenarios(TEST_SCENARIO)


@pytest.mark.parametrize("form, words", [
    ({"step_duration": "abc"}, "--step-duration must be a number, found 'abc'"),
    ({"repeats": "2.5"}, "--repeats must be a whole number, found '2.5'"),
    ({"ladder": "1,two"}, "--ladder must be a comma list of numbers, found '1,two'"),
    ({"variant": "baseline,nope"}, "--variant 'nope' is not in"),
    ({"scenario": "/etc/passwd"}, "the web form runs the scenario given on the command line"),
    ({"run_id": "../x"}, "is not a plain name"),
])
def test_bad_values_are_refused_with_the_command_lines_words(form, words, tmp_path):
    why = check_form(options(scenario=TEST_SCENARIO, report_dir=str(tmp_path)), form, None, TEST_SCENARIO)
    assert why is not None and words in why
    typed = {key: value for key, value in form.items() if key in ("ladder", "variant", "run_id")}
    if typed:  # the command line says the same about the same value
        with pytest.raises(ScenarioError) as raised:
            load_plan(options(scenario=TEST_SCENARIO, **typed))
        assert words in str(raised.value)


def test_a_good_form_starts_and_a_taken_run_directory_does_not(tmp_path):
    current = options(scenario=TEST_SCENARIO, report_dir=str(tmp_path))
    form = {"ladder": "1,2", "step_duration": "2.5", "variant": "baseline", "run_id": "r1", "overwrite": "false"}
    assert check_form(current, form, None, TEST_SCENARIO) is None
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "env.json").write_text("{}")
    assert "exists already" in check_form(current, form, None, TEST_SCENARIO)
    assert check_form(current, {**form, "overwrite": "true"}, None, TEST_SCENARIO) is None
    assert "--host must be an http" in check_form(current, {**form, "host": "nope"}, None, TEST_SCENARIO)


def test_variants_a_comma_list_in_the_scenarios_order_with_one_server_for_host():
    scenario = load_scenario(REPO / TEST_SCENARIO)
    assert chosen_variants(scenario, "spec-k4, baseline", external=False) == ["baseline", "spec-k4"]
    assert chosen_variants(scenario, "", external=False) == ["baseline", "spec-k4"]
    assert chosen_variants(scenario, "", external=True) == ["external"]
    with pytest.raises(ScenarioError, match="attaches to one server"):
        chosen_variants(scenario, "a,b", external=True)

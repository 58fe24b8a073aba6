"""The web form: what it shows for a scenario (compared with the YAML file itself), and the values it refuses
with the command line's words."""

from types import SimpleNamespace

import pytest
import yaml
from locust.argument_parser import LocustArgumentParser

from locust_llm.runtime import plugin
from locust_llm.runtime.plan import chosen_variants, load_plan
from locust_llm.runtime.webform import allowed_scenarios, check_form, form_values, options_for, with_baseline
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
        load["prompt_tokens"],
        load["max_tokens"],
        load["mode"],
    )
    assert values["variants"] == list(raw["variants"]) and values["baseline"] == "baseline"
    assert fields["variant"] == ",".join(raw["variants"])
    assert values["steps_per_variant"] == len(load["ladder"]) and values["engine"] == raw["server"]["engine"]
    assert "scale_out" not in raw and fields["scale_out"] == 0  # the scenario has none: off
    assert form_values(options(scenario=TEST_SCENARIO, scale_out=3), None)["fields"]["scale_out"] == 3


def test_command_line_overrides_stay_with_its_scenario_only():
    current = options(scenario=TEST_SCENARIO, ladder="3,5", step_duration=9.0)
    assert form_values(options_for(TEST_SCENARIO, current, TEST_SCENARIO), None)["fields"]["ladder"] == "3,5"
    other = "scenarios/tiny-cpu.yaml"
    shown = form_values(options_for(other, current, TEST_SCENARIO), None)["fields"]
    own = yaml.safe_load((REPO / other).read_text())["load"]
    assert shown["ladder"] == ",".join(f"{x:g}" for x in own["ladder"]) and shown["scenario"] == other
    assert shown["step_duration"] == own["step_duration_s"]
    assert allowed_scenarios(TEST_SCENARIO)[0] == TEST_SCENARIO and other in allowed_scenarios(TEST_SCENARIO)


def command_line_error(capsys, *argv: str) -> str:
    """What Locust's own parser, with the plugin's options, says about ``argv`` (it exits 2)."""
    parser = LocustArgumentParser(prog="locust")
    plugin.add_arguments(parser)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(list(argv))
    assert exited.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    "field, flag, text, words",
    [
        ("step_duration", "--step-duration", "abc", "argument --step-duration: invalid float value: 'abc'"),
        ("repeats", "--repeats", "2.5", "argument --repeats: invalid int value: '2.5'"),
        ("scale_out", "--scale-out", "two", "argument --scale-out: invalid int value: 'two'"),
    ],
)
def test_a_value_of_the_wrong_type_gets_argparses_words(field, flag, text, words, tmp_path, capsys):
    why = check_form(options(scenario=TEST_SCENARIO, report_dir=str(tmp_path)), {field: text}, None, TEST_SCENARIO)
    assert why == words
    assert f"locust: error: {words}" in command_line_error(capsys, flag, text)


@pytest.mark.parametrize(
    "form, words",
    [
        ({"ladder": "1,two"}, "--ladder must be a comma list of numbers, found '1,two'"),
        ({"variant": "baseline,nope"}, "--variant 'nope' is not in"),
        ({"scenario": "/etc/passwd"}, "the web form runs the scenario given on the command line"),
        ({"run_id": "../x"}, "is not a plain name"),
    ],
)
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


def test_the_baseline_runs_whatever_the_posted_form_says(tmp_path, monkeypatch):
    """The page ticks the baseline for good; a form posted without it (no script, or edited) gets it on the
    server, both when the form is checked and when the run starts."""

    def variant(text, host=None):
        return with_baseline(options(scenario=TEST_SCENARIO, variant=text), host)

    assert variant("spec-k4") == "baseline,spec-k4"
    assert variant("spec-k4, baseline") == "spec-k4,baseline" and variant("") == ""  # "": every variant
    assert variant("spec-k4", "http://127.0.0.1:9") == "spec-k4"  # --host: the one server named
    current = options(scenario=TEST_SCENARIO, report_dir=str(tmp_path))
    assert check_form(current, {"variant": "spec-k4", "soak": "60s"}, None, TEST_SCENARIO) == (
        "--soak holds one variant: give --variant one name, found 'baseline,spec-k4'"
    )  # what the page would run

    class Started:  # the run as start_experiment makes it, without starting servers
        def __init__(self, environment, plan, classes, clocks=None, lock=None):
            self.plan, self.run = plan, SimpleNamespace(path=tmp_path / plan.run_id)

    monkeypatch.setattr(plugin, "Experiment", Started)
    posted = options(scenario=TEST_SCENARIO, report_dir=str(tmp_path), variant="spec-k4", run_id="web", headless=False)
    environment = SimpleNamespace(parsed_options=posted, host=None, stop_timeout=0)
    assert plugin.start_experiment(environment).plan.variants == ["baseline", "spec-k4"]
    assert posted.variant == "baseline,spec-k4"  # env.json records what ran
    headless = options(scenario=TEST_SCENARIO, report_dir=str(tmp_path), variant="spec-k4", run_id="cli")
    environment = SimpleNamespace(parsed_options=headless, host=None, stop_timeout=0)
    assert plugin.start_experiment(environment).plan.variants == ["spec-k4"]  # the command line's choice stands

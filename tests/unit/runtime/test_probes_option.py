"""``--probes`` and the scenario's ``probes:`` section: the option turns the suite on, the section is validated, and a
fault the run cannot inject is said so as a run event instead of silently skipped."""

import pytest
import yaml

from locust_llm.rundir.events import FaultsNotInjected
from locust_llm.runtime import experiment as experiment_module
from locust_llm.runtime.plan import load_plan
from locust_llm.scenario import ScenarioError
from tests.helpers import REPO

from .fakes import Clock, options
from .test_experiment import run_program

SCENARIO = REPO / "scenarios" / "tiny-cpu-test.yaml"


def scenario_with(tmp_path, probes: dict) -> str:
    data = yaml.safe_load(SCENARIO.read_text())
    path = tmp_path / "probes.yaml"
    path.write_text(yaml.safe_dump({**data, "probes": probes}))
    return str(path)


def test_the_option_turns_the_suite_on_and_the_section_keeps_its_faults(tmp_path):
    assert not load_plan(options(scenario=str(SCENARIO))).scenario.probes.enabled
    path = scenario_with(tmp_path, {"faults": ["restart", "pause"], "pause_s": 2})
    probes = load_plan(options(scenario=path, probes=True)).scenario.probes
    assert probes.enabled and probes.faults == ["restart", "pause"] and probes.pause_s == 2
    assert probes.recover_s == 30 and probes.fault_level is None


@pytest.mark.parametrize(
    "section, words",
    [
        ({"faults": ["pause", "pause"]}, "each fault at most once"),
        ({"faults": ["crash"]}, "probes.faults.0"),
        ({"pause_s": 0}, "probes.pause_s"),
        ({"pauses": 5}, "did you mean 'pause_s'?"),
    ],
)
def test_a_bad_section_names_the_key(tmp_path, section, words):
    with pytest.raises(ScenarioError, match=words.replace("?", r"\?")):
        load_plan(options(scenario=scenario_with(tmp_path, section)))


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(experiment_module, "now", clock)
    return clock


def test_faults_that_cannot_be_injected_are_run_events(tmp_path, clock):
    experiment, *_ = run_program(
        tmp_path, scenario=scenario_with(tmp_path, {"faults": ["pause"]}), ladder="1,2", step_duration=2, warmup=0
    )
    events = [e for e in experiment.run.events if isinstance(e, FaultsNotInjected)]
    assert len(events) == 1 and events[0].reason == "the server was not launched by locust-llm"
    assert events[0].variant == "baseline" and not any(row.faults for row in experiment.run.steps)
    experiment, *_ = run_program(
        tmp_path / "b",
        scenario=scenario_with(tmp_path, {"faults": ["pause"], "fault_level": 3}),
        ladder="1,2",
        step_duration=2,
        warmup=0,
    )
    assert [e.reason for e in experiment.run.events if isinstance(e, FaultsNotInjected)] == [
        "fault_level is not a ladder level"
    ]

"""vLLM's spellings on the command line: ``--goodput ttft:500 tpot:50 e2el:3000``, ``--max-concurrency`` with
``--at-max-concurrency hold|drop``, ``--dataset PATH``."""

import json

import pytest

from locust_llm.runtime.goodput import goodput_slo
from locust_llm.runtime.plan import check_dataset, load_plan
from locust_llm.scenario import ScenarioError
from tests.helpers import REPO

from .fakes import options

SCENARIO = str(REPO / "scenarios" / "tiny-cpu-test.yaml")


def test_goodput_in_vllms_words_becomes_the_runs_slo_section():
    plan = load_plan(options(scenario=SCENARIO, goodput=["ttft:500", "tpot:50", "e2el:3000"]))
    slo = plan.scenario.slo
    assert (slo.ttft_ms, slo.tpot_ms, slo.e2e_ms, slo.ttfot_ms) == (500.0, 50.0, 3000.0, None)
    assert goodput_slo("ttft:250,ttfot:900").model_dump() == {
        "ttft_ms": 250.0,
        "ttfot_ms": 900.0,
        "tpot_ms": None,
        "e2e_ms": None,
    }
    assert load_plan(options(scenario=SCENARIO)).scenario.slo.ttft_ms is None  # not given: the scenario's


@pytest.mark.parametrize(
    ("words", "message"),
    [
        ("itl:20", "KEY one of ttft, tpot, e2el"),
        ("ttft=500", "KEY one of"),
        ("ttft:fast", "number of milliseconds > 0"),
        ("ttft:-1", "number of milliseconds > 0"),
        ("ttft:nan", "number of milliseconds > 0"),
        ("ttft:1 ttft:2", "names 'ttft' twice"),
    ],
)
def test_a_goodput_that_is_not_vllms_spelling_is_refused(words, message):
    with pytest.raises(ScenarioError, match=message):
        load_plan(options(scenario=SCENARIO, goodput=words))


def test_max_concurrency_and_what_an_arrival_over_it_does():
    plan = load_plan(options(scenario=SCENARIO))
    assert plan.load.at_max_inflight == "hold"  # vLLM's way is the default
    plan = load_plan(options(scenario=SCENARIO, max_concurrency=3, at_max_concurrency="drop"))
    assert (plan.load.max_inflight, plan.load.at_max_inflight) == (3, "drop")
    with pytest.raises(ScenarioError, match="--at-max-concurrency must be 'hold' or 'drop'"):
        load_plan(options(scenario=SCENARIO, at_max_concurrency="queue"))


def test_a_dataset_on_the_command_line_is_the_working_directorys_file(tmp_path, monkeypatch):
    lines = [{"prompt": "hello there", "max_tokens": 4}, {"prompt": "a second prompt", "max_tokens": 2}]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    monkeypatch.chdir(tmp_path)
    plan = load_plan(options(scenario=SCENARIO, dataset="prompts.jsonl"))
    assert plan.load.dataset == str(tmp_path / "prompts.jsonl")
    check_dataset(plan)  # read once at the start, as the run does
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(ScenarioError, match="bad.jsonl"):
        check_dataset(load_plan(options(scenario=SCENARIO, dataset="bad.jsonl")))

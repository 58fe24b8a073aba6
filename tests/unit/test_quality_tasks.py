"""The scenario's quality section and its task set: the built-in default, and every bad input named with its file,
key or line, and the fix. Also a variant's own tiny model (another seed: another model)."""

import json

import pytest

from locust_llm.scenario import ScenarioError, load_scenario
from locust_llm.scenario.quality import BUILTIN_TASKS, read_tasks
from locust_llm.servers.llamacpp import model_files
from tests.helpers import REPO

HEAD = "name: q\nserver: {engine: llamacpp, tiny_model: {preset: test}}\nvariants: {baseline: {}, spec: {}}\n"


def scenario_with(tmp_path, quality: str, tasks: list | None = None, head: str = HEAD):
    if tasks is not None:
        (tmp_path / "tasks.jsonl").write_text("\n".join(t if isinstance(t, str) else json.dumps(t) for t in tasks))
    path = tmp_path / "scenario.yaml"
    path.write_text(head + f"quality: {quality}\n")
    return path


def error_of(path) -> str:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert str(path) in str(info.value)
    return str(info.value)


def test_the_built_in_set_is_the_default_and_scores_the_tiny_models(tmp_path):
    scenario = load_scenario(scenario_with(tmp_path, "{}"))
    spec = scenario.quality
    assert spec.tasks_path(tmp_path) == BUILTIN_TASKS and spec.seeds == 3 and spec.max_drop_pct == 5.0
    items = read_tasks(BUILTIN_TASKS)
    matches = {item.match for item in items}
    assert matches == {"exact", "regex", "number", "json_keys"}
    assert sum(item.reference == "@baseline" for item in items) >= 10  # what random tiny models can be scored on
    assert len({item.id for item in items}) == len(items)
    for name in ("tiny-cpu.yaml", "tiny-cpu-quality.yaml"):
        assert load_scenario(REPO / "scenarios" / name).quality.tasks is None


def test_a_task_set_outside_the_scenario_folder_is_refused(tmp_path):
    message = error_of(scenario_with(tmp_path, "{tasks: ../elsewhere/tasks.jsonl}"))
    assert "quality.tasks" in message and "leads out of the scenario's folder" in message
    assert "give an absolute path" in message


@pytest.mark.parametrize(
    "line, says",
    [
        ('{"prompt": "p", "reference": "a", "match": "fuzzy"}', "match: Input should be 'exact', 'regex', 'number'"),
        ('{"prompt": "p", "reference": "(", "match": "regex"}', "not a valid Python regular expression"),
        ('{"prompt": "p", "reference": "@baseline", "match": "number"}', "needs match 'exact'"),
        ('{"prompt": "p", "reference": "name", "match": "json_keys"}', "a non-empty list of the keys"),
        ('{"prompt": "p", "reference": "many", "match": "number"}', "needs a number as reference"),
        ('{"prompt": "p", "reference": 4}', "needs a string reference (quote it)"),
        ('{"prompt": "", "reference": "a"}', "prompt: String should have at least 1 character"),
        ('{"prompt": "p", "reference": "a", "weight": 2}', "weight: Extra inputs are not permitted"),
        ("not json", "not JSON"),
    ],
)
def test_a_bad_task_names_its_line_and_the_problem(tmp_path, line, says):
    good = {"prompt": "2 + 2 =", "reference": 4, "match": "number"}
    message = error_of(scenario_with(tmp_path, "{tasks: tasks.jsonl}", [good, line]))
    assert "quality.tasks:" in message and f"{tmp_path / 'tasks.jsonl'} line 2:" in message and says in message


def test_missing_empty_or_duplicated_task_sets(tmp_path):
    assert "task set not found" in error_of(scenario_with(tmp_path, "{tasks: nope.jsonl}"))
    assert "no task in it" in error_of(scenario_with(tmp_path, "{tasks: tasks.jsonl}", ["", " "]))
    twice = {"id": "a", "prompt": "p", "reference": "x"}
    assert "'a' occur more than once" in error_of(scenario_with(tmp_path, "{tasks: tasks.jsonl}", [twice, twice]))
    assert "quality.seeds" in error_of(scenario_with(tmp_path, "{seeds: -1}"))
    assert "quality.max_drop_pct" in error_of(scenario_with(tmp_path, "{max_drop_pct: 150}"))


def test_a_variant_may_bring_its_own_tiny_model(tmp_path):
    head = (
        "name: q\nserver: {engine: llamacpp, tiny_model: {preset: test}}\n"
        "variants: {baseline: {}, other: {tiny_model: {preset: test, seed: 1}}}\n"
    )
    scenario = load_scenario(scenario_with(tmp_path, "{}", head=head))
    assert scenario.tiny_model_dir("other").name == "tiny-test-s1"
    assert scenario.tiny_model_dir("baseline").name == scenario.tiny_model_dir().name == "tiny-test-s0"
    vllm = "name: q\nserver: {engine: vllm, model: m}\nvariants: {baseline: {}, other: {tiny_model: {}}}\n"
    assert "variants.other.tiny_model: generated models are only for engine 'llamacpp'" in error_of(
        scenario_with(tmp_path, "{}", head=vllm)
    )


def test_the_launcher_serves_the_variants_own_pair(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCUST_LLM_CACHE", str(tmp_path / "cache"))
    head = (
        "name: q\nserver: {engine: llamacpp, tiny_model: {preset: test}}\n"
        "variants: {baseline: {}, other: {tiny_model: {preset: test, seed: 1}}}\n"
    )
    scenario = load_scenario(scenario_with(tmp_path, "{}", head=head))
    (own_target, own_draft), (target, _) = model_files(scenario, "other"), model_files(scenario, "baseline")
    assert "tiny-test-s1" in own_target and "tiny-test-s1" in own_draft and "tiny-test-s0" in target
    with open(own_target, "rb") as a, open(target, "rb") as b:
        assert a.read() != b.read()  # another seed: other weights

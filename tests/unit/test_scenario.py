"""Scenario validation: every bad input gets its own error naming the file, the key and the fix."""

from pathlib import Path

import pytest

from locust_llm.scenario import ScenarioError, load_scenario
from tests.helpers import REPO

GOOD = """
name: t
server:
  engine: llamacpp
  tiny_model: {preset: test}
variants:
  baseline: {}
  spec: {speculative: {n_max: 4}}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    return path


def error_of(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert str(path) in message
    return message


@pytest.mark.parametrize("path", sorted((REPO / "scenarios").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_scenarios_are_valid(path):
    scenario = load_scenario(path)
    for variant in scenario.variants:
        scenario.speculative(variant)


def test_good_scenario_defaults(tmp_path):
    scenario = load_scenario(write(tmp_path, GOOD))
    assert scenario.baseline_variant == "baseline"
    assert scenario.speculative("baseline") is None
    assert scenario.speculative("spec").n_max == 4
    assert scenario.speculative("spec").p_min is None  # the server default applies


def test_unknown_key_is_named_with_suggestion(tmp_path):
    message = error_of(tmp_path, GOOD.replace("engine: llamacpp", "engin: llamacpp"))
    assert "server.engin: unknown key 'engin'" in message
    assert "did you mean 'engine'" in message
    assert "server.engine: required key is missing" in message


def test_unknown_key_inside_a_variant(tmp_path):
    message = error_of(tmp_path, GOOD.replace("spec: {speculative", "spec: {argz: [], speculative"))
    assert "variants.spec.argz: unknown key 'argz'" in message
    assert "did you mean 'args'" in message


def test_wrong_type_says_expected_and_found(tmp_path):
    message = error_of(tmp_path, GOOD.replace("n_max: 4", "n_max: four"))
    assert "variants.spec.speculative.n_max" in message
    assert "integer" in message and "'four'" in message


def test_bad_enum_value(tmp_path):
    message = error_of(tmp_path, GOOD.replace("engine: llamacpp", "engine: tgi"))
    assert "server.engine" in message and "'tgi'" in message and "'llamacpp'" in message


def test_unknown_speculative_key_for_engine(tmp_path):
    text = """
name: t
server: {engine: vllm, model: m}
variants:
  spec: {speculative: {method: eagle3, model: h, num_speculative_tokens: 3, tensor_parallel_size: 2}}
"""
    message = error_of(tmp_path, text)
    assert "variants.spec.speculative.tensor_parallel_size: unknown key" in message
    assert "did you mean 'draft_tensor_parallel_size'" in message


def test_vllm_method_needing_a_model(tmp_path):
    text = """
name: t
server: {engine: vllm, model: m}
variants:
  spec: {speculative: {method: draft_model, num_speculative_tokens: 3}}
"""
    assert "needs 'model'" in error_of(tmp_path, text)


def test_sglang_all_or_none_rule(tmp_path):
    text = """
name: t
server: {engine: sglang, model: m}
variants:
  spec: {speculative: {algorithm: EAGLE, draft_model_path: d, num_steps: 3}}
"""
    assert "num_steps, eagle_topk and num_draft_tokens" in error_of(tmp_path, text)


def test_external_needs_url_and_takes_no_speculation(tmp_path):
    assert "needs 'url'" in error_of(tmp_path, "name: t\nserver: {engine: external}\nvariants: {a: {}}\n")
    text = "name: t\nserver: {engine: external, url: 'http://127.0.0.1:1'}\nvariants: {a: {speculative: {x: 1}}}\n"
    assert "takes no speculative settings" in error_of(tmp_path, text)


def test_baseline_must_be_a_variant(tmp_path):
    assert "baseline 'nope' is not one of the variants" in error_of(tmp_path, GOOD + "baseline: nope\n")


def test_bad_ladder(tmp_path):
    message = error_of(tmp_path, GOOD + "load: {ladder: [1, -2]}\n")
    assert "load.ladder" in message and "> 0" in message


def test_not_yaml_and_not_a_mapping(tmp_path):
    assert "not valid YAML" in error_of(tmp_path, "name: [unclosed\n")
    assert "expected a mapping" in error_of(tmp_path, "- just\n- a list\n")


def test_missing_file(tmp_path):
    with pytest.raises(ScenarioError, match="not found"):
        load_scenario(tmp_path / "nope.yaml")


def test_llamacpp_ngram_type_rejects_draft_flags(tmp_path):
    message = error_of(tmp_path, GOOD.replace("{n_max: 4}", "{type: ngram-simple, n_max: 4}"))
    assert "variants.spec.speculative" in message and "--spec-ngram-*" in message


def test_unreadable_paths_are_one_line_errors(tmp_path):
    binary = tmp_path / "latin1.yaml"
    binary.write_bytes(b"name: caf\xe9\n")
    for path, message in ((tmp_path, "not a file"), (binary, "not UTF-8")):
        with pytest.raises(ScenarioError, match=message) as caught:
            load_scenario(path)
        assert "\n" not in str(caught.value)


def test_an_alias_bomb_is_refused_at_once(tmp_path):
    lines = ['a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 9):
        lines.append(f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 10) + "]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    assert len(bomb.read_bytes()) < 1000
    with pytest.raises(ScenarioError, match="expands to more than"):
        load_scenario(bomb)


@pytest.mark.parametrize(
    "load, message",
    [
        ("ladder: [.nan]", "finite number"),
        ("ladder: [1.0e+400]", "finite number"),
        ("step_duration_s: .inf", "finite number"),
        ("ladder: [1000000000000]", "<= 100000"),
        ("max_tokens: 3000000000", "less than or equal to 10000000"),
    ],
)
def test_numbers_are_finite_and_bounded(tmp_path, load, message):
    path = tmp_path / "s.yaml"
    path.write_text(
        f"name: x\nserver: {{engine: external, url: 'http://127.0.0.1:9'}}\nvariants: {{a: {{}}}}\nload: {{{load}}}\n"
    )
    with pytest.raises(ScenarioError, match=message):
        load_scenario(path)


def test_variant_names_are_plain_names(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: x\nserver: {engine: external, url: 'http://127.0.0.1:9'}\nvariants: {'../evil': {}, 'a\"b': {}}\n"
    )
    with pytest.raises(ScenarioError, match="plain names"):
        load_scenario(path)


def test_cost_section(tmp_path):
    scenario = load_scenario(write(tmp_path, GOOD + "cost: {gpu_hour_usd: 3.6, gpus: 2, other_hour_usd: 0.4}\n"))
    assert scenario.cost.hourly_usd == pytest.approx(7.6)  # 3.6 x 2 + 0.4
    assert load_scenario(write(tmp_path, GOOD)).cost is None  # no section: nothing is priced


@pytest.mark.parametrize(
    "cost, message",
    [
        (
            "{gpu_hour: 3.6}",
            "cost.gpu_hour: unknown key 'gpu_hour'; allowed keys here: gpu_hour_usd, gpus, "
            "other_hour_usd, cpu_hour_usd, target_rps; did you mean 'gpu_hour_usd'?",
        ),
        ("{gpu_hour_usd: -1}", "cost.gpu_hour_usd: Input should be greater than 0; found -1"),
        (
            "{cpu_hour_usd: 0.1, other_hour_usd: -0.5}",
            "cost.other_hour_usd: Input should be greater than or equal to 0",
        ),
        ("{gpu_hour_usd: 2, gpus: 0}", "cost.gpus: Input should be greater than or equal to 1; found 0"),
        ("{gpu_hour_usd: .inf}", "cost.gpu_hour_usd: Input should be a finite number"),
        (
            "{other_hour_usd: 1}",
            "cost: set gpu_hour_usd (per GPU) or, on a CPU host, cpu_hour_usd (the whole host): "
            "there is no built-in price list",
        ),
    ],
)
def test_bad_cost_names_the_key(tmp_path, cost, message):
    assert message in error_of(tmp_path, GOOD + f"cost: {cost}\n")

"""Every ``--speculative-config`` key and method of vLLM is accepted by the scenario's vLLM section: read from vLLM's
own config class where vLLM is installed, else from the list recorded from its source (tests/fixtures/vllm/)."""

import dataclasses
import json
import typing

import pytest

from locust_llm.scenario.speculative import VLLM_METHODS, VllmSpeculative
from tests.helpers import REPO

RECORDED = json.loads((REPO / "tests" / "fixtures" / "vllm" / "speculative-config.json").read_text())


def _literal_values(annotation) -> set[str]:
    if typing.get_origin(annotation) is typing.Literal:
        return {
            a
            for arg in typing.get_args(annotation)
            for a in (_literal_values(arg) if not isinstance(arg, str) else {arg})
        }
    return {v for arg in typing.get_args(annotation) for v in _literal_values(arg)}


def vllm_keys_and_methods() -> tuple[set[str], set[str], str]:
    """vLLM's keys and methods: from the installed class, else the recorded list."""
    try:
        from vllm.config import speculative  # type: ignore[import-not-found]
    except ImportError:
        return set(RECORDED["keys"]), set(RECORDED["methods"]), RECORDED["source"]
    keys = {f.name for f in dataclasses.fields(speculative.SpeculativeConfig)}
    return keys, _literal_values(speculative.SpeculativeMethod), "the installed vLLM"


def test_every_vllm_key_a_user_may_set_is_accepted():
    keys, _, source = vllm_keys_and_methods()
    ours = set(VllmSpeculative.model_fields)
    user_keys = keys - set(RECORDED["not_for_users"])
    assert user_keys <= ours, f"missing from VllmSpeculative ({source}): {sorted(user_keys - ours)}"
    assert ours <= keys, f"not a key of vLLM ({source}): {sorted(ours - keys)}"


def test_every_vllm_method_is_accepted():
    _, methods, source = vllm_keys_and_methods()
    assert methods == set(VLLM_METHODS), (source, methods ^ set(VLLM_METHODS))


@pytest.mark.parametrize(
    "config",
    [
        {"method": "dspark", "model": "org/dspark-head", "num_speculative_tokens": 8, "dspark_draft_topk": 4},
        # The form the k-sweep's schedule recommends (analysis.schedule): a draft length per batch-size range.
        {
            "method": "eagle3",
            "model": "org/eagle3",
            "num_speculative_tokens": 4,
            "num_speculative_tokens_per_batch_size": [[1, 2, 4], [3, 4, 2], [5, 8, 0]],
        },
        {"model": "org/draft"},  # vLLM detects the method from the model
    ],
)
def test_configs_vllm_takes_are_taken(config):
    assert VllmSpeculative.model_validate(config).model_dump(exclude_none=True) == {
        k: [tuple(row) for row in v] if k == "num_speculative_tokens_per_batch_size" else v for k, v in config.items()
    }


def test_neither_method_nor_model_is_refused():
    with pytest.raises(ValueError, match="set 'method'"):
        VllmSpeculative.model_validate({"num_speculative_tokens": 3})

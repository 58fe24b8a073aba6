"""The user side of conversations: which message each turn sends (a dataset's human turns, never its recorded
answers; or generated messages of exact length), the same in every build, and how many turns fit the server's
context. Token counts are whitespace words (the reference server's tokenizer), an independent truth."""

import json

import pytest

from locust_llm.scenario import LoadSpec
from locust_llm.workload import Workload, WorkloadError
from tests.unit.workload.test_traces import Words

SHAREGPT = [
    {
        "conversations": [
            {"from": "human", "value": "first question about boats"},
            {"from": "gpt", "value": "an answer of six words here"},
            {"from": "human", "value": "second question"},
            {"from": "gpt", "value": "short answer"},
            {"from": "human", "value": "third question is the last one"},
        ]
    },
    {"conversations": [{"from": "human", "value": "only one turn here"}, {"from": "gpt", "value": "ok"}]},
]


def build(tmp_path, conversation: dict, context: int | None = None, **load) -> Workload:
    spec = LoadSpec.model_validate({"api": "chat", "conversation": conversation, **load})
    return Workload.from_spec(spec, Words(), tmp_path, context=context)


def dataset_workload(tmp_path, turns: int, context: int | None = None) -> Workload:
    (tmp_path / "chats.json").write_text(json.dumps(SHAREGPT))
    # Replayed prompts: the texts and counts below are the dataset's own (a cold run puts a marker before each).
    return build(tmp_path, {"turns": turns}, context, dataset="chats.json", max_tokens=7, unique_prefix=False)


def messages_of(workload: Workload, worker: int, k: int) -> list:
    conversations = workload.conversations
    return [conversations.message(worker, 0, k, t) for t in range(1, conversations.turns(worker, k) + 1)]


def test_dataset_conversations_send_their_human_turns_never_the_recorded_answers(tmp_path):
    workload = dataset_workload(tmp_path, turns=3)
    seen = {}
    for k in range(40):
        texts = tuple(m.prompt for m in messages_of(workload, 0, k))
        seen[texts] = messages_of(workload, 0, k)
    humans = [[t["value"] for t in c["conversations"] if t["from"] == "human"] for c in SHAREGPT]
    assert set(seen) == {tuple(h) for h in humans}  # both conversations drawn, each whole and in order
    long = seen[tuple(humans[0])]
    # Each turn's output length is its recorded answer's (words), the last turn's the scenario's max_tokens.
    assert [m.max_tokens for m in long] == [6, 2, 7]
    assert [m.prompt_tokens for m in long] == [4, 2, 6]
    assert workload.describe()["conversation"]["turns_per_dialogue"] == {"min": 1, "max": 3, "mean": 2.0}


def test_a_conversation_longer_than_turns_is_cut_to_turns(tmp_path):
    workload = dataset_workload(tmp_path, turns=2)
    assert max(workload.conversations.turns(0, k) for k in range(40)) == 2


def test_turns_that_would_not_fit_the_context_are_never_sent_and_counted(tmp_path):
    # Conversation 1: 4+6, then 2+2 (20 with the history), then 6+7 (33): a 25-token context holds two turns.
    workload = dataset_workload(tmp_path, turns=3, context=25)
    assert max(workload.conversations.turns(0, k) for k in range(40)) == 2
    assert workload.describe()["conversation"]["turns_over_context"] == 1
    with pytest.raises(WorkloadError, match="no conversation of the dataset fits the server's 4-token context"):
        dataset_workload(tmp_path, turns=3, context=4)


def test_generated_messages_have_exact_lengths_and_are_the_same_in_every_build(tmp_path):
    first = build(tmp_path, {"turns": 4}, prompt_tokens=12, max_tokens=5)
    again = build(tmp_path, {"turns": 4}, prompt_tokens=12, max_tokens=5)
    for worker in (0, 1):
        for k in range(5):
            mine = [m.prompt for m in messages_of(first, worker, k)]
            assert mine == [m.prompt for m in messages_of(again, worker, k)]
            assert [Words().count(text) for text in mine] == [12] * 4
    texts = {m.prompt for k in range(5) for m in messages_of(first, 0, k)}
    assert len(texts) > 10  # turns and conversations draw their own messages from the pool


def test_generated_conversations_end_before_the_turn_that_does_not_fit(tmp_path):
    # 12 + 5 tokens a turn: a 40-token context holds the first two turns with their history.
    workload = build(tmp_path, {"turns": 4}, context=40, prompt_tokens=12, max_tokens=5)
    assert workload.conversations.turns(0, 0) == 2
    described = workload.describe()["conversation"]
    assert (described["turns_that_fit"], described["turns_over_context"]) == (2, 2)
    with pytest.raises(WorkloadError, match="does not fit the server's 10-token context"):
        build(tmp_path, {"turns": 4}, context=10, prompt_tokens=12, max_tokens=5)

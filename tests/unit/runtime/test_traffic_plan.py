"""Conversations and trace replay in the scenario and the plan: what combines with what, the ladder as speeds,
each trace step's length, and a malformed trace stopping the run before anything starts (exit 2 in a run)."""

import json

import pytest

from locust_llm.runtime.arrivals import TraceClock
from locust_llm.runtime.conversations import Dialogue
from locust_llm.runtime.plan import TRACE_TAIL_S, check_dataset, load_plan
from locust_llm.scenario import ScenarioError, load_scenario
from tests.unit.workload.test_traces import SHARED, replay

from .fakes import options

HEAD = """
name: t
server: {engine: external, url: "http://127.0.0.1:9"}
variants: {ref: {}}
load:
"""


def scenario_file(tmp_path, load: str, trace: list | None = None):
    if trace is not None:
        (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in trace))
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + "".join(f"  {line}\n" for line in load.strip().splitlines()))
    return path


def error_of(tmp_path, load: str) -> str:
    with pytest.raises(ScenarioError) as info:
        load_scenario(scenario_file(tmp_path, load))
    return str(info.value)


@pytest.mark.parametrize(
    ("load", "words"),
    [
        ("conversation: {turns: 3}", "load: conversation: a conversation sends chat messages; set 'api: chat'"),
        ("api: chat\nconversation: {turns: 3}\ncontext_tokens: [256]", "remove 'context_tokens' and 'images'"),
        ("api: chat\nconversation: {session_header: 'X Session'}", "must be an HTTP header name"),
        ("api: chat\nconversation: {turns: 0}", "load.conversation.turns"),
        ("trace: {path: t.jsonl, format: mooncake}\ndataset: d.jsonl", "a trace gives every request's prompt and"),
        ("trace: {path: t.jsonl, format: mooncake}\nmode: closed", "in the open loop; set 'mode: open'"),
        ("trace: {path: t.jsonl, format: sharegpt}", "'mooncake', 'azure' or 'burstgpt'"),
    ],
)
def test_what_conversations_and_traces_refuse(tmp_path, load, words):
    message = error_of(tmp_path, load)
    assert words in message, message


def test_a_trace_replays_in_the_open_loop_at_its_speed_unless_a_ladder_of_speeds_is_given(tmp_path):
    scenario = load_scenario(scenario_file(tmp_path, "trace: {path: t.jsonl, format: mooncake, speed: 3}"))
    assert scenario.load.mode == "open" and scenario.load.ladder == [3.0]
    scenario = load_scenario(scenario_file(tmp_path, "ladder: [0.5, 2]\ntrace: {path: t.jsonl, format: mooncake}"))
    assert scenario.load.ladder == [0.5, 2.0]
    header = load_scenario(scenario_file(tmp_path, "api: chat\nconversation: {session_header: null}"))
    assert header.load.conversation.session_header is None


def test_the_ladders_speeds_become_the_traces_rate_and_each_step_lasts_its_replay(tmp_path):
    path = scenario_file(tmp_path, "warmup_s: 0.5\ntrace: {path: t.jsonl, format: mooncake, block_tokens: 16}", SHARED)
    plan = load_plan(options(scenario=str(path), ladder="0.5,2"))
    rate = len(SHARED) / 0.5  # six records over 0.5 s
    assert plan.trace.rate == rate and plan.load.ladder == [0.5 * rate, 2 * rate]
    assert plan.load.max_extend_s == 0  # a replay has nothing more to send
    # At 0.5x the 0.5 s trace takes 1 s: the steady window is what is left after the warm-up, plus the tail.
    assert plan.steady_s(0.5 * rate) == pytest.approx(1.0 + TRACE_TAIL_S - 0.5)
    assert plan.steady_s(2 * rate) == pytest.approx(0.25 + TRACE_TAIL_S - 0.5)
    with pytest.raises(ScenarioError, match=r"longer than the trace's replay at speed 4 \(0.62 s\)"):
        load_plan(options(scenario=str(path), ladder="4", warmup=1.0))
    with pytest.raises(ScenarioError, match="--soak and --scale-out hold levels of their own"):
        load_plan(options(scenario=str(path), soak="60s"))


def test_a_malformed_trace_stops_the_plan_with_its_file_line_and_field(tmp_path):
    broken = [*SHARED[:3], {"timestamp": 900, "input_length": 5}]
    path = scenario_file(tmp_path, "trace: {path: t.jsonl, format: mooncake, block_tokens: 16}", broken)
    with pytest.raises(ScenarioError) as info:
        load_plan(options(scenario=str(path)))
    assert f"{tmp_path / 't.jsonl'}:4: missing field 'output_length'" in str(info.value)
    assert "\n" not in str(info.value)


def test_a_malformed_conversation_dataset_stops_the_plan(tmp_path):
    (tmp_path / "chats.jsonl").write_text(
        '{"conversations": [{"from": "human", "value": "hi"}]}\n{"conversations": 5}\n'
    )
    path = scenario_file(tmp_path, "api: chat\ndataset: chats.jsonl\nconversation: {turns: 2}")
    plan = load_plan(options(scenario=str(path)))
    with pytest.raises(ScenarioError, match=r"chats.jsonl:2: 'conversations' must be a list"):
        check_dataset(plan)  # read before the first request, as every dataset is


def test_every_process_replays_its_own_share_of_the_records_that_fit(tmp_path):
    prompts = replay(tmp_path, SHARED, context=45).trace
    times = [r["timestamp"] / 1000 for r in SHARED]
    shares = []
    for process in range(2):
        clock = TraceClock(prompts, t0=100.0, speed=2.0, process=process, processes=2)
        shares.append(list(iter(clock.arrival, None)))
    fitting = [i for i in range(len(SHARED)) if prompts.fits(i)]
    assert sorted(i for share in shares for i, _ in share) == fitting == [0, 2, 4]
    assert all(i % 2 == process for process, share in enumerate(shares) for i, _ in share)
    assert all(t == pytest.approx(100.0 + times[i] / 2.0) for share in shares for i, t in share)


def test_a_dialogue_carries_the_history_it_was_given_and_hashes_the_answers():
    dialogue = Dialogue(number=4, turns=3, headers=(("X-Session-ID", "s"),))
    assert dialogue.request("hello") == ({"role": "user", "content": "hello"},)
    assert dialogue.history() is None
    dialogue.add("hello", 1, " w0 w1", 2)
    assert dialogue.request("again") == (
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": " w0 w1"},
        {"role": "user", "content": "again"},
    )
    assert dialogue.tokens == 3
    other = Dialogue(number=4, turns=3)
    other.add("hello", 1, " w0 w2", 2)
    assert dialogue.history() != other.history()
    same = Dialogue(number=9, turns=3)
    same.add("different question", 2, " w0 w1", 2)
    assert dialogue.history() == same.history()  # the answers, not the questions (those are paired by design)

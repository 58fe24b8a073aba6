"""Token accounting on hand-built event lists whose answers are known: never a negative count, the server's total
kept when it is below its number of events, and a tokenizer's total taken on the whole text."""

import pytest

from locust_llm.client.accounting import Event, account, count_tokens
from locust_llm.records import RequestRecord


def text(t: float, chunk: str, finish: str | None = None, usage: int | None = None, **extra) -> Event:
    data = {"choices": [{"text": chunk, "finish_reason": finish}], **extra}
    if usage is not None:
        data["usage"] = {"completion_tokens": usage}
    return Event(t, data)


def usage_only(t: float, total: int, **extra) -> Event:
    return Event(t, {"choices": [], "usage": {"completion_tokens": total}, **extra})


def test_a_final_total_below_the_text_events_never_gives_a_negative_count():
    events = [text(0.1 * i, f" w{i}") for i in range(5)] + [usage_only(0.6, 3)]
    counts, source, total = count_tokens(events)
    assert min(counts) >= 0 and sum(counts) == 3 and total == 3
    assert source == "usage+text_share"


def test_rule_cumulative_usage_that_goes_down_is_a_malformed_event_quoting_both_counts():
    """1..10, then 3..12 (the issue's server): a running count cannot fall, so no count of it is trusted."""
    counts = list(range(1, 11)) + list(range(3, 13))
    events = [text(0.01 * i, f" w{i}", usage=u) for i, u in enumerate(counts)] + [usage_only(0.3, 12)]
    record = RequestRecord(t_send=0.0, max_tokens=20)
    assert account(record, events, done=True) is None
    assert record.error_class == "malformed_event"
    assert "went down from 10 to 3 at event 11 of 21" in record.error_message


def test_rule_a_count_above_max_tokens_is_suspect_usage_with_the_raw_values():
    """20 chunks of text, max_tokens 20, and a final usage of 5000: the issue's 29,582 tok/s server."""
    events = [text(0.01 * i, f" w{i}") for i in range(20)] + [usage_only(0.25, 5000)]
    record = RequestRecord(t_send=0.0, max_tokens=20)
    account(record, events, done=True)
    assert record.error_class == "suspect_usage"
    assert "usage.completion_tokens 5000 (usage+text_share) is above max_tokens 20" in record.error_message
    honest = RequestRecord(t_send=0.0, max_tokens=20)
    account(honest, events[:-1] + [usage_only(0.25, 20)], done=True)
    assert honest.ok, honest.error_message


def test_rule_llamacpp_events_above_max_tokens_are_suspect_too():
    """No usage at all from a llama.cpp-shaped server that sends 30 one-token events for max_tokens 8."""
    events = [text(0.01 * i, f" w{i}", timings={"predicted_n": 1}) for i in range(30)]
    events[-1].data["choices"][0]["finish_reason"] = "length"
    record = RequestRecord(t_send=0.0, max_tokens=8)
    account(record, events, done=True, llamacpp=True)
    assert record.error_class == "suspect_usage" and "30 tokens (server_events) is above max_tokens 8" in (
        record.error_message
    )


@pytest.mark.parametrize(
    "server_total, suspect",
    [
        (40, False),  # within x2 + 16 of the 20 words streamed
        (56, False),  # the edge: 2 x 20 + 16
        (57, True),  # past it: more tokens than the text can hold
        (2, False),  # 20 <= 2 x 2 + 16
        (1, True),  # 20 > 2 x 1 + 16: fewer tokens than the text holds
    ],
)
def test_rule_a_total_far_from_the_tokenizers_count_of_the_text_is_suspect_usage(server_total, suspect):
    """The server's final total against a tokenizer's count of the text it streamed (one token per word here)."""
    events = [text(0.01 * i, f" w{i}") for i in range(20)] + [usage_only(0.25, server_total)]
    record = RequestRecord(t_send=0.0, max_tokens=64)
    split = account(record, events, done=True)
    assert record.ok and split is not None
    split.apply(lambda chunk: len(chunk.split()))
    assert (record.error_class == "suspect_usage") == suspect
    if suspect:
        assert f"the server counts {server_total} output tokens" in record.error_message
        assert "the tokenizer counts 20 in the" in record.error_message and "x2 + 16" in record.error_message


def test_exact_per_chunk_usage_is_checked_against_the_text_without_changing_its_split():
    """vLLM's continuous usage: its per-chunk counts stand; the tokenizer only checks the total."""
    events = [text(0.01 * i, f" w{2 * i} w{2 * i + 1}", usage=2 * i + 2) for i in range(10)] + [usage_only(0.2, 20)]
    record = RequestRecord(t_send=0.0, max_tokens=20)
    split = account(record, events, done=True)
    assert record.token_source == "usage_deltas" and record.chunk_tokens == [2] * 10
    assert split is not None and not split.refine
    split.apply(lambda chunk: len(chunk.split()))
    assert record.ok and record.chunk_tokens == [2] * 10 and record.token_source == "usage_deltas"


def test_llamacpp_usage_below_its_events_keeps_the_servers_total_and_says_so():
    """Four one-token events, but the server's final usage says 2: its total is recorded, marked as such."""
    timings = {"timings": {"predicted_n": 2, "predicted_ms": 20.0, "prompt_ms": 5.0}}
    events = [text(0.1 * (i + 1), f" w{i}") for i in range(4)] + [text(0.5, "", "stop", usage=2, **timings)]
    record = RequestRecord(t_send=0.0)
    account(record, events, done=True, llamacpp=True)
    assert record.ok
    assert record.output_tokens == 2 and sum(record.chunk_tokens) == 2 and min(record.chunk_tokens) >= 0
    assert record.token_source == "usage_below_events"
    assert len(record.chunk_offsets) == 4  # every event that carried text keeps its time


def test_no_usage_takes_the_total_from_the_whole_text_with_a_tokenizer_that_is_not_additive():
    """A word cut between chunks counts twice when each chunk is counted on its own: the whole text is 3 words."""

    def words(chunk: str) -> int:
        return len(chunk.split())

    events = [text(0.1, " hel"), text(0.2, "lo wor"), text(0.3, "ld !", "stop")]
    record = RequestRecord(t_send=0.0)
    split = account(record, events, done=True)
    assert record.ok and record.token_source == "unknown"
    assert sum(words(e.data["choices"][0]["text"]) for e in events) == 5  # the per-chunk sum over-counts
    split.apply(words)
    assert record.token_source == "tokenizer"
    assert record.output_tokens == sum(record.chunk_tokens) == words(" hello world !") == 3
    assert min(record.chunk_tokens) >= 0 and len(record.chunk_tokens) == 3

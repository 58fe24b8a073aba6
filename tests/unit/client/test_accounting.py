"""Token accounting on hand-built event lists whose answers are known: never a negative count, the server's total
kept when it is below its number of events, and a tokenizer's total taken on the whole text."""

import pytest

from locust_llm.client.accounting import Event, account, count_tokens, text_disagrees
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
        (6, False),  # the edge: 20 = 2 x 6 + min(16, 2 + 6)
        (5, True),  # 20 > 2 x 5 + (2 + 5): fewer tokens than the text holds
        (2, True),  # 20 > 2 x 2 + (2 + 2): a short total is held to a short slack
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
        slack = min(16, 2 + min(server_total, 20))
        assert "the tokenizer counts 20 in the" in record.error_message
        assert f"x2 + {slack} either way" in record.error_message


def test_rule_the_tolerance_catches_ten_against_none_and_none_against_ten():
    """Short answers: the slack shrinks with the smaller count, so neither side can be zero against ten."""
    assert text_disagrees(10, 0, 40) is not None and text_disagrees(0, 10, 40) is not None
    assert text_disagrees(10, 10, 40) is None and text_disagrees(1, 3, 12) is None


@pytest.mark.parametrize("shape", [{"delta": None}, {"delta": {}}, {"text": None}, {"delta": {"content": ""}}])
def test_rule_a_stream_without_text_is_an_empty_completion_whatever_its_usage_says(shape):
    """Ten chunks that carry no text and a final usage of 10: no token, no TTFT, ``empty_completion``."""
    events = [Event(0.01 * (i + 1), {"choices": [{"index": 0, **shape}]}) for i in range(10)]
    last = {"choices": [{"text": "", "finish_reason": "length"}], "usage": {"completion_tokens": 10}}
    events.append(Event(0.2, last))
    record = RequestRecord(t_send=0.0, max_tokens=64)
    account(record, events, done=True)
    assert record.error_class == "empty_completion" and record.output_tokens == 0
    assert record.chunk_offsets == [] and record.t_first != record.t_first  # NaN: no first token
    assert "no text in 11 events; its usage.completion_tokens says 10" in record.error_message


def test_rule_tokens_counted_on_an_event_without_text_join_a_chunk_with_text():
    """Continuous usage where the role chunk already counts one token and the last (empty) event one more: the times
    are the text chunks', the total stays the server's."""
    events = [Event(0.01, {"choices": [{"delta": {"role": "assistant"}}], "usage": {"completion_tokens": 1}})]
    events += [text(0.02 * (i + 1), f" w{i}", usage=2 + i) for i in range(3)]
    events.append(Event(0.1, {"choices": [{"text": "", "finish_reason": "stop"}], "usage": {"completion_tokens": 5}}))
    record = RequestRecord(t_send=0.0, max_tokens=64)
    account(record, events, done=True)
    assert record.ok and record.chunk_offsets == [0.02, 0.04, 0.06] and record.t_first == 0.02
    assert record.chunk_tokens == [2, 1, 2] and record.output_tokens == 5


@pytest.mark.parametrize("usage, error_class, words", [
    (0, "suspect_usage", "usage.completion_tokens 0 for a stream that delivered 30 characters in 10 chunks"),
    (-0.0, "malformed_event", "usage.completion_tokens must be a non-negative integer up to 1099511627776, "
     "found '-0.0'"),
    (10.0, "malformed_event", "found '10.0'"),
])  # fmt: skip
def test_rule_a_zero_or_non_integer_usage_against_streamed_text_is_named(usage, error_class, words):
    events = [text(0.01 * i, f" w{i}") for i in range(10)] + [usage_only(0.2, usage)]
    record = RequestRecord(t_send=0.0, max_tokens=64)
    account(record, events, done=True)
    assert record.error_class == error_class and words in record.error_message, record.error_message


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


def usage_with(t: float, total: int, prompt: int, details=None) -> Event:
    usage = {"completion_tokens": total, "prompt_tokens": prompt}
    if details is not None:
        usage["prompt_tokens_details"] = details
    return Event(t, {"choices": [], "usage": usage})


def test_cached_prompt_tokens_are_what_the_server_says_and_null_when_it_says_nothing():
    # OpenAI shape (vLLM, SGLang, llama.cpp's final usage): the last usage's prompt_tokens_details.
    record = RequestRecord(t_send=0.0)
    account(record, [text(0.1, " a"), text(0.2, " b", "length"), usage_with(0.3, 2, 40, {"cached_tokens": 32})], True)
    assert record.ok and record.cached_tokens == 32 and record.prompt_tokens == 40
    # llama.cpp's timings alone.
    timings = {"timings": {"predicted_n": 1, "predicted_ms": 5.0, "prompt_ms": 1.0, "cache_n": 17, "prompt_n": 3}}
    record = RequestRecord(t_send=0.0)
    account(record, [text(0.1, " a"), text(0.2, "", "stop", usage=1, **timings)], True, llamacpp=True)
    assert record.ok and record.cached_tokens == 17
    # A server that does not say: null, not zero.
    record = RequestRecord(t_send=0.0)
    account(record, [text(0.1, " a"), text(0.2, " b", "length"), usage_only(0.3, 2)], True)
    assert record.ok and record.cached_tokens is None


def test_a_server_that_omits_a_zero_cached_count_counts_zero_only_for_a_finished_stream():
    """vLLM (and older SGLang) leave prompt_tokens_details out when nothing was cached."""
    events = [text(0.1, " a", usage=1), text(0.2, " b", "length", usage=2), usage_with(0.3, 2, 40)]
    record = RequestRecord(t_send=0.0)
    account(record, events, True, cache_zero=True)
    assert record.ok and record.cached_tokens == 0
    record = RequestRecord(t_send=0.0)
    account(record, events[:1], False, cache_zero=True)  # cut short: the final usage never came
    assert record.error_class == "truncated_stream" and record.cached_tokens is None


def test_an_impossible_cached_count_is_a_malformed_answer():
    record = RequestRecord(t_send=0.0)
    account(record, [text(0.1, " a", "length"), usage_with(0.2, 1, 40, {"cached_tokens": -3})], True)
    assert record.error_class == "malformed_event" and "cached_tokens" in record.error_message

"""Reasoning streams: the client's time to first output token and reasoning token count against the reference
server, which streams its reasoning before the answer and stamps the chunk that carries the first answer token
(``t_first_answer`` in its log) on the machine's shared monotonic clock."""

from __future__ import annotations

import math
import statistics
import uuid

import pytest
import requests

from locust_llm import records as run_clock
from locust_llm.client.accounting import Event, event_text
from locust_llm.client.reasoning import Parts, event_pieces, split_tags, split_tokens
from locust_llm.client.stream import RequestSpec, StreamingClient
from locust_llm.records import RequestRecord


def stream(url: str, max_tokens: int, api: str = "chat", think_tags: bool = False, **ref) -> RequestRecord:
    ref.setdefault("id", uuid.uuid4().hex)
    client = StreamingClient(url, think_tags=think_tags)
    record = RequestRecord(request_id=ref["id"])
    try:
        client.stream(RequestSpec(prompt="one two three", max_tokens=max_tokens, api=api, extra={"ref": ref}), record)
    finally:
        client.close()
    assert record.ok, (record.error_class, record.error_message)
    return record


def on_server_clock(t: float) -> float:
    return t - run_clock._EPOCH_ANCHOR


@pytest.mark.parametrize(
    "fmt, api, usage, tokens_per_chunk",
    [
        ("reasoning_content", "chat", "continuous", 1),
        ("reasoning", "chat", "continuous", [1, 3, 2]),  # chunks across the boundary carry both parts
        ("reasoning_content", "chat", "final", 1),
        ("think_tags", "completions", "continuous", 1),
        ("think_tags", "chat", "continuous", 1),
    ],
)
def test_time_to_first_output_token_and_reasoning_tokens_match_the_server(refserver, fmt, api, usage, tokens_per_chunk):
    """30 streams of 23 reasoning tokens then 17 answer tokens: the client's first answer chunk is the server's
    (within 1 ms at the median: the transfer and the client's read), its reasoning count the server's exactly."""
    errors = []
    for _ in range(30):
        record = stream(
            refserver.url,
            40,
            api,
            think_tags=fmt == "think_tags",
            reasoning_tokens=23,
            reasoning_format=fmt,
            usage=usage,
            tokens_per_chunk=tokens_per_chunk,
            ttft_s=0.002,
            gap_s=0.002,
        )
        log = refserver.stream_log(record.request_id)
        assert record.reasoning_tokens == log["reasoning_tokens"] == 23
        assert record.output_tokens == 40
        # the first answer chunk is not before the first chunk (thinking came first; a client slowed by a busy machine
        # reads both in one go, with one stamp), and stamped after the server sent it
        assert record.t_first <= record.t_first_output <= record.t_end
        lag = on_server_clock(record.t_first_output) - log["t_first_answer"]
        assert lag >= 0, f"the first answer chunk was stamped {-lag * 1e3:.3f} ms before the server sent it"
        errors.append(lag)
    print(f"{fmt} {api}: first answer chunk stamped {statistics.median(errors) * 1e3:.3f} ms after the server sent it")
    assert statistics.median(errors) < 0.001, sorted(errors)


def test_reasoning_cut_by_max_tokens_is_a_success_with_no_answer(refserver):
    record = stream(refserver.url, 12, reasoning_tokens=50, ttft_s=0, gap_s=0.001)
    log = refserver.stream_log(record.request_id)
    assert log["t_first_answer"] is None and log["reasoning_tokens"] == 12
    assert record.reasoning_tokens == record.output_tokens == 12
    assert math.isnan(record.t_first_output) and not math.isnan(record.t_first)


def test_the_servers_reasoning_count_wins_over_the_chunks(refserver):
    """Think tags the client was not asked to split look like answer text (nothing counted as reasoning); the
    usage's ``completion_tokens_details.reasoning_tokens`` still gives the count."""
    plain = stream(refserver.url, 20, "completions", reasoning_tokens=8, reasoning_format="think_tags", ttft_s=0)
    assert plain.reasoning_tokens == 0 and plain.t_first_output == plain.t_first
    told = stream(
        refserver.url, 20, "completions", reasoning_tokens=8, reasoning_format="think_tags", reasoning_details=True
    )
    assert told.reasoning_tokens == 8 and told.t_first_output == told.t_first


def test_no_reasoning_means_the_first_output_token_is_the_first_token(refserver):
    record = stream(refserver.url, 10, ttft_s=0, gap_s=0.001)
    assert record.reasoning_tokens == 0 and record.t_first_output == record.t_first


def test_reasoning_deltas_count_on_a_llamacpp_style_stream(refserver):
    record = stream(refserver.url, 30, llamacpp=True, reasoning_tokens=10, ttft_s=0, gap_s=0.001)
    log = refserver.stream_log(record.request_id)
    assert record.token_source == "server_events" and record.reasoning_tokens == 10 and record.output_tokens == 30
    assert on_server_clock(record.t_first_output) >= log["t_first_answer"]


def test_event_parts_reads_each_field():
    def parts(data: dict) -> Parts:
        return event_pieces(data)[1]

    assert parts({"choices": [{"delta": {"reasoning_content": "a", "content": "b"}}]}) == Parts("a", "b")
    assert parts({"choices": [{"delta": {"reasoning": "a"}}]}) == Parts("a", "")
    assert parts({"choices": [{"text": "<think>x"}]}) == Parts("", "<think>x")
    assert parts({"choices": [{"delta": {"content": None, "reasoning_content": 7}}]}) == Parts("", "")


def test_an_event_s_text_is_each_choice_s_content_then_its_reasoning_and_its_parts_split_them():
    data = {
        "choices": [
            {"delta": {"reasoning": "r1", "content": "c1", "reasoning_content": "rc1"}},
            "not a choice",
            {"text": "t2"},
            {"delta": {"content": 5, "reasoning_content": "rc3"}},
            {"delta": "not a delta"},
        ]
    }
    assert event_pieces(data) == ("c1rc1r1t2rc3", Parts("rc1r1rc3", "c1t2"))
    assert event_text(Event(0.0, data)) == "c1rc1r1t2rc3"
    for nothing in ({}, {"choices": None}, {"choices": [None]}, {"choices": [{"delta": None}]}):
        assert event_pieces(nothing) == ("", Parts("", ""))


def test_think_tags_split_across_chunks():
    parts = [Parts("", "<th"), Parts("", "ink> a b </th"), Parts("", "ink>\n\nAns"), Parts("", "wer")]
    assert split_tags(parts) == [
        Parts("<th", ""),
        Parts("ink> a b </th", ""),
        Parts("ink>", "\n\nAns"),
        Parts("", "wer"),
    ]
    # opened and never closed: all reasoning; no tags at all: all answer
    assert split_tags([Parts("", " <think> a"), Parts("", " b")]) == [Parts(" <think> a", ""), Parts(" b", "")]
    assert split_tags([Parts("", "a"), Parts("", "b")]) == [Parts("", "a"), Parts("", "b")]


def test_split_tokens_by_text_length_in_a_mixed_chunk():
    parts = [Parts("aaaa", ""), Parts("aaa", "b"), Parts("a", "bbb"), Parts("a", "b"), Parts("", "b")]
    reasoning, first = split_tokens(parts, [2, 4, 4, 1, 1])
    assert reasoning == [2, 3, 1, 0, 0]  # 4*3/4, 4*1/4 (at least one each side), a one-token chunk is answer
    assert first == 1


def test_the_reference_server_refuses_reasoning_it_cannot_stream(refserver):
    def ask(api: str, **ref) -> requests.Response:
        path = "/v1/chat/completions" if api == "chat" else "/v1/completions"
        body = {
            "stream": True,
            "max_tokens": 4,
            "ref": ref,
            "prompt": "x",
            "messages": [{"role": "user", "content": "x"}],
        }
        return requests.post(refserver.url + path, json=body, timeout=10)

    refused = ask("completions", reasoning_tokens=3)
    assert refused.status_code == 400 and "chat" in refused.json()["error"]["message"]
    refused = ask("chat", reasoning_tokens=1, reasoning_format="think_tags")
    assert refused.status_code == 400 and ">= 2" in refused.json()["error"]["message"]
    assert ask("chat", reasoning_format="thoughts").status_code == 400

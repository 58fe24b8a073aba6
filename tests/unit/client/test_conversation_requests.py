"""A conversation's request on the wire: its history as the messages, its session header, and the answer it
keeps for the next turn (the content the server streamed, without reasoning)."""

import json

from locust_llm.client.accounting import Event, answer_text
from locust_llm.client.stream import RequestSpec, StreamingClient

HISTORY = (
    {"role": "user", "content": "first"},
    {"role": "assistant", "content": " w0 w1"},
    {"role": "user", "content": "second"},
)


def test_the_history_goes_as_the_messages_with_the_session_header(monkeypatch):
    monkeypatch.setenv("LOCUST_LLM_API_KEY", "k")
    client = StreamingClient("http://127.0.0.1:9")
    spec = RequestSpec(
        prompt="second", max_tokens=4, api="chat", messages=HISTORY, headers=(("X-Session-ID", "run-s0-w1-c7"),)
    )
    data = client.prepare(spec)
    head, body = data.split(b"\r\n\r\n", 1)
    assert json.loads(body)["messages"] == list(HISTORY)
    lines = head.decode().split("\r\n")
    assert "X-Session-ID: run-s0-w1-c7" in lines and "Authorization: Bearer k" in lines
    assert lines[0] == "POST /v1/chat/completions HTTP/1.1"
    assert not client.prepared  # every turn's request is its own: nothing to keep for the next one
    assert json.loads(client.prepare(RequestSpec(prompt="p", max_tokens=1, api="chat")).split(b"\r\n\r\n")[1])[
        "messages"
    ] == [{"role": "user", "content": "p"}]


def test_the_answer_is_the_streamed_content_without_reasoning():
    def chunk(**delta):
        return Event(0.0, {"choices": [{"index": 0, "delta": delta}]})

    events = [
        chunk(role="assistant", content=""),
        chunk(reasoning_content="let me think"),
        chunk(content=" w0"),
        chunk(content=" w1", reasoning_content="hmm"),
        Event(0.0, {"choices": [], "usage": {"completion_tokens": 2}}),
    ]
    assert answer_text(events) == " w0 w1"
    assert answer_text([Event(0.0, {"choices": [{"text": " a"}]}), Event(0.0, {"choices": [{"text": "b"}]})]) == " ab"

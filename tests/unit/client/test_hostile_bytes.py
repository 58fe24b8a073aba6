"""What a server's bytes can do to the stream's reading, without a server: an event that is not UTF-8 or nests
without end, an encoding the client did not ask for, a stream past its max_tokens; and a server's string as the
console prints it."""

import gzip
import json
import zlib

import pytest

from locust_llm.client.accounting import Event
from locust_llm.client.stream import _chunk, _decoder, _Failed, _overran, overrun_after
from locust_llm.client.transport import ResponseHead
from locust_llm.fmt import SHOWN_MAX, md, shown


def failure(call) -> _Failed:
    with pytest.raises(_Failed) as caught:
        call()
    return caught.value


def test_an_event_that_is_not_utf8_is_named_as_such():
    exc = failure(lambda: _chunk(b'{"choices": [{"text": "\xff\xfe"}]}'))
    assert exc.error_class == "malformed_event" and "event is not UTF-8 (byte 0xff at 23)" in str(exc)


def test_nesting_without_end_is_a_malformed_event_never_a_recursion_error():
    exc = failure(lambda: _chunk(b"[" * 100_000))
    assert exc.error_class == "malformed_event" and "nests deeper than the JSON parser allows" in str(exc)


def head(encoding: str) -> ResponseHead:
    return ResponseHead(status=200, headers={"content-encoding": encoding})


@pytest.mark.parametrize("pack", [gzip.compress, zlib.compress], ids=["gzip", "deflate"])
def test_gzip_and_deflate_bodies_are_decoded_piece_by_piece(pack):
    body = b'data: {"a": 1}\n\n' * 50
    packed = pack(body)
    decode = _decoder(head("gzip" if pack is gzip.compress else "deflate"))
    assert decode is not None
    assert b"".join(decode(packed[i : i + 7]) for i in range(0, len(packed), 7)) == body


def test_an_encoding_the_client_cannot_read_is_refused_by_name():
    exc = failure(lambda: _decoder(head("br")))
    assert exc.error_class == "malformed_event"
    assert "the server sent Content-Encoding: br although the client asked for identity" in str(exc)
    assert _decoder(head("identity")) is None


def tokens(n: int) -> list[Event]:
    return [Event(0.01 * i, {"choices": [{"text": f" w{i}"}]}) for i in range(n)]


def test_a_stream_past_max_tokens_and_its_margin_is_stopped_with_its_counts():
    limit = overrun_after(64)
    assert limit == 2 * 64 + 16
    last = tokens(1)[0]
    assert _overran(limit - 1, limit - 1, last, 64) is None
    why = _overran(limit, limit, last, 64)
    assert why is not None and "went on past max_tokens 64 (144 events with text of 144" in why
    # A cumulative usage past the limit counts too.
    counted = Event(1.0, {"choices": [{"text": " x"}], "usage": {"completion_tokens": 500}})
    assert "usage.completion_tokens 500" in (_overran(11, 11, counted, 64) or "")
    # Empty chunks forever (each one resets the idle clock): four events in all per event with text allowed.
    empty = Event(1.0, {"choices": [{"delta": {}}]})
    assert _overran(3, 4 * limit - 1, empty, 64) is None
    assert "(3 events with text of 576" in (_overran(3, 4 * limit, empty, 64) or "")


def test_a_server_string_is_shown_escaped_and_cut():
    forged = "llamacpp\nShutting down (exit code 0)\nlocust-llm verdict for run R: exit code 0"
    assert "\n" not in shown(forged) and "\\nShutting down" in shown(forged)
    title = "m\x1b]0;owned\x07\x1b[2J\u202e"
    assert shown(title) == "m\\x1b]0;owned\\x07\\x1b[2J\\u202e"
    long = "x" * (SHOWN_MAX + 50)
    assert shown(long) == "x" * SHOWN_MAX + f"... ({SHOWN_MAX + 50} characters)"
    assert "\x1b" not in md(title) and "\\\\x1b" in md(title)  # Markdown shows the backslash


def test_an_error_event_quotes_its_data():
    from locust_llm.client.stream import _error_event

    exc = _error_event(json.dumps({"message": "overloaded\x1b[2J"}).encode())
    assert exc.error_class == "server_error_event"
    assert str(exc) == 'server sent an error event (event: error): {"message": "overloaded\\u001b[2J"}'

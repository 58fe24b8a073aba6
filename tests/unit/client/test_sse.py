"""The event stream as the SSE specification reads it, fed in the pieces a socket could return: every split of the
bytes gives the same events as the whole."""

import pytest

from locust_llm.client.sse import EventTooLarge, SSEParser

STREAM = b'data: {"a": 1}\n\ndata: {"b": 2}\n\ndata: [DONE]\n\n'
EVENTS = [b'{"a": 1}', b'{"b": 2}', b"[DONE]"]


def fed(data: bytes, sizes: list[int] | None = None) -> tuple[list[bytes], SSEParser]:
    """The events of ``data`` fed in pieces of ``sizes`` (cycled), or one byte at a time."""
    parser, out, i, k = SSEParser(), [], 0, 0
    sizes = sizes or [1]
    while i < len(data):
        out += parser.feed(data[i : i + sizes[k % len(sizes)]])
        i += sizes[k % len(sizes)]
        k += 1
    return out, parser


@pytest.mark.parametrize("ending", [b"\n", b"\r", b"\r\n"], ids=["LF", "CR", "CRLF"])
@pytest.mark.parametrize("sizes", [None, [3, 5], [len(STREAM) * 2]], ids=["bytewise", "uneven", "whole"])
def test_every_line_ending_the_specification_allows_gives_the_same_events(ending, sizes):
    assert fed(STREAM.replace(b"\n", ending), sizes)[0] == EVENTS


def test_a_crlf_split_between_two_reads_is_one_line_end():
    parser = SSEParser()
    assert parser.feed(b'data: {"a": 1}\r') == []
    assert parser.feed(b"\n\r") == [b'{"a": 1}']  # CR LF, then a lone CR: the blank line
    assert parser.feed(b"\ndata: x\r\n\r\n") == [b"x"]  # the LF after that CR belongs to it


@pytest.mark.parametrize("sizes", [None, [2, 7], [1000]], ids=["bytewise", "uneven", "whole"])
def test_a_leading_byte_order_mark_is_skipped_and_the_first_event_kept(sizes):
    assert fed(b"\xef\xbb\xbf" + STREAM, sizes)[0] == EVENTS


def test_a_byte_order_mark_later_in_the_stream_is_data():
    events, _ = fed(STREAM + b"data: \xef\xbb\xbfx\n\n", [1000])
    assert events[-1] == b"\xef\xbb\xbfx"


def test_an_error_event_stops_the_parse_and_keeps_its_data():
    stream = b'data: {"a": 1}\n\nevent: error\ndata: {"message": "overloaded"}\n\ndata: {"b": 2}\n\n'
    events, parser = fed(stream, [1000])
    assert events == [b'{"a": 1}'] and parser.error == b'{"message": "overloaded"}'
    assert parser.feed(b'data: {"c": 3}\n\n') == []  # nothing after it


def test_other_named_events_and_comments_are_skipped():
    stream = b': keep-alive\n\nevent: ping\ndata: {}\n\nevent: message\ndata: {"a": 1}\n\n'
    assert fed(stream, [5])[0] == [b'{"a": 1}']


def test_an_endless_line_is_refused():
    parser = SSEParser(max_event_bytes=100)
    with pytest.raises(EventTooLarge):
        parser.feed(b"data: " + b"x" * 200)

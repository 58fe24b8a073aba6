"""Server-sent events from bytes as they arrive: the ``data`` of each complete event. Pure.

A few lines instead of sseclient-py: this one is fed whatever a socket read returned (sseclient-py pulls from
an iterator and, on long lines, re-scans its buffer, which is quadratic), and it refuses an event larger than
``max_event_bytes`` instead of buffering a server's endless line.

The event stream as the specification (WHATWG HTML, "Server-sent events") reads it: lines end with CR, LF or
CRLF (a CRLF split between two reads is one line end); a UTF-8 byte order mark before the first byte is skipped;
an event's type is its ``event:`` field. An ``error`` event (some gateways send one to end a stream) stops the
parse: its data is ``error`` and nothing after it is returned. Other named events (``ping``) are not completions'
chunks and are skipped, as a client listening for ``message`` skips them. All of it is done with bytes methods on a
whole read (no per-byte Python loop), and a read that holds one ``data:`` line and its blank line, the usual case,
is returned without splitting.
"""

from __future__ import annotations

__all__ = ["EventTooLarge", "SSEParser"]

MAX_EVENT_BYTES = 1 << 20
BOM = b"\xef\xbb\xbf"


class EventTooLarge(ValueError):
    pass


class SSEParser:
    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES):
        self.buffer = b""  # line ends already made LF
        self.max_event_bytes = max_event_bytes
        self.started = False  # a byte of the stream has been seen (a BOM is only skipped before it)
        self.after_cr = False  # the last read ended with CR: an LF that begins the next one belongs to it
        self.error: bytes | None = None  # the data of an ``event: error``, once one came

    def feed(self, data: bytes) -> list[bytes]:
        """The ``data`` field of every event completed by ``data`` (multi-line data joined with ``\\n``)."""
        if self.error is not None:
            return []
        if not self.started:  # the buffer holds at most the start of a BOM split between reads
            data, self.buffer = self.buffer + data, b""
            if len(data) < len(BOM) and BOM.startswith(data):
                self.buffer = data
                return []
            self.started = True
            data = data.removeprefix(BOM)
        if self.after_cr and data.startswith(b"\n"):
            data = data[1:]
        self.after_cr = data.endswith(b"\r")
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        elif (
            not self.buffer and data.startswith(b"data: ") and data.endswith(b"\n\n") and data.count(b"\n") == 2
        ):  # the usual case: one single-line event per read
            return [data[6:-2]]
        scan_from = max(len(self.buffer) - 1, 0)  # a separator may straddle the previous read
        self.buffer += data
        out = []
        while True:
            end = self.buffer.find(b"\n\n", scan_from)
            if end < 0:
                break
            block, self.buffer = self.buffer[:end], self.buffer[end + 2 :]
            scan_from = 0
            kind, lines = b"", []
            for line in block.split(b"\n"):
                if line.startswith(b"data:"):
                    lines.append(line[5:].removeprefix(b" "))
                elif line.startswith(b"event:"):
                    kind = line[6:].strip()
            if kind == b"error":
                self.error = b"\n".join(lines)
                self.buffer = b""
                return out
            if lines and kind in (b"", b"message"):
                out.append(b"\n".join(lines))
        if len(self.buffer) > self.max_event_bytes:
            raise EventTooLarge(f"an event longer than {self.max_event_bytes} bytes without an end")
        return out

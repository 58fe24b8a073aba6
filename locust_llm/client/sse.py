"""Server-sent events from bytes as they arrive: the ``data`` of each complete event. Pure.

A few lines instead of sseclient-py: this one is fed whatever a socket read returned (sseclient-py pulls from
an iterator and, on long lines, re-scans its buffer, which is quadratic), and it refuses an event larger than
``max_event_bytes`` instead of buffering a server's endless line.
"""

from __future__ import annotations

__all__ = ["EventTooLarge", "SSEParser"]

MAX_EVENT_BYTES = 1 << 20


class EventTooLarge(ValueError):
    pass


class SSEParser:
    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES):
        self.buffer = b""
        self.max_event_bytes = max_event_bytes

    def feed(self, data: bytes) -> list[bytes]:
        """The ``data`` field of every event completed by ``data`` (multi-line data joined with ``\\n``)."""
        if (
            not self.buffer and data.startswith(b"data: ") and data.endswith(b"\n\n") and data.count(b"\n") == 2
        ):  # the usual case: one single-line event per read
            return [data[6:-2]]
        scan_from = max(len(self.buffer) - 3, 0)  # a separator may straddle the previous read
        self.buffer += data
        out = []
        while True:
            end, size = _separator(self.buffer, scan_from)
            if end < 0:
                break
            block, self.buffer = self.buffer[:end], self.buffer[end + size :]
            scan_from = 0
            lines = [
                line[5:].removeprefix(b" ")
                for line in block.replace(b"\r\n", b"\n").split(b"\n")
                if line.startswith(b"data:")
            ]
            if lines:
                out.append(b"\n".join(line.rstrip(b"\r") for line in lines))
        if len(self.buffer) > self.max_event_bytes:
            raise EventTooLarge(f"an event longer than {self.max_event_bytes} bytes without an end")
        return out


def _separator(buffer: bytes, start: int) -> tuple[int, int]:
    """Position and length of the first blank line (event end) at or after ``start``; (-1, 0) if none."""
    lf = buffer.find(b"\n\n", start)
    crlf = buffer.find(b"\r\n\r\n", start)
    if crlf >= 0 and (lf < 0 or crlf < lf):
        return crlf, 4
    return (lf, 2) if lf >= 0 else (-1, 0)

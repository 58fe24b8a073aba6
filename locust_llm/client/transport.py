"""The streaming hot path: HTTP/1.1 on a gevent socket, each read stamped the moment it returns.

Why not requests: it stamps nothing itself, spends about 1.5 ms of CPU per request preparing and pooling
before the bytes leave, and its SSE reader waits for 128-byte blocks on close-delimited streams. Here:

* the request's bytes are built before the stamp; ``t_send`` is taken immediately before they are written
  to an already connected socket (a new connection is made first, and its start is ``t_connect``);
* every ``recv`` returns what the socket has, and its bytes carry the time the call returned; framing
  (chunked, Content-Length or close-delimited) and SSE parsing happen after the stamp;
* the host is resolved once per client; one keep-alive connection per client (one client per user).

A stream's deadlines (first token, idle gap, total) are kept by one watchdog timer per stream (``stream``), not
by a socket timeout per read, which in gevent costs a timer object per wait.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from urllib.parse import urlsplit

from gevent import select, socket, ssl

from ..records import now

__all__ = [
    "Body",
    "Connection",
    "HTTPError",
    "ResponseHead",
    "Target",
    "TransportError",
    "build_request",
    "header_problem",
    "tls_context",
    "url_problem",
]

RECV_BYTES = 65536
MAX_HEAD_BYTES = 64 * 1024
ERROR_BODY_BYTES = 4096


class TransportError(Exception):
    """The exchange failed; ``kind``: refused, connect_timeout, tls, reset, closed (a clean close before the body
    ended), timeout, protocol."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class HTTPError(Exception):
    def __init__(self, status: int, body: bytes):
        super().__init__(f"HTTP {status}: {body.decode('utf-8', 'replace')}")
        self.status = status


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot start a request line (whitespace or a control character would end it), or None."""
    bad = next((c for c in url if ord(c) <= 32 or ord(c) == 127), None)
    if bad is not None:
        return f"the URL {url!r} holds {bad!r}: spaces and control characters must be percent-encoded"
    try:
        url.encode("ascii")
    except UnicodeEncodeError as exc:
        return f"the URL {url!r} holds {url[exc.start]!r}: non-ASCII characters must be percent-encoded"
    return None


@dataclass(frozen=True)
class Target:
    """Where requests go: resolved once, so no request pays for a name lookup."""

    scheme: str
    host: str
    port: int
    base_path: str
    address: tuple

    @classmethod
    def parse(cls, base_url: str) -> Target:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        if why := url_problem(base_url):
            raise ValueError(why)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        family, kind, proto, _, address = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)[0]
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"), (family, kind, proto, address))

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        return self.host if self.port == default else f"{self.host}:{self.port}"


def header_problem(name: str, value: str) -> str | None:
    """Why ``value`` cannot be sent as header ``name`` (a control character would end the header and start
    another: header injection), or None."""
    bad = next((c for c in value if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        return f"{name} holds the control character {bad!r}"
    try:
        value.encode("latin-1")
    except UnicodeEncodeError as exc:
        return f"{name} holds {value[exc.start]!r}, which an HTTP header cannot carry (latin-1 only)"
    return None


def build_request(target: Target, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    for name, value in headers.items():
        if why := header_problem(name, value):
            raise ValueError(why)
    lines = [
        f"POST {target.base_path}{path} HTTP/1.1",
        f"Host: {target.host_header}",
        "Content-Type: application/json",
        "Accept: text/event-stream",
        "Accept-Encoding: identity",
        f"Content-Length: {len(body)}",
    ]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


@dataclass
class ResponseHead:
    status: int
    headers: dict[str, str]

    @property
    def chunked(self) -> bool:
        return "chunked" in self.headers.get("transfer-encoding", "").lower()

    @property
    def length(self) -> int | None:
        value = self.headers.get("content-length")
        return int(value) if value and value.isdigit() else None

    @property
    def keep_alive(self) -> bool:
        return "close" not in self.headers.get("connection", "").lower() and (self.chunked or self.length is not None)


def tls_context(verify: bool = True) -> ssl.SSLContext:
    """The system's trusted CAs, or those of ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set (OpenSSL reads them);
    made once per client: loading a CA store takes milliseconds, a handshake should not wait for it."""
    context = ssl.create_default_context()
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class Connection:
    """One keep-alive connection; ``exchange`` sends a request and returns its head and a body reader."""

    def __init__(self, target: Target, connect_s: float, tls: ssl.SSLContext | None = None):
        self.target = target
        self.connect_s = connect_s
        self.tls = tls if tls is not None or target.scheme != "https" else tls_context()
        self.sock = None
        self.pending = b""  # bytes read past the head
        self.unanswered = False  # the last request got no byte back before the connection ended
        self.started = float("nan")  # when the last new connection was started (set even when it failed)

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None

    def _stale(self) -> bool:
        """A kept-alive socket with anything to read is not reused: between requests the server has nothing to say,
        so a readable socket was closed by it (or carries bytes no request asked for). Peeking is not possible on a
        TLS socket, and not needed."""
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def connect(self) -> float | None:
        """Connect when there is no usable connection; returns when the new connection was started."""
        if self.sock is not None and not self._stale():
            return None
        self.close()
        family, kind, proto, address = self.target.address
        started = self.started = now()
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self.connect_s)
        try:
            sock.connect(address)
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_hostname=self.target.host)
        except socket.timeout:
            sock.close()
            raise TransportError(
                "connect_timeout", f"no connection to {self.target.host_header} within {self.connect_s:g} s"
            ) from None
        except ssl.SSLError as exc:  # before OSError, its base: a certificate, a protocol, plain HTTP on the port
            sock.close()
            verify = getattr(exc, "verify_message", None)
            reason = f"certificate verify failed: {verify}" if verify else exc.reason or exc
            raise TransportError(
                "tls",
                f"TLS handshake with {self.target.host_header} failed: {reason} ({type(exc).__name__}); "
                "to trust a private CA set SSL_CERT_FILE to its PEM bundle",
            ) from None
        except OSError as exc:
            sock.close()
            kind = "refused" if exc.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH) else "reset"
            raise TransportError(kind, f"cannot connect to {self.target.host_header}: {exc}") from None
        self.sock, self.pending = sock, b""
        return started

    def send(self, data: bytes) -> float:
        """Write the request; returns the time taken immediately before the bytes were handed to the socket."""
        self.unanswered = True
        t_send = now()
        try:
            self.sock.sendall(data)
        except OSError as exc:
            self.close()
            raise TransportError("reset", f"sending the request failed: {exc}") from None
        return t_send

    def recv(self, timeout: float | None = None) -> tuple[bytes, float]:
        """What the socket has, and the time the read returned. ``timeout``: the most to wait; None waits as
        long as it takes (the caller's watchdog ends the wait, without a timer per read)."""
        if timeout is not None and timeout <= 0:
            raise TransportError("timeout", "read timed out")
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(RECV_BYTES)
        except (socket.timeout, BlockingIOError):
            raise TransportError("timeout", "read timed out") from None
        except (OSError, ssl.SSLError) as exc:
            self.close()
            raise TransportError("reset", f"connection reset: {exc}") from None
        return data, now()

    def read_head(self, deadline: float | None = None) -> tuple[ResponseHead, float]:
        """Status and headers of the final response (interim 1xx ones, such as ``100 Continue``, are skipped);
        returns them and the stamp of the read that completed them."""
        buffer, t = b"", now()
        while True:
            while b"\r\n\r\n" not in buffer:
                if len(buffer) > MAX_HEAD_BYTES:
                    raise TransportError("protocol", f"response head longer than {MAX_HEAD_BYTES} bytes")
                data, t = self.recv(None if deadline is None else deadline - now())
                self.unanswered = self.unanswered and not data
                if not data:
                    self.close()
                    raise TransportError("reset", "the server closed the connection before answering")
                buffer += data
            head, buffer = buffer.split(b"\r\n\r\n", 1)
            response = _parse_head(head)
            if not 100 <= response.status < 200 or response.status == 101:
                self.pending = buffer
                return response, t


def _parse_head(head: bytes) -> ResponseHead:
    lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split(" ", 2)[1])
    except (IndexError, ValueError):
        raise TransportError("protocol", f"not an HTTP status line: {lines[0][:80]!r}") from None
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return ResponseHead(status, headers)


class Body:
    """The body of one response as ``(bytes, stamp)`` pieces, whatever its framing; ``complete`` once its end
    was seen (the chunked terminator, Content-Length reached, or the close of a close-delimited body)."""

    DATA, SIZE, DATA_END, TRAILERS = range(4)

    def __init__(self, conn: Connection, head: ResponseHead, first_stamp: float):
        self.conn, self.head = conn, head
        self.chunked = head.chunked
        self.left = head.length  # bytes still to come (Content-Length)
        self.complete = self.left == 0
        self.state, self.chunk_left, self.raw = self.SIZE, 0, b""  # chunked decoding
        self.first = (conn.pending, first_stamp)
        conn.pending = b""

    def _dechunk(self, data: bytes) -> bytes:
        if self.state == self.SIZE and not self.raw:  # the usual case: whole chunks, one event each
            line_end = data.find(b"\r\n")
            if line_end > 0:
                try:
                    size = int(data[:line_end], 16)
                except ValueError:
                    size = -1
                end = line_end + 2 + size
                if size > 0 and len(data) == end + 2 and data.endswith(b"\r\n"):
                    return data[line_end + 2 : end]
        out, raw = [], self.raw + data
        while raw and not self.complete:
            if self.state == self.DATA:
                take = raw[: self.chunk_left]
                out.append(take)
                raw = raw[len(take) :]
                self.chunk_left -= len(take)
                if self.chunk_left == 0:
                    self.state = self.DATA_END
                continue
            line_end = raw.find(b"\r\n")
            if line_end < 0:
                break
            line, raw = raw[:line_end], raw[line_end + 2 :]
            if self.state == self.DATA_END:
                self.state = self.SIZE  # the CRLF after a chunk's data
            elif self.state == self.TRAILERS:
                self.complete = not line  # the blank line after the last chunk (and any trailers)
            else:
                try:
                    size = int(line.split(b";")[0], 16)
                except ValueError:
                    raise TransportError("protocol", f"bad chunk size line {line[:40]!r}") from None
                self.state, self.chunk_left = (self.DATA, size) if size else (self.TRAILERS, 0)
        self.raw = raw
        return b"".join(out)

    def _decode(self, data: bytes) -> bytes:
        if self.chunked:
            return self._dechunk(data)
        if self.left is not None:
            data = data[: self.left]
            self.left -= len(data)
            self.complete = self.left <= 0
        return data

    def pieces(self, timeout_for):
        """Yield ``(payload bytes, stamp)``; ``timeout_for()`` gives the wait allowed for the next read."""
        (data, t), self.first = self.first, (b"", 0.0)
        while True:
            if data:
                payload = self._decode(data)
                if payload:
                    yield payload, t
            if self.complete:
                return
            data, t = self.conn.recv(timeout_for())
            if not data:
                self.conn.close()
                if not self.chunked and self.head.length is None:
                    self.complete = True  # a close-delimited body ends with the connection
                    return
                raise TransportError("closed", "the server closed the connection before the end of the response body")

    def finish(self) -> None:
        """Keep the connection for the next request only when this body ended cleanly and may be reused."""
        if not (self.complete and self.head.keep_alive):
            self.conn.close()

    def read_error(self, deadline: float, limit: int = ERROR_BODY_BYTES) -> bytes:
        """At most ``limit`` bytes of a body that is not a stream (an error's); the connection is not reused."""
        out = b""
        try:
            for payload, _ in self.pieces(lambda: deadline - now()):
                out += payload
                if len(out) >= limit:
                    break
        except TransportError:
            pass
        self.conn.close()
        return out[:limit]

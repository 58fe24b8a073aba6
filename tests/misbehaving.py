"""A misbehaving front on loopback, in the test's own process: a raw HTTP/1.1 server that forwards every request
to a reference server and answers its streaming completions the bad way a test names (docs/faults-and-probes.md,
"Faults and bad input"); a private CA and a server certificate made with the openssl command, for the TLS cases.

Modes (streaming completions only; every other request, the consistency prompts' included, is forwarded as it is):

* ``proxy``: forwarded (over TLS when the front has a certificate);
* ``continue``: ``100 Continue`` and ``103 Early Hints`` first, then the server's answer;
* ``redirect``: ``307`` to the same path on the reference server;
* ``json``: ``200`` with ``Content-Type: application/json`` and a whole, non-streamed completion;
* ``close_after_head``: ``200`` and the stream's head, then a clean close (FIN);
* ``refuse_for:S``: ``503`` with ``Retry-After: 1`` for the first S seconds after the first completion, then
  forwarded;
* ``hang``: the request is read and never answered (the connection is held until the client closes it);
* ``script:NAME``: the stream ``SCRIPTS[NAME]`` writes instead of the server (hostile round three: text-less
  chunks, a zero usage, a BOM, lone CRs, ``event: error``, a stream that never ends, gzip, deep nesting,
  invalid UTF-8), one piece every ``GAP_S``.

Besides, ``metrics`` (a function of the poll count to a page, or to ``(page, delay_s)``) answers ``GET /metrics``,
and ``models`` (an object) answers ``GET /v1/models``; every other request is forwarded. The front counts what it
served (``completions``, ``metric_pages``).

Each answer closes its connection (``Connection: close``): a forwarded answer ends when the server's does.
"""

from __future__ import annotations

import json
import subprocess
import time
import zlib
from pathlib import Path
from urllib.parse import urlsplit

import gevent
from gevent import socket, ssl
from gevent.server import StreamServer

HOLD_S = 120.0  # the longest ``hang`` holds a connection (a bound: clients give up long before)
COMPLETIONS = ("/v1/completions", "/v1/chat/completions")


def read_request(sock) -> tuple[bytes, bytes] | None:
    """The head (without its blank line) and the body of one request; None when the client closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        if not more:
            return None
        data += more
    head, body = data.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        more = sock.recv(65536)
        if not more:
            return None
        body += more
    return head, body


GAP_S = 0.01  # between the pieces of a scripted stream
ENDLESS_S = 300.0  # the longest a scripted stream that never ends goes on (a bound: the client stops long before)


def _chunk(text, finish=None, usage=None) -> dict:
    choice = {"index": 0, "text": text, "finish_reason": finish}
    out: dict = {"id": "cmpl-x", "object": "text_completion", "choices": [choice]}
    if usage is not None:
        out["usage"] = {"prompt_tokens": 8, "completion_tokens": usage, "total_tokens": 8}
    return out


def _data(obj) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _tokens(n: int, usage=None, sep: bytes = b"\n") -> list[bytes]:
    """``n`` one-word events, a last event with ``finish_reason`` and the final ``usage`` (``n`` unless given)."""
    events = [_data(_chunk(f" w{k}")) for k in range(n)]
    events.append(_data(_chunk("", "length", n if usage is None else usage)))
    events.append(b"data: [DONE]\n\n")
    return [e.replace(b"\n", sep) for e in events]


def _textless(n: int) -> list[bytes]:
    """Chat-style chunks with no text at all (``delta: null``, ``{}``, ``text: null``), then a usage of ``n``."""
    shapes = [{"delta": None}, {"delta": {}}, {"text": None}, {"delta": {"content": ""}}]
    events = [_data({"id": "x", "choices": [{"index": 0, **shapes[k % len(shapes)]}]}) for k in range(n)]
    return [*events, _data(_chunk("", "length", n)), b"data: [DONE]\n\n"]


def _endless(_n: int):
    k = 0
    while True:
        yield _data(_chunk(f" w{k}"))
        k += 1


def _endless_empty(_n: int):
    """One token, then chunks without text forever (each one resets the client's idle clock)."""
    yield _data(_chunk(" w0"))
    while True:
        yield _data(_chunk(""))


def _gzipped(n: int) -> list[bytes]:
    packer = zlib.compressobj(wbits=31)
    return [packer.compress(e) + packer.flush(zlib.Z_SYNC_FLUSH) for e in _tokens(n)] + [packer.flush()]


SCRIPTS: dict = {
    # name: (extra headers, pieces of a request asking for n tokens)
    "textless": ([], _textless),
    "usage_zero": ([], lambda n: _tokens(n, usage=0)),
    "usage_negzero": ([], lambda n: _tokens(n, usage=-0.0)),
    "bom": ([], lambda n: [b"\xef\xbb\xbf" + e if i == 0 else e for i, e in enumerate(_tokens(n))]),
    "lone_cr": ([], lambda n: _tokens(n, sep=b"\r")),
    "error_event": ([], lambda n: [*_tokens(3)[:3], b'event: error\ndata: {"message": "overloaded"}\n\n']),
    "endless": ([], _endless),
    "endless_empty": ([], _endless_empty),
    "gzip": (["Content-Encoding: gzip"], _gzipped),
    "brotli": (["Content-Encoding: br"], lambda n: _tokens(n)),
    "nested": ([], lambda n: [b"data: " + b"[" * 100_000 + b"\n\n"]),
    "bad_utf8": ([], lambda n: [_data(_chunk(" w0")), b'data: {"choices": [{"text": "\xff\xfe"}]}\n\n']),
}


class Front:
    def __init__(
        self,
        upstream: str,
        mode: str = "proxy",
        certs: dict | None = None,
        metrics=None,
        models: object | None = None,
    ):
        self.upstream = urlsplit(upstream)
        self.metrics = metrics
        self.models = models
        self.metric_pages = 0  # /metrics answers begun
        self.mode, _, arg = mode.partition(":")
        self.name = arg  # script: which
        self.seconds = float(arg or 0) if self.mode != "script" else 0.0  # refuse_for, slow_tokenize: seconds
        self.first_completion: float | None = None
        self.completions = 0  # streaming requests that reached the front
        self.tls = None
        if certs:
            self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.tls.load_cert_chain(certs["cert"], certs["key"])
        self.scheme = "https" if certs else "http"
        self.server = StreamServer(("127.0.0.1", 0), self.handle)

    def __enter__(self) -> Front:
        self.server.start()
        self.url = f"{self.scheme}://127.0.0.1:{self.server.server_port}"
        return self

    def __exit__(self, *exc) -> None:
        self.server.stop(timeout=1)

    def handle(self, sock, _address) -> None:
        try:
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_side=True)  # a client that refuses the certificate: OSError
            request = read_request(sock)
            if request is None:
                return
            head, body = request
            path = head.split(b" ", 2)[1].decode()
            if path in COMPLETIONS and streaming(body):
                self.completions += 1
                self.first_completion = self.first_completion or time.monotonic()
                self.misbehave(sock, head, body, path)
            elif path == "/metrics" and self.metrics is not None:
                self.metric_pages += 1
                page = self.metrics(self.metric_pages)
                page, delay = page if isinstance(page, tuple) else (page, 0.0)
                gevent.sleep(delay)
                sock.sendall(answer(200, b"OK", page, ["Content-Type: text/plain; version=0.0.4"]))
            elif path == "/v1/models" and self.models is not None:
                sock.sendall(answer(200, b"OK", json.dumps(self.models).encode(), ["Content-Type: application/json"]))
            else:
                if path == "/tokenize" and self.mode == "slow_tokenize":
                    gevent.sleep(self.seconds)  # a server across a network
                self.forward(sock, head, body)
        except OSError:
            pass
        finally:
            sock.close()

    def misbehave(self, sock, head: bytes, body: bytes, path: str) -> None:
        mode = self.mode
        if mode == "refuse_for" and time.monotonic() - self.first_completion < self.seconds:
            sock.sendall(answer(503, b"Service Unavailable", b"overloaded, come back later", ["Retry-After: 1"]))
        elif mode == "redirect":
            where = f"{self.upstream.scheme}://{self.upstream.netloc}{path}"
            sock.sendall(answer(307, b"Temporary Redirect", b"", [f"Location: {where}"]))
        elif mode == "json":
            request = json.loads(body)
            n = int(request.get("max_tokens", 16))
            whole = {
                "id": "cmpl-whole",
                "object": "text_completion",
                "choices": [{"index": 0, "text": "".join(f" w{k}" for k in range(n)), "finish_reason": "length"}],
                "usage": {"prompt_tokens": 8, "completion_tokens": n, "total_tokens": 8 + n},
            }
            sock.sendall(answer(200, b"OK", json.dumps(whole).encode(), ["Content-Type: application/json"]))
        elif mode == "close_after_head":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            sock.shutdown(socket.SHUT_WR)  # a clean close: FIN, no body
            sock.recv(1)
        elif mode == "hang":
            with gevent.Timeout(HOLD_S, False):
                sock.recv(1)  # until the client gives up and closes
        elif mode == "script":
            headers, pieces = SCRIPTS[self.name]
            n = int(json.loads(body).get("max_tokens", 16))
            head = ["Content-Type: text/event-stream", "Cache-Control: no-cache", *headers, "Connection: close"]
            sock.sendall(b"HTTP/1.1 200 OK\r\n" + "".join(f"{h}\r\n" for h in head).encode() + b"\r\n")
            with gevent.Timeout(ENDLESS_S, False):
                for piece in pieces(n):
                    gevent.sleep(GAP_S)
                    sock.sendall(piece)
        else:
            if mode == "continue":
                sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n" + b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n")
            self.forward(sock, head, body)

    def forward(self, sock, head: bytes, body: bytes) -> None:
        """The request to the reference server with ``Connection: close``; its answer piped back as it comes."""
        lines = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"connection:")]
        upstream = socket.create_connection((self.upstream.hostname, self.upstream.port))
        try:
            upstream.sendall(b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n" + body)
            while data := upstream.recv(65536):
                sock.sendall(data)
        finally:
            upstream.close()


def streaming(body: bytes) -> bool:
    """A streaming completion (the load's); the consistency prompts' whole answers are forwarded as they are."""
    try:
        request = json.loads(body)
    except ValueError:
        return False
    return isinstance(request, dict) and request.get("stream") is True


def answer(status: int, reason: bytes, body: bytes, headers: list[str]) -> bytes:
    extra = "".join(f"{h}\r\n" for h in headers).encode()
    return (
        b"HTTP/1.1 %d %s\r\n" % (status, reason)
        + extra
        + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
        + body
    )


def make_certs(folder: Path) -> dict:
    """A private CA (``ca``) and a certificate for 127.0.0.1 it signed (``cert``, ``key``), with openssl."""
    folder.mkdir(parents=True, exist_ok=True)
    ca, ca_key = folder / "ca.pem", folder / "ca.key"
    cert, key, csr, ext = folder / "server.pem", folder / "server.key", folder / "server.csr", folder / "server.ext"

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=locust-llm test CA",
        "-keyout", str(ca_key), "-out", str(ca),
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(csr))
    ext.write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
        "-days", "2", "-extfile", str(ext), "-out", str(cert),
    )  # fmt: skip
    return {"ca": str(ca), "cert": str(cert), "key": str(key)}

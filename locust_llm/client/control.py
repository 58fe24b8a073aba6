"""Control-plane requests to a server (``/health``, ``/v1/models``, ``/props``, ``/tokenize``): the API key on
each, a total deadline and a cap on the bytes read, so a server that trickles or never ends cannot hold a run.

Standard library only (``servers`` and ``workload`` are pure layers, used outside Locust too): at the deadline a
timer shuts the socket down, which ends a read in progress whether or not gevent has patched sockets. No
proxies (servers are on loopback or the lab network); userinfo in the URL is not sent (as with the streams).
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from urllib.parse import urlsplit

from . import ledger
from .engines import auth_headers

__all__ = ["ANSWER_BYTES", "ERROR_BODY_BYTES", "ControlError", "Unreachable", "call"]

ANSWER_BYTES = 1 << 20
ERROR_BODY_BYTES = 4096


class ControlError(OSError):
    """No usable answer: the deadline passed, the answer was too long, or the HTTP exchange broke."""


class Unreachable(ControlError):
    """Nothing accepted the connection (no point trying again at once)."""


def call(
    url: str,
    body: object = None,
    timeout_s: float = 10.0,
    max_bytes: int = ANSWER_BYTES,
    purpose: str = "server checks",
) -> tuple[int, bytes]:
    """``(status, body)`` of a GET, or a JSON POST of ``body``, all within ``timeout_s``; counted under ``purpose``
    once the connection is open (``ledger``).

    Of an error status (>= 400) at most ``ERROR_BODY_BYTES`` are read; a success longer than ``max_bytes``
    raises ``ControlError``, as does a deadline passed."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ControlError(f"not an http(s) URL: {url!r}")
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = kind(parts.hostname, parts.port, timeout=timeout_s)
    expired = threading.Event()

    def cut() -> None:
        expired.set()
        sock = conn.sock  # read once: the caller may be closing it at this very moment (unpatched: a thread)
        try:
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    timer = threading.Timer(timeout_s, cut)
    timer.daemon = True
    timer.start()
    headers = {"Accept-Encoding": "identity", **auth_headers(url)}
    data = None if body is None else json.dumps(body).encode()
    if data is not None:
        headers["Content-Type"] = "application/json"
    status, raw, failure, connected = 0, b"", None, False
    try:
        conn.connect()
        connected = True
        if not expired.is_set():
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            method = "POST" if data is not None else "GET"
            ledger.count(purpose, method, url)
            conn.request(method, target, body=data, headers=headers)
            response = conn.getresponse()
            status = response.status
            raw = response.read(ERROR_BODY_BYTES if status >= 400 else max_bytes + 1)
    except (OSError, http.client.HTTPException) as exc:
        failure = exc
    finally:
        timer.cancel()
        conn.close()
    # Checked first: a shut-down socket can also look like the end of a body that has no length.
    if expired.is_set():
        raise ControlError(f"no complete answer from {url} within {timeout_s:g} s")
    if failure is not None:
        if not connected:
            raise Unreachable(f"{url}: {type(failure).__name__}: {failure}")
        raise ControlError(f"{url}: {type(failure).__name__}: {failure}")
    if status < 400 and len(raw) > max_bytes:
        raise ControlError(f"the answer from {url} is longer than {max_bytes} bytes")
    return status, raw

"""Reference streaming server: an OpenAI-compatible SSE server whose behaviour is known exactly.

It is the test oracle for the streaming client's measurements. Every chunk it writes carries
``"ref_t": time.perf_counter()`` taken immediately before the write; on Linux perf_counter is
CLOCK_MONOTONIC, shared by every process on the machine, so a client on the same host can
compare its own stamps with the server's send times (``records.now() - records._EPOCH_ANCHOR``
is the client's perf_counter). Every stream is also logged by the server and readable at
``GET /ref/log/<id>`` (the ``id`` given in the request's ``ref`` object).

    python -m locust_llm.refserver --port 8000 [--ttft-s 0.05 --gap-s 0.01 --tokens-per-chunk 1,3 ...]

``--port 0`` binds a free port; the first line on stdout is ``refserver listening on 127.0.0.1:PORT``.
It binds 127.0.0.1 only.

Endpoints: ``POST /v1/completions``, ``POST /v1/chat/completions`` (streaming), ``GET /health``,
``GET /v1/models``, ``POST /tokenize`` (``{"content": text}`` -> one token per whitespace-separated
word), ``GET /ref/log/<id>``, ``POST /ref/logs`` (``{"ids": [...]}`` -> ``{"logs": {id: log or null}}``),
``GET /ref/logs`` (every logged stream, oldest first). A stream's log has the server's own stamps:
``t_recv`` (request received) and each chunk's write time, kind and token count.

Behaviour per request, through an extra body field ``"ref": {...}`` (defaults from the CLI flags):

- ``ttft_s``: delay from receiving the request to the first token chunk.
- ``gap_s``: delay between token chunks (the schedule is absolute, so delays never accumulate).
- ``tokens_per_chunk``: int, or a list cycled (``[1, 3, 2, 4]``); the last chunk is cut to fit.
- ``usage``: ``"continuous"`` (cumulative ``usage.completion_tokens`` on every chunk, like vLLM's
  ``continuous_usage_stats``, plus a final usage-only chunk), ``"final"`` (only a final usage-only
  chunk) or ``"none"``.
- ``llamacpp``: mimic llama.cpp: one SSE event per token, no per-chunk usage, and a final chunk
  with ``finish_reason``, ``usage`` and ``timings`` (``predicted_n``, ``draft_n``, ``draft_n_accepted``).
- ``draft_n`` / ``draft_accepted``: the values put in llama.cpp ``timings`` (default 0).
- ``fault``: ``"none"``; ``"truncate_after:N"`` (N token chunks, then the HTTP body ends properly
  and the connection closes, without finish_reason or ``[DONE]``); ``"malformed_after:N"`` (a data
  line that is not JSON after N token chunks, then ``[DONE]``); ``"http_500"``; ``"error_event"`` or
  ``"error_event_after:N"`` (``data: {"error": {...}}`` then ``[DONE]``); ``"empty"`` (a finishing
  chunk with zero tokens); ``"reset_after:N"`` (the socket is aborted with a TCP RST);
  ``"close_after:N"`` (the connection is closed with a FIN in the middle of the chunked body, as when
  a server process dies); ``"http_500_endless"`` (an error status whose body never ends);
  ``"huge_event_after:N"`` (one 8 MB data line). A fault
  "after N" happens at the time slot of token chunk N+1.
- ``stall_once_s``: the first completion request this process receives is stalled this much longer
  before its first chunk; later requests are not.
- ``pause_once_s``: the first completion request this process receives starts a server-wide pause
  of this length: no chunk of any stream is written until it ends (a GC pause or a preemption).
- ``headers_early``: send the HTTP response headers as soon as the request arrives (vLLM, SGLang;
  default true) or only with the first chunk (false).
- ``framing``: ``"chunked"`` (default; one HTTP chunk per event) or ``"close"`` (no Transfer-Encoding and no
  Content-Length: the body ends when the server closes the connection, as some gateways and HTTP/1.0 do).
- ``drop_connection``: close the connection after the response without saying so (no ``Connection: close``),
  as servers that cap requests per keep-alive connection do.
- ``patch_last``: ``{"dotted.path": value}`` set in the last token chunk's JSON (``"choices.0.finish_reason"``,
  ``"usage.prompt_tokens"``, ``"timings.draft_n"``), to play a server that sends odd values.
- ``image_ms_per_kpx``: prefill time per thousand pixels of a chat request's images, a known encode cost (their
  format is checked, a malformed part is a 400, and the log lists each image: ``refimages``).
- ``id``: a name for the stream's server-side log.

Output length is the body's ``max_tokens`` (default 16). Token ``k`` of a stream is the text
``" w<k>"``, so a whitespace tokenizer counts it exactly.

It uses gevent primitives directly (``gevent.pywsgi``, ``gevent.sleep``) and never blocks on the
standard library, so no monkey-patching is needed and one process serves hundreds of streams.
"""

from __future__ import annotations

import itertools
import json
import socket
import struct
import sys
import time
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import gevent
from gevent.pywsgi import WSGIHandler, WSGIServer

from .refimages import BadContent, image_delay_s, request_text

MODEL = "refserver-model"
USAGE_MODES = ("continuous", "final", "none")
FAULTS = ("none", "truncate_after", "malformed_after", "http_500", "http_500_endless", "error_event",
          "error_event_after", "empty", "reset_after", "close_after", "huge_event_after")
MODELS_ANSWERS = ("object", "list", "garbage")
HUGE_EVENT_BYTES = 8 << 20
FRAMINGS = ("chunked", "close")
DEFAULTS: dict[str, Any] = {
    "ttft_s": 0.05,
    "gap_s": 0.01,
    "tokens_per_chunk": 1,
    "usage": "continuous",
    "llamacpp": False,
    "fault": "none",
    "stall_once_s": 0.0,
    "pause_once_s": 0.0,
    "headers_early": True,
    "framing": "chunked",
    "patch_last": {},
    "drop_connection": False,
    "draft_n": 0,
    "draft_accepted": 0,
    "image_ms_per_kpx": 0.0,
    "id": None,
}
LOG_SIZE = 50_000


class BadRequest(ValueError):
    pass


class _Abort(Exception):
    """Raised inside a stream to make the handler drop the connection (with SO_LINGER 0: a RST)."""


def parse_fault(fault: str) -> tuple[str, int]:
    """``"reset_after:3"`` -> ``("reset_after", 3)``; ``"http_500"`` -> ``("http_500", 0)``."""
    kind, _, n = str(fault).partition(":")
    if kind not in FAULTS:
        raise BadRequest(f"unknown fault {fault!r}; one of {', '.join(FAULTS)} (with ':N' where it ends in _after)")
    if kind.endswith("_after"):
        try:
            count = int(n)
        except ValueError:
            raise BadRequest(f"fault {fault!r} needs a chunk count, e.g. {kind}:3") from None
        if count < 0:
            raise BadRequest(f"fault {fault!r}: the chunk count must be >= 0")
        return ("error_event" if kind == "error_event_after" else kind), count
    if n:
        raise BadRequest(f"fault {fault!r} takes no count")
    return kind, 0


def validate(cfg: dict[str, Any]) -> dict[str, Any]:
    unknown = set(cfg) - set(DEFAULTS)
    if unknown:
        raise BadRequest(f"unknown ref keys {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    for key in ("ttft_s", "gap_s", "stall_once_s", "pause_once_s", "image_ms_per_kpx"):
        if not isinstance(cfg[key], (int, float)) or cfg[key] < 0:
            raise BadRequest(f"ref.{key} must be a number >= 0, got {cfg[key]!r}")
    tpc = cfg["tokens_per_chunk"]
    tpc = list(tpc) if isinstance(tpc, (list, tuple)) else [tpc]
    if not tpc or not all(isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in tpc):
        raise BadRequest("ref.tokens_per_chunk must be an int >= 1 or a non-empty list of them, "
                         f"got {cfg['tokens_per_chunk']!r}")
    cfg["tokens_per_chunk"] = tpc
    if cfg["usage"] not in USAGE_MODES:
        raise BadRequest(f"ref.usage must be one of {USAGE_MODES}, got {cfg['usage']!r}")
    if cfg["framing"] not in FRAMINGS:
        raise BadRequest(f"ref.framing must be one of {FRAMINGS}, got {cfg['framing']!r}")
    if not isinstance(cfg["patch_last"], dict):
        raise BadRequest("ref.patch_last must be an object of dotted paths to values")
    cfg["fault"] = parse_fault(cfg["fault"])
    return cfg


def patch(obj: dict, dotted: str, value: Any) -> None:
    """Set ``obj["a"][0]["b"] = value`` for ``"a.0.b"``, creating objects on the way."""
    *path, last = dotted.split(".")
    for key in path:
        obj = obj[int(key)] if isinstance(obj, list) else obj.setdefault(key, {})
    if isinstance(obj, list):
        obj[int(last)] = value
    else:
        obj[last] = value


def chunk_sizes(max_tokens: int, pattern: list[int]) -> list[int]:
    sizes, left = [], max_tokens
    for k in itertools.cycle(pattern):
        if left <= 0:
            break
        sizes.append(min(k, left))
        left -= sizes[-1]
    return sizes


def token_text(start: int, n: int) -> str:
    return "".join(f" w{k}" for k in range(start, start + n))


def word_ids(text: str) -> list[int]:
    return [zlib.crc32(w.encode()) % 32000 for w in text.split()]


class _Handler(WSGIHandler):
    """pywsgi handler: TCP_NODELAY (a chunk is never held back for an ACK), the socket in the environ
    (for ``reset_after``), and a quiet connection drop when a stream aborts on purpose."""

    def __init__(self, sock, address, server, rfile=None):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        super().__init__(sock, address, server, rfile)

    def read_requestline(self):
        line = super().read_requestline()
        # The server's clock for "request received": as soon as its first line is in, before headers and body
        # are parsed, so the oracle's TTFT does not hide the server's own parsing.
        self.t_line = time.perf_counter()
        return line

    def get_environ(self):
        environ = super().get_environ()
        environ["refserver.t_recv"] = getattr(self, "t_line", None)
        environ["refserver.socket"] = self.socket
        environ["refserver.handler"] = self
        return environ

    def finalize_headers(self):
        super().finalize_headers()
        if self.environ.get("refserver.drop_connection"):
            self.close_connection = True
        if self.environ.get("refserver.close_delimited"):
            self.response_use_chunked = False
            self.response_headers = [(k, v) for k, v in self.response_headers if k.lower() != b"transfer-encoding"]
            self.close_connection = True

    def handle_error(self, t, v, tb):
        if isinstance(v, _Abort):
            self.close_connection = True
            return
        super().handle_error(t, v, tb)


class RefServer:
    """The WSGI application."""

    def __init__(self, defaults: dict[str, Any] | None = None, model: str = MODEL, models_answer: str = "object"):
        self.defaults = dict(DEFAULTS, **(defaults or {}))
        validate(dict(self.defaults))
        self.model = model
        self.models_answer = models_answer  # how /v1/models answers: OpenAI's object, a bare list, or garbage
        self.completions_seen = 0
        self.paused_until = 0.0
        self.log: OrderedDict[str, dict] = OrderedDict()
        self._anon = itertools.count()

    # -- plumbing -------------------------------------------------------------------------------
    @staticmethod
    def _json(start_response, status: str, obj: Any) -> list[bytes]:
        body = json.dumps(obj).encode()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    @staticmethod
    def _read_json(environ) -> dict:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        raw = environ["wsgi.input"].read(length) if length else environ["wsgi.input"].read()
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            raise BadRequest("the request body is not JSON") from None
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        return body

    def __call__(self, environ, start_response):
        t_recv = environ.get("refserver.t_recv") or time.perf_counter()
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        try:
            if path == "/health" and method == "GET":
                return self._json(start_response, "200 OK", {"status": "ok"})
            if path == "/v1/models" and method == "GET":
                entry = {"id": self.model, "object": "model", "owned_by": "locust-llm-refserver"}
                answer = {"list": [entry, "odd"], "garbage": ["not", {"an": "entry"}, 7]}.get(
                    self.models_answer, {"object": "list", "data": [entry]})
                return self._json(start_response, "200 OK", answer)
            if path == "/tokenize" and method == "POST":
                body = self._read_json(environ)
                return self._json(start_response, "200 OK", {"tokens": word_ids(str(body.get("content", "")))})
            if path.startswith("/ref/log/") and method == "GET":
                entry = self.log.get(path[len("/ref/log/"):])
                if entry is None:
                    return self._json(start_response, "404 Not Found",
                                      {"error": {"message": f"no stream logged as {path[9:]!r}"}})
                return self._json(start_response, "200 OK", entry)
            if path == "/ref/logs" and method == "GET":
                return self._json(start_response, "200 OK", {"logs": list(self.log.values())})
            if path == "/ref/logs" and method == "POST":
                ids = self._read_json(environ).get("ids") or []
                return self._json(start_response, "200 OK", {"logs": {str(i): self.log.get(str(i)) for i in ids}})
            if path in ("/v1/completions", "/v1/chat/completions") and method == "POST":
                body = self._read_json(environ)
                api = "chat" if path.endswith("chat/completions") else "completions"
                return self._completion(environ, start_response, body, api, t_recv)
            return self._json(start_response, "404 Not Found", {"error": {"message": f"no route {method} {path}"}})
        except (BadRequest, BadContent) as exc:
            return self._json(start_response, "400 Bad Request",
                              {"error": {"message": str(exc), "type": "BadRequestError", "code": 400}})

    # -- completions ----------------------------------------------------------------------------
    def _completion(self, environ, start_response, body: dict, api: str, t_recv: float):
        ref = body.get("ref") or {}
        if not isinstance(ref, dict):
            raise BadRequest("ref must be a JSON object")
        cfg = validate(dict(self.defaults, **ref))
        if not body.get("stream"):
            raise BadRequest("the reference server only streams; send \"stream\": true")
        max_tokens = body.get("max_tokens", 16)
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0:
            raise BadRequest(f"max_tokens must be an int >= 0, got {max_tokens!r}")
        prompt, images = request_text(api, body)
        self.completions_seen += 1
        stall = cfg["stall_once_s"] if self.completions_seen == 1 else 0.0
        if self.completions_seen == 1 and cfg["pause_once_s"]:
            self.paused_until = t_recv + cfg["pause_once_s"]
        stream_id = str(cfg["id"]) if cfg["id"] is not None else f"anon-{next(self._anon)}"
        delay = image_delay_s(images, cfg["image_ms_per_kpx"])
        entry = {"id": stream_id, "api": api, "t_recv": t_recv, "max_tokens": max_tokens, "stall_s": stall,
                 "fault": ":".join(map(str, cfg["fault"])), "chunks": [], "complete": False, "images": images,
                 "image_delay_s": delay}
        entry["client"] = environ.get("REMOTE_ADDR")  # which host sent it (the cluster test's network namespaces)
        self.log[stream_id] = entry
        while len(self.log) > LOG_SIZE:
            self.log.popitem(last=False)
        fault, _ = cfg["fault"]
        if fault == "http_500":
            entry["complete"] = True
            return self._json(start_response, "500 Internal Server Error", {"error": {
                "message": "refserver fault http_500", "type": "InternalServerError", "code": 500}})
        if fault == "http_500_endless":
            start_response("500 Internal Server Error", [("Content-Type", "text/plain")])
            entry["complete"] = True
            return _endless()
        headers = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]
        if fault == "truncate_after":
            headers.append(("Connection", "close"))
        if cfg["drop_connection"]:
            environ["refserver.drop_connection"] = True
        if cfg["framing"] == "close":
            environ["refserver.close_delimited"] = True
            headers.append(("Connection", "close"))
        write = start_response("200 OK", headers)
        return _Stream(self, environ, write, cfg, api, max_tokens, len(prompt.split()), t_recv + stall + delay, entry)


def _endless() -> Iterator[bytes]:
    """An error body that never ends (a misbehaving proxy): the client must stop reading it."""
    while True:
        yield b"error " * 1024
        gevent.sleep(0)


class _Stream:
    """The body of one streaming response: a generator, so that pywsgi writes each event as one HTTP chunk."""

    def __init__(self, server: RefServer, environ, write, cfg, api, max_tokens, prompt_tokens, t0, entry):
        self.server, self.environ, self.write, self.cfg = server, environ, write, cfg
        self.api, self.max_tokens, self.prompt_tokens, self.t0, self.entry = api, max_tokens, prompt_tokens, t0, entry
        self.created = int(time.time())
        self.rid = ("chatcmpl-" if api == "chat" else "cmpl-") + entry["id"]

    def __iter__(self) -> Iterator[bytes]:
        return self._events()

    # one SSE event: the JSON without its closing brace, then ref_t stamped as late as possible
    def _frame(self, obj: dict, tokens: int, kind: str) -> bytes:
        text = json.dumps(obj, separators=(",", ":"))
        t = time.perf_counter()
        self.entry["chunks"].append([t, tokens, kind])
        return b"data: " + text[:-1].encode() + b',"ref_t":' + repr(t).encode() + b"}\n\n"

    def _raw(self, data: bytes, kind: str) -> bytes:
        self.entry["chunks"].append([time.perf_counter(), 0, kind])
        return data

    def _base(self) -> dict:
        obj = {"id": self.rid, "object": "chat.completion.chunk" if self.api == "chat" else "text_completion",
               "created": self.created, "model": self.server.model}
        if self.cfg["llamacpp"]:
            obj["system_fingerprint"] = "refserver-llamacpp"
        return obj

    def _choice(self, text: str | None, finish: str | None, role: bool = False) -> dict:
        if self.api == "chat":
            delta: dict[str, Any] = {}
            if role:
                delta["role"] = "assistant"
            if text is not None:
                delta["content"] = text
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}

    def _usage(self, completion: int) -> dict:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": completion,
                "total_tokens": self.prompt_tokens + completion}

    def _sleep_until(self, t: float) -> None:
        delay = max(t, self.server.paused_until) - time.perf_counter()
        if delay > 0:
            gevent.sleep(delay)

    def _events(self) -> Iterator[bytes]:
        cfg, entry = self.cfg, self.entry
        fault, after = cfg["fault"]
        llamacpp = cfg["llamacpp"]
        continuous = cfg["usage"] == "continuous" and not llamacpp
        if cfg["headers_early"]:
            self.write(b"")  # headers now, as vLLM and SGLang do
        sizes = [] if fault == "empty" else chunk_sizes(self.max_tokens, [1] if llamacpp else cfg["tokens_per_chunk"])
        first_at = self.t0 + cfg["ttft_s"]
        if fault == "empty":
            self._sleep_until(first_at)
            obj = self._base()
            obj["choices"] = [self._choice("", "stop", role=self.api == "chat")]
            if cfg["usage"] != "none" or llamacpp:
                obj["usage"] = self._usage(0)
            yield self._frame(obj, 0, "finish")
            yield self._raw(b"data: [DONE]\n\n", "done")
            entry["complete"] = True
            return
        sent = 0
        for j, n in enumerate(sizes):
            self._sleep_until(first_at + j * cfg["gap_s"])
            if fault != "none" and j == after:
                yield from self._fault(fault)
                return
            if j == 0 and self.api == "chat" and not llamacpp:
                obj = self._base()
                obj["choices"] = [self._choice("", None, role=True)]
                if continuous:
                    obj["usage"] = self._usage(0)
                yield self._frame(obj, 0, "role")
            last = j == len(sizes) - 1
            finish = "length" if last and not llamacpp and fault != "truncate_after" else None
            obj = self._base()
            obj["choices"] = [self._choice(token_text(sent, n), finish)]
            sent += n
            if continuous:
                obj["usage"] = self._usage(sent)
            if last:
                for dotted, value in cfg["patch_last"].items():
                    patch(obj, dotted, value)
            yield self._frame(obj, n, "token")
        if fault != "none":
            # the fault comes after the last token chunk, in the next time slot
            self._sleep_until(first_at + len(sizes) * cfg["gap_s"])
            yield from self._fault(fault)
            return
        if llamacpp:
            obj = self._base()
            obj["choices"] = [self._choice(None if self.api == "chat" else "", "length")]
            obj["usage"] = self._usage(sent)
            first = next((c[0] for c in entry["chunks"] if c[1] > 0), self.t0)
            obj["timings"] = {"prompt_n": self.prompt_tokens, "predicted_n": sent,
                              "predicted_ms": (time.perf_counter() - first) * 1e3,
                              "draft_n": cfg["draft_n"], "draft_n_accepted": cfg["draft_accepted"]}
            yield self._frame(obj, 0, "final")
        elif cfg["usage"] in ("continuous", "final"):
            obj = self._base()
            obj["choices"] = []
            obj["usage"] = self._usage(sent)
            yield self._frame(obj, 0, "usage")
        yield self._raw(b"data: [DONE]\n\n", "done")
        entry["complete"] = True

    def _fault(self, fault: str) -> Iterator[bytes]:
        if fault == "truncate_after":
            self.entry["chunks"].append([time.perf_counter(), 0, "truncate"])
            return  # the body ends here (chunked terminator), then the connection closes
        if fault == "malformed_after":
            yield self._raw(b'data: {"choices": [{"text": " w\n\n', "malformed")
            yield self._raw(b"data: [DONE]\n\n", "done")
            return
        if fault == "error_event":
            obj = {"error": {"message": "refserver fault error_event", "type": "InternalServerError", "code": 500}}
            yield self._frame(obj, 0, "error")
            yield self._raw(b"data: [DONE]\n\n", "done")
            return
        if fault == "reset_after":
            sock = self.environ["refserver.socket"]
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.entry["chunks"].append([time.perf_counter(), 0, "reset"])
            raise _Abort("refserver fault reset_after")
        if fault == "huge_event_after":
            yield self._raw(b"data: " + b"x" * HUGE_EVENT_BYTES + b"\n\n", "huge")
            yield self._raw(b"data: [DONE]\n\n", "done")
            return
        if fault == "close_after":
            self.entry["chunks"].append([time.perf_counter(), 0, "close"])
            raise _Abort("refserver fault close_after")  # the handler closes the socket: a FIN, no terminator
        raise AssertionError(fault)


def make_server(port: int, defaults: dict[str, Any] | None = None, model: str = MODEL,
                access_log: bool = False, models_answer: str = "object", bind: str = "127.0.0.1") -> WSGIServer:
    return WSGIServer((bind, port), RefServer(defaults, model, models_answer), handler_class=_Handler,
                      log=sys.stderr if access_log else None, backlog=1024)

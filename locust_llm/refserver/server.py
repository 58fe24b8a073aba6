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
``GET /v1/models`` (with ``max_model_len`` when ``--max-model-len`` is given), ``GET /metrics``, ``POST /tokenize``
(``{"content": text}`` -> one token per whitespace-separated word), ``GET /ref/log/<id>``, ``POST /ref/logs``
(``{"ids": [...]}`` -> ``{"logs": {id: log or null}}``),
``GET /ref/logs`` (every logged stream, oldest first), ``GET /ref/received`` (every request this server received but
those to ``/ref/``, counted by ``"METHOD path"``, as a server's own request count). A stream's log has the server's
own stamps:
``t_recv`` (request received), ``t_slot`` (generation began, after any wait for a slot) and each chunk's write
time, kind and token count.

Capacity, server-wide (``--slots K``; 0, the default, is unlimited): at most K streams generate at once, like
llama.cpp's ``-np`` slots, so that queueing can be played and measured. A request that arrives while K streams
are active waits, first come first served, for a free slot, and its TTFT delay starts only then: queueing shows up
as TTFT, as on a full real server. A stream holds its slot until it ends in any way (done, fault, client gone);
an error answer without a stream (``http_500``) takes none.

Behaviour per request, through an extra body field ``"ref": {...}`` (defaults from the CLI flags):

- ``ttft_s``: delay from receiving the request (or from getting a slot, if it waited) to the first token chunk.
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
- ``usage_factor``: every usage count the stream reports is the true one times this (default 1), to play a
  server whose counts are consistent with each other but not with the text it sends.
- ``patch_last``: ``{"dotted.path": value}`` set in the last token chunk's JSON (``"choices.0.finish_reason"``,
  ``"usage.prompt_tokens"``, ``"timings.draft_n"``), to play a server that sends odd values.
- ``image_ms_per_kpx``: prefill time per thousand pixels of a chat request's images, a known encode cost (their
  format is checked, a malformed part is a 400, and the log lists each image: ``images``).
- ``prefill_s_per_token``: prefill time per prompt token the prompt cache did not hold, added to the TTFT delay.
- ``reasoning_tokens``: the first N output tokens are reasoning, streamed before the answer (chat:
  ``delta.reasoning_content``, or ``delta.reasoning`` with ``reasoning_format: "reasoning"``; with
  ``reasoning_format: "think_tags"`` the reasoning is content between ``<think>`` and ``</think>``, one token each,
  on either API). A token chunk across the boundary carries both. The log says ``reasoning_tokens`` and
  ``t_first_answer``: the server's stamp of the chunk with the first answer token (None when none came: the
  reasoning used all of ``max_tokens``); reasoning chunks are logged as kind ``reasoning``.
- ``reasoning_details``: the usage also says ``completion_tokens_details.reasoning_tokens`` (OpenAI's shape).
- ``unique_answers``: token ``k`` of the n-th completion the server receives is `` w<k>s<n>``, so every answer is
  its own (a conversation's history can then be traced back to the stream that produced each answer).
- ``id``: a name for the stream's server-side log.

Prompt cache, server-wide (``--cache-block B``, 16 by default, 0 off; ``cache``): a block prefix cache of whole
``B``-word blocks, salted by the request's ``cache_salt``, looked up and filled when a stream's generation begins.
Each usage reports ``prompt_tokens_details.cached_tokens`` (llama.cpp mode: ``timings.cache_n``, and ``prompt_n``
the tokens computed), the stream's log ``prompt_tokens``, ``cached_tokens`` and ``prompt_hash`` (the client's
fingerprint of the prompt text), and ``GET /metrics`` the counters in
one engine's names (``--metrics-style vllm|sglang|llamacpp``; with the cache off, ``/metrics`` is a 404, as on a
server that exports nothing).

The defaults, the ``ref`` checks and the token schedule live in ``config``.

Output length is the body's ``max_tokens`` (default 16). Token ``k`` of a stream is the text
``" w<k>"`` (``<think>``/``</think>`` for the tags), so a whitespace tokenizer counts it exactly.

The log of a stream also holds what the request asked: ``prompt`` (a chat request's texts joined), ``messages``
(chat: each message's role and text), ``headers`` (the request's ``X-`` headers, names in lower case) and
``answer`` (the text the stream sent).

It uses gevent primitives directly (``gevent.pywsgi``, ``gevent.sleep``) and never blocks on the
standard library, so no monkey-patching is needed and one process serves hundreds of streams.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import struct
import sys
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Iterator
from typing import Any

import gevent
from gevent.event import Event
from gevent.pywsgi import WSGIHandler, WSGIServer

from ..workload.items import prompt_hash
from .cache import PrefixCache
from .config import (
    DEFAULTS,
    HUGE_EVENT_BYTES,
    LOG_SIZE,
    MODEL,
    BadRequest,
    chunk_sizes,
    patch,
    token_parts,
    validate,
    word_ids,
)
from .images import BadContent, chat_content, image_delay_s, request_text

__all__ = ["make_server"]


class _Abort(Exception):
    """Raised inside a stream to make the handler drop the connection (with SO_LINGER 0: a RST)."""


class _Slots:
    """At most ``k`` streams generate at once (0: no cap); the others wait in arrival order. A freed slot is handed
    straight to the oldest waiter, so a request that arrives just then cannot jump the queue (strict FIFO, which a
    bare semaphore does not promise). gevent events only: waiting never blocks the process."""

    def __init__(self, k: int):
        if not isinstance(k, int) or isinstance(k, bool) or k < 0:
            raise BadRequest(f"slots must be an int >= 0, got {k!r}")
        self.k, self.active = k, 0
        self.waiting: deque[Event] = deque()

    def acquire(self) -> bool:
        """Take a slot, waiting for one if all are busy; True when it had to wait."""
        if not self.k:
            return False
        if self.active < self.k and not self.waiting:
            self.active += 1
            return False
        handed = Event()
        self.waiting.append(handed)
        try:
            handed.wait()
        except BaseException:  # killed while queued: leave the queue, or pass on a slot handed over meanwhile
            if handed.is_set():
                self.release()
            else:
                self.waiting.remove(handed)
            raise
        return True

    def release(self) -> None:
        if not self.k:
            return
        if self.waiting:
            self.waiting.popleft().set()  # the slot changes hands; ``active`` stays
        else:
            self.active -= 1


class _Handler(WSGIHandler):
    """pywsgi handler: TCP_NODELAY (a chunk is never held back for an ACK), the socket in the environ
    (for ``reset_after``), and a quiet connection drop when a stream aborts on purpose."""

    def __init__(self, sock, address, server, rfile=None):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
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

    def __init__(
        self,
        defaults: dict[str, Any] | None = None,
        model: str = MODEL,
        models_answer: str = "object",
        slots: int = 0,
        cache: PrefixCache | None = None,
        max_model_len: int | None = None,
    ):
        self.max_model_len = max_model_len  # the context /v1/models states, as vLLM does (None: not stated)
        self.defaults = dict(DEFAULTS, **(defaults or {}))
        validate(dict(self.defaults))
        self.model = model
        self.slots = _Slots(slots)  # server-wide: at most this many streams generate at once (0: unlimited)
        self.cache = cache if cache is not None else PrefixCache()  # server-wide prompt cache, counted (cache.py)
        self.models_answer = models_answer  # how /v1/models answers: OpenAI's object, a bare list, or garbage
        self.completions_seen = 0
        self.received: Counter[str] = Counter()  # every request but /ref/*, by "METHOD path" (GET /ref/received)
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
        if not path.startswith("/ref/"):  # the oracle's own endpoints are not the server's traffic
            self.received[f"{method} {path}"] += 1
        try:
            if path == "/ref/received" and method == "GET":
                return self._json(start_response, "200 OK", dict(self.received))
            if path == "/health" and method == "GET":
                return self._json(start_response, "200 OK", {"status": "ok"})
            if path == "/v1/models" and method == "GET":
                entry = {"id": self.model, "object": "model", "owned_by": "locust-llm-refserver"}
                if self.max_model_len:
                    entry["max_model_len"] = self.max_model_len
                answer = {"list": [entry, "odd"], "garbage": ["not", {"an": "entry"}, 7]}.get(
                    self.models_answer, {"object": "list", "data": [entry]}
                )
                return self._json(start_response, "200 OK", answer)
            if path == "/metrics" and method == "GET" and self.cache.reported:
                body = self.cache.metrics_text(self.model).encode()
                start_response(
                    "200 OK", [("Content-Type", "text/plain; version=0.0.4"), ("Content-Length", str(len(body)))]
                )
                return [body]
            if path == "/tokenize" and method == "POST":
                body = self._read_json(environ)
                return self._json(start_response, "200 OK", {"tokens": word_ids(str(body.get("content", "")))})
            if path.startswith("/ref/log/") and method == "GET":
                entry = self.log.get(path[len("/ref/log/") :])
                if entry is None:
                    return self._json(
                        start_response, "404 Not Found", {"error": {"message": f"no stream logged as {path[9:]!r}"}}
                    )
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
            return self._json(
                start_response,
                "400 Bad Request",
                {"error": {"message": str(exc), "type": "BadRequestError", "code": 400}},
            )

    # -- completions ----------------------------------------------------------------------------
    def _completion(self, environ, start_response, body: dict, api: str, t_recv: float):
        ref = body.get("ref") or {}
        if not isinstance(ref, dict):
            raise BadRequest("ref must be a JSON object")
        cfg = validate(dict(self.defaults, **ref))
        if not body.get("stream"):
            raise BadRequest('the reference server only streams; send "stream": true')
        max_tokens = body.get("max_tokens", 16)
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0:
            raise BadRequest(f"max_tokens must be an int >= 0, got {max_tokens!r}")
        prompt, images = request_text(api, body)
        messages = [{"role": str(m.get("role")), "content": chat_content([m])[0]} for m in body.get("messages") or []]
        self.completions_seen += 1
        stall = cfg["stall_once_s"] if self.completions_seen == 1 else 0.0
        if self.completions_seen == 1 and cfg["pause_once_s"]:
            self.paused_until = t_recv + cfg["pause_once_s"]
        stream_id = str(cfg["id"]) if cfg["id"] is not None else f"anon-{next(self._anon)}"
        delay = image_delay_s(images, cfg["image_ms_per_kpx"])
        entry = {
            "id": stream_id,
            "api": api,
            "t_recv": t_recv,
            "max_tokens": max_tokens,
            "stall_s": stall,
            "fault": ":".join(map(str, cfg["fault"])),
            "chunks": [],
            "complete": False,
            "images": images,
            "image_delay_s": delay,
            "t_slot": None,
            "prompt_hash": prompt_hash(prompt),  # as the client's records fingerprint what they sent
            "reasoning_tokens": min(cfg["reasoning_tokens"], max_tokens),
            "t_first_answer": None,
            "prompt": prompt,
            "messages": messages if api == "chat" else None,
            "headers": {
                key[5:].replace("_", "-").lower(): value for key, value in environ.items() if key.startswith("HTTP_X_")
            },
            "answer": "",
            "tag": f"s{self.completions_seen}" if cfg["unique_answers"] else "",
        }
        entry["client"] = environ.get("REMOTE_ADDR")  # which host sent it (the cluster test's network namespaces)
        self.log[stream_id] = entry
        while len(self.log) > LOG_SIZE:
            self.log.popitem(last=False)
        fault, _ = cfg["fault"]
        if fault == "http_500":
            entry["complete"] = True
            return self._json(
                start_response,
                "500 Internal Server Error",
                {"error": {"message": "refserver fault http_500", "type": "InternalServerError", "code": 500}},
            )
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
        if cfg["reasoning_tokens"] and api != "chat" and cfg["reasoning_format"] != "think_tags":
            raise BadRequest("reasoning deltas travel in chat chunks: use the chat API or reasoning_format think_tags")
        write = start_response("200 OK", headers)
        salt = body.get("cache_salt")
        return _Stream(
            self, environ, write, cfg, api, max_tokens, prompt, "" if salt is None else str(salt), stall + delay, entry
        )


def _endless() -> Iterator[bytes]:
    """An error body that never ends (a misbehaving proxy): the client must stop reading it."""
    while True:
        yield b"error " * 1024
        gevent.sleep(0)


class _Stream:
    """The body of one streaming response: a generator, so that pywsgi writes each event as one HTTP chunk.

    It holds one of the server's slots from its first step to its end, however it ends: pywsgi calls ``close()``
    when the client goes away (a failed write) and the generator's ``finally`` gives the slot back."""

    def __init__(self, server: RefServer, environ, write, cfg, api, max_tokens, prompt, salt, lead_s, entry):
        self.server, self.environ, self.write, self.cfg = server, environ, write, cfg
        self.api, self.max_tokens, self.entry = api, max_tokens, entry
        self.prompt, self.salt, self.prompt_tokens = prompt, salt, len(prompt.split())
        self.cached = 0  # prompt tokens the cache held when generation began
        self.lead_s = lead_s  # stall and image prefill before the TTFT delay
        self.t0 = entry["t_recv"] + lead_s
        self.created = int(time.time())
        self.rid = ("chatcmpl-" if api == "chat" else "cmpl-") + entry["id"]
        self._gen = self._slotted()

    def __iter__(self) -> Iterator[bytes]:
        return self._gen

    def close(self) -> None:
        self._gen.close()

    def _slotted(self) -> Iterator[bytes]:
        if self.cfg["headers_early"]:
            self.write(b"")  # headers now, as vLLM and SGLang do, even while queued for a slot
        waited = self.server.slots.acquire()
        try:
            self.entry["t_slot"] = time.perf_counter()
            if waited:  # queued: the TTFT delay starts when the slot is free, as a queued request's prefill does
                self.t0 = self.entry["t_slot"] + self.lead_s
            self.cached = self.server.cache.admit(self.prompt, self.salt)  # prefill begins: look up, then fill
            self.entry["prompt_tokens"], self.entry["cached_tokens"] = self.prompt_tokens, self.cached
            yield from self._events()
        finally:
            self.server.slots.release()

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
        obj = {
            "id": self.rid,
            "object": "chat.completion.chunk" if self.api == "chat" else "text_completion",
            "created": self.created,
            "model": self.server.model,
        }
        if self.cfg["llamacpp"]:
            obj["system_fingerprint"] = "refserver-llamacpp"
        return obj

    def _choice(self, text: str | None, finish: str | None, role: bool = False, reasoning: str = "") -> dict:
        if self.api == "chat":
            delta: dict[str, Any] = {}
            if role:
                delta["role"] = "assistant"
            if reasoning:
                delta[self.cfg["reasoning_format"]] = reasoning
            if text is not None and (text or not reasoning):
                delta["content"] = text
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}

    def _usage(self, completion: int) -> dict:
        completion = round(completion * self.cfg["usage_factor"])  # 1 unless playing a server that miscounts
        usage: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": self.prompt_tokens + completion,
        }
        if self.server.cache.reported:
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached}
        if self.cfg["reasoning_details"]:
            usage["completion_tokens_details"] = {"reasoning_tokens": min(completion, self.cfg["reasoning_tokens"])}
        return usage

    def _sleep_until(self, t: float) -> None:
        delay = max(t, self.server.paused_until) - time.perf_counter()
        if delay > 0:
            gevent.sleep(delay)

    def _events(self) -> Iterator[bytes]:
        cfg, entry = self.cfg, self.entry
        fault, after = cfg["fault"]
        llamacpp = cfg["llamacpp"]
        continuous = cfg["usage"] == "continuous" and not llamacpp
        sizes = [] if fault == "empty" else chunk_sizes(self.max_tokens, [1] if llamacpp else cfg["tokens_per_chunk"])
        first_at = self.t0 + cfg["ttft_s"] + (self.prompt_tokens - self.cached) * cfg["prefill_s_per_token"]
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
            thinking = cfg["reasoning_tokens"]
            reasoning, answer = token_parts(sent, n, thinking, cfg["reasoning_format"] == "think_tags", entry["tag"])
            entry["answer"] += answer
            obj["choices"] = [self._choice(answer, finish, reasoning=reasoning)]
            answers = sent + n > thinking
            sent += n
            if continuous:
                obj["usage"] = self._usage(sent)
            if last:
                for dotted, value in cfg["patch_last"].items():
                    patch(obj, dotted, value)
            frame = self._frame(obj, n, "token" if answers else "reasoning")
            if answers and entry["t_first_answer"] is None:
                entry["t_first_answer"] = entry["chunks"][-1][0]
            yield frame
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
            obj["timings"] = {
                "prompt_n": self.prompt_tokens - self.cached,
                "cache_n": self.cached,
                "predicted_n": sent,
                "predicted_ms": (time.perf_counter() - first) * 1e3,
                "draft_n": cfg["draft_n"],
                "draft_n_accepted": cfg["draft_accepted"],
            }
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


def make_server(
    port: int,
    defaults: dict[str, Any] | None = None,
    model: str = MODEL,
    access_log: bool = False,
    models_answer: str = "object",
    bind: str = "127.0.0.1",
    slots: int = 0,
    cache: PrefixCache | None = None,
    max_model_len: int | None = None,
) -> WSGIServer:
    return WSGIServer(
        (bind, port),
        RefServer(defaults, model, models_answer, slots, cache=cache, max_model_len=max_model_len),
        handler_class=_Handler,
        log=sys.stderr if access_log else None,
        backlog=1024,
    )

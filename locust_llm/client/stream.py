"""One streaming OpenAI-compatible request -> one ``RequestRecord``: sending and stamping only.

What the times include (docs/metrics.md, "What TTFT includes"): ``t_send`` is taken immediately before the request's
bytes are written to a connected socket (building them and connecting come before it; a new connection's
start is ``t_connect``); each chunk's time is taken immediately after the socket read that returned its last
byte. JSON decoding happens after the stamp; token accounting (``accounting``) after the stream has ended.
"""

from __future__ import annotations

import json
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

import gevent

from ..fmt import shown
from ..records import ErrorClass, RequestRecord, now
from ..scenario import LoadSpec, Timeouts
from ..workload.items import PromptItem
from . import ledger
from .accounting import SUSPECT_FACTOR, SUSPECT_SLACK, Event, Split, account, answer_text, event_text
from .engines import OMITS_ZERO_CACHED, PATHS, auth_headers
from .sse import EventTooLarge, SSEParser
from .transport import Body, Connection, ResponseHead, Target, TransportError, build_request, tls_context
from .usage import seen_in

__all__ = ["RequestSpec", "StreamingClient"]

PREPARED_MAX = 512  # request bytes kept per client (prompts come from a pool of a few dozen)
PREPARED_MAX_BYTES = 32 << 20  # and at most this much of them: requests with images can be megabytes each
DONE_DRAIN_S = 0.05  # after [DONE], how long to wait for the end of the body before dropping the connection
WHOLE_ANSWER_BYTES = 1 << 20  # of a JSON answer to a streaming request, read to say what it was

DEFAULT_TIMEOUTS = Timeouts()


@dataclass
class RequestSpec:
    prompt: str
    max_tokens: int
    api: str = "completions"
    model: str | None = None
    temperature: float = 0.0
    ignore_eos: bool = True
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    images: tuple[str, ...] = ()  # data URLs sent after the text, as OpenAI image_url parts (chat only)
    # A conversation's whole history (chat only): sent as the messages instead of one user message of ``prompt``.
    messages: tuple[dict[str, str], ...] | None = None
    headers: tuple[tuple[str, str], ...] = ()  # per-request headers (a conversation's session header)

    @classmethod
    def of_item(
        cls,
        item: PromptItem,
        load: LoadSpec,
        model: str | None,
        extra: dict,
        seed: int | None = None,
        messages: tuple[dict[str, str], ...] | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ):
        """The request the load sends for a workload item: its prompt, images and output length, the load's API and
        sampling, the engine's ``extra`` body fields; in a conversation, its history (``messages``) and session
        ``headers``."""
        return cls(
            prompt=item.prompt,
            max_tokens=item.max_tokens,
            api=load.api,
            model=model or None,
            temperature=load.temperature,
            ignore_eos=load.ignore_eos,
            seed=seed,
            extra=extra,
            images=tuple(i.url for i in item.images or ()),
            messages=messages,
            headers=headers,
        )

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stream": True,
            # vLLM/SGLang: cumulative usage on every chunk, so tokens per chunk are exact.
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        if self.model:
            body["model"] = self.model
        if self.ignore_eos:
            body["ignore_eos"] = True
        if self.seed is not None:
            body["seed"] = self.seed
        if self.api == "chat" and self.images:
            body["messages"] = [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": self.prompt}]
                    + [{"type": "image_url", "image_url": {"url": url}} for url in self.images],
                }
            ]
        elif self.api == "chat" and self.messages is not None:
            body["messages"] = list(self.messages)
        elif self.api == "chat":
            body["messages"] = [{"role": "user", "content": self.prompt}]
        else:
            body["prompt"] = self.prompt
        body.update(self.extra)
        return body

    def key(self) -> tuple:
        return (
            self.prompt,
            self.max_tokens,
            self.api,
            self.model,
            self.temperature,
            self.ignore_eos,
            self.seed,
            repr(self.extra),
            self.images,
        )


def error_text(head: ResponseHead, body: str) -> str:
    """An error status in words: a redirect names where it points (redirects are not followed: the extra round
    trip would be in every TTFT), a refusal its Retry-After."""
    text = f"HTTP {head.status}: {body[:400]}"
    if 300 <= head.status < 400:
        location = head.headers.get("location", "")
        text = (
            f"HTTP {head.status} redirect to {location[:200] or '(no Location)'}: redirects are not followed; "
            f"point --host at the server itself. {body[:200]}"
        )
    if head.headers.get("retry-after"):
        text += f" (Retry-After: {head.headers['retry-after'][:40]})"
    return text


def retry_after_s(value: str | None) -> float | None:
    """``Retry-After`` in seconds: a number of seconds, or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        return max(parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _not_streamed(raw: bytes) -> _Failed:
    """A whole JSON answer to a streaming request: what it says, and that it was not streamed (no token times)."""
    head = "the server did not stream (Content-Type application/json)"
    try:
        answer = json.loads(raw.decode("utf-8"))
    except ValueError:
        return _Failed(ErrorClass.NOT_STREAMED, f"{head}, and its body is not JSON: {raw[:200]!r}")
    if isinstance(answer, dict) and "error" in answer and not answer.get("choices"):
        return _Failed(ErrorClass.SERVER_ERROR_EVENT, f"{head}: error {json.dumps(answer['error'])[:300]}")
    choices = answer.get("choices") if isinstance(answer, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    usage = answer.get("usage") if isinstance(answer, dict) and isinstance(answer.get("usage"), dict) else {}
    return _Failed(
        ErrorClass.NOT_STREAMED,
        f"{head}: a whole answer, finish_reason {choice.get('finish_reason')!r}, usage.completion_tokens "
        f"{usage.get('completion_tokens')!r}; without a stream there are no token times (does it honour "
        '"stream": true?)',
    )


def _chunk(raw: bytes) -> dict:
    """One event's JSON object; what it is instead names the fault (a server's bytes, escaped, in the message)."""
    try:
        chunk = json.loads(raw.decode())
    except UnicodeDecodeError as exc:
        raise _Failed(
            ErrorClass.MALFORMED, f"event is not UTF-8 (byte 0x{raw[exc.start]:02x} at {exc.start}): {raw[:200]!r}"
        ) from None
    except RecursionError:  # the C parser stops at the interpreter's recursion limit: the nesting is the fault
        raise _Failed(
            ErrorClass.MALFORMED,
            f"event nests deeper than the JSON parser allows ({sys.getrecursionlimit()} levels): {raw[:80]!r}",
        ) from None
    except ValueError:
        raise _Failed(ErrorClass.MALFORMED, f"event is not JSON: {raw[:200]!r}") from None
    if not isinstance(chunk, dict):
        raise _Failed(ErrorClass.MALFORMED, f"event is not a JSON object: {raw[:200]!r}")
    if "error" in chunk and not chunk.get("choices"):
        raise _Failed(ErrorClass.SERVER_ERROR_EVENT, f"server sent an error event: {json.dumps(chunk['error'])[:400]}")
    return chunk


def _error_event(data: bytes) -> _Failed:
    """An SSE ``event: error``: its data quoted (escaped), whatever it holds."""
    text = data.decode("utf-8", "replace")
    return _Failed(ErrorClass.SERVER_ERROR_EVENT, f"server sent an error event (event: error): {shown(text, 400)}")


# Past this many events a stream has gone on beyond what was asked for: each event that carries text carries at
# least one token, so a server that honours max_tokens sends at most max_tokens of them (plus a few without text:
# the role, the usage, the finish reason). The factor and slack are the usage check's (``accounting``): a server
# may split a token's text over several events.
OVERRUN_FACTOR = SUSPECT_FACTOR
OVERRUN_SLACK = SUSPECT_SLACK
# Events without text are bounded too (a server may send empty chunks forever, each resetting the idle clock): an
# honest stream sends a few of them around its tokens, never several per event with text.
OVERRUN_EVENTS_PER_TEXT = 4


def overrun_after(max_tokens: int) -> int:
    """Events after which a stream asked for ``max_tokens`` is checked for having gone past them."""
    return int(OVERRUN_FACTOR * max_tokens) + OVERRUN_SLACK if max_tokens > 0 else 1 << 62


def _overran(texts: int, seen: int, last: Event, max_tokens: int) -> str | None:
    """Why a stream of ``seen`` events so far, ``texts`` of them with text, ``last`` the latest, is past
    ``max_tokens`` (None when it is not): more events with text, or a larger cumulative usage, than
    ``overrun_after`` allows, or more events in all than ``OVERRUN_EVENTS_PER_TEXT`` times that."""
    limit = overrun_after(max_tokens)
    usage = last.data.get("usage")
    counted = usage.get("completion_tokens") if isinstance(usage, dict) else None
    past_usage = isinstance(counted, (int, float)) and counted >= limit
    if texts < limit and not past_usage and seen < OVERRUN_EVENTS_PER_TEXT * limit:
        return None
    return (
        f"suspect usage: the stream went on past max_tokens {max_tokens} ({texts} events with text of {seen}"
        + (f", usage.completion_tokens {counted!r}" if counted is not None else "")
        + f"; the client stops reading at {limit} with text: {OVERRUN_FACTOR:g} x max_tokens + {OVERRUN_SLACK},"
        + f" or {OVERRUN_EVENTS_PER_TEXT * limit} in all)"
    )


def _decoder(head: ResponseHead) -> Callable[[bytes], bytes] | None:
    """What undoes the body's ``Content-Encoding`` (None for identity); an encoding the client cannot read is
    refused by name. The client asks for identity; a server or proxy may compress anyway."""
    encoding = head.headers.get("content-encoding", "").strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip", "deflate"):
        return zlib.decompressobj(wbits=47).decompress  # 32 + 15: a gzip or a zlib header, told apart by zlib
    raise _Failed(
        ErrorClass.MALFORMED,
        f"the server sent Content-Encoding: {shown(encoding, 60)} although the client asked for identity "
        "(gzip and deflate are decoded; others are not)",
    )


class _Failed(Exception):
    def __init__(self, error_class: str, message: str):
        super().__init__(message)
        self.error_class = error_class


class _Expired(Exception):
    """Thrown into a stream's greenlet by its watchdog when a deadline has passed."""


class _Deadlines:
    """Which deadline applies now: the first token's, the idle gap's after the last event, or the total's."""

    def __init__(self, t_send: float, timeouts: Timeouts):
        self.timeouts = timeouts
        self.first_by = t_send + timeouts.first_token_s
        self.total_by = t_send + timeouts.total_s
        self.started = False  # an event has arrived
        self.last_event = t_send

    def next_wait(self) -> float:
        phase_end = self.last_event + self.timeouts.idle_s if self.started else self.first_by
        return max(min(phase_end, self.total_by) - now(), 0.0)

    def expired(self) -> _Failed:
        t = self.timeouts
        if now() >= self.total_by - 1e-3:
            return _Failed(ErrorClass.TOTAL_TIMEOUT, f"no complete response within {t.total_s:g} s")
        if not self.started:
            return _Failed(ErrorClass.FIRST_TOKEN_TIMEOUT, f"no first token within {t.first_token_s:g} s")
        return _Failed(ErrorClass.IDLE_TIMEOUT, f"no event for {t.idle_s:g} s")


class _Watchdog:
    """One timer per stream that ends a wait once its deadline has passed; an event that arrives in time only
    moves the deadline (the timer, when it fires early, re-arms for what is left)."""

    def __init__(self, deadlines: _Deadlines):
        self.deadlines = deadlines
        self.greenlet = gevent.getcurrent()
        self.timer = None
        self._arm()

    def _arm(self) -> None:
        self.timer = gevent.get_hub().loop.timer(self.deadlines.next_wait())
        self.timer.start(self._fire)

    def _fire(self) -> None:
        self.timer.close()
        if self.deadlines.next_wait() <= 0:
            self.greenlet.throw(_Expired())
        else:
            self._arm()

    def rearm(self) -> None:
        """The deadline moved earlier (the first event starts the idle clock): wait for the new one."""
        self.timer.close()
        self._arm()

    def cancel(self) -> None:
        self.timer.close()


class StreamingClient:
    """Streams completions from one server. One instance per Locust user; it keeps its idle keep-alive
    connections (one for a closed-loop user, one per stream in flight for an open-loop dispatcher)."""

    def __init__(
        self,
        base_url: str,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        verify_tls: bool = True,
        engine: str = "external",
        think_tags: bool = False,
    ):
        self.base_url = base_url.rstrip("/")
        self.target = Target.parse(self.base_url)
        self.timeouts = timeouts
        self.llamacpp = engine == "llamacpp"
        self.cache_zero = engine in OMITS_ZERO_CACHED
        self.think_tags = think_tags  # split <think>...</think> in the content into reasoning and answer
        self.headers = auth_headers(self.base_url)
        self.tls = tls_context(verify_tls) if self.target.scheme == "https" else None
        self.idle: list[Connection] = []
        self.prepared: dict[tuple, bytes] = {}
        self.prepared_bytes = 0
        self.retry_after: float | None = None  # the last answer's Retry-After, in seconds (a 429 or 503)

    def close(self) -> None:
        while self.idle:
            self.idle.pop().close()

    def connection(self) -> Connection:
        """An idle kept-alive connection, or a new (not yet connected) one."""
        return self.idle.pop() if self.idle else Connection(self.target, self.timeouts.connect_s, self.tls)

    def prepare(self, spec: RequestSpec) -> bytes:
        """The request's bytes, built once per distinct request and kept for the next time it is sent (a
        conversation's request, whose history is its own, is built each time)."""
        if spec.messages is not None or spec.headers:
            body = json.dumps(spec.body(), separators=(",", ":")).encode()
            return build_request(self.target, PATHS[spec.api], body, {**self.headers, **dict(spec.headers)})
        key = spec.key()
        data = self.prepared.get(key)
        if data is None:
            if len(self.prepared) >= PREPARED_MAX or self.prepared_bytes >= PREPARED_MAX_BYTES:
                self.prepared.clear()
                self.prepared_bytes = 0
            body = json.dumps(spec.body(), separators=(",", ":")).encode()
            data = self.prepared[key] = build_request(self.target, PATHS[spec.api], body, self.headers)
            self.prepared_bytes += len(data)
        return data

    def stream(self, spec: RequestSpec, record: RequestRecord, answer: list[str] | None = None) -> Split | None:
        """Send ``spec``, fill ``record`` in place. Never raises for request failures. ``answer``, when given,
        receives the answer's text (its content, as a conversation's history sends it back), after the stream.

        Returns a ``Split`` when a tokenizer can still make the per-chunk counts exact (see ``accounting``)."""
        record.api, record.max_tokens = spec.api, spec.max_tokens
        data = self.prepare(spec)
        events: list[Event] = []
        done = False
        body = None
        conn = self.connection()
        watchdog = None
        self.retry_after = None
        try:
            for attempt in (1, 2):
                started = self._connect(conn, record)
                if started is not None:
                    record.t_connect = started
                try:
                    record.t_send = self._expect(lambda: conn.send(data), None)
                    deadlines = _Deadlines(record.t_send, self.timeouts)
                    watchdog = _Watchdog(deadlines)
                    head, t_head = self._expect(conn.read_head, deadlines)
                    break
                except _Failed as exc:
                    # A kept-alive connection the server closed just as it was reused answers nothing: the request
                    # is sent again, once, on a new connection (its times are the second attempt's).
                    if (
                        attempt == 2
                        or started is not None
                        or exc.error_class != ErrorClass.CONNECTION_RESET
                        or not conn.unanswered
                    ):
                        raise
                    if watchdog is not None:
                        watchdog.cancel()
                    conn.close()
            record.http_status = head.status
            body = Body(conn, head, t_head)
            if head.status != 200:
                self.retry_after = retry_after_s(head.headers.get("retry-after"))
                text = body.read_error(min(deadlines.first_by, deadlines.total_by)).decode("utf-8", "replace")
                raise _Failed(ErrorClass.HTTP_ERROR, error_text(head, text))
            if head.headers.get("content-type", "").lower().startswith("application/json"):
                raise _not_streamed(body.read_error(min(deadlines.first_by, deadlines.total_by), WHOLE_ANSWER_BYTES))
            done = self._read_events(body, events, deadlines, watchdog, spec.max_tokens, _decoder(head))
        except _Failed as exc:
            record.error_class, record.error_message = exc.error_class, str(exc)[:500]
        except Exception as exc:  # anything else is still a counted failure, never a crash
            record.error_class, record.error_message = ErrorClass.CLIENT_ERROR, f"{type(exc).__name__}: {exc}"[:500]
        finally:
            record.t_done = now()
            if watchdog is not None:
                watchdog.cancel()
            if body is not None:
                body.finish()
            elif record.error_class is not None:
                conn.close()
            if conn.sock is not None:
                self.idle.append(conn)
        if answer is not None:
            answer.append(answer_text(events))
        for fact in seen_in(events):
            ledger.see(self.base_url, fact)
        return account(record, events, done, self.llamacpp, self.cache_zero, self.think_tags)

    @staticmethod
    def _connect(conn: Connection, record: RequestRecord) -> float | None:
        try:
            return conn.connect()
        except TransportError as exc:
            record.t_connect = conn.started  # a connection was tried: how long the failure took is known
            kind = {
                "refused": ErrorClass.CONNECT_ERROR,
                "connect_timeout": ErrorClass.CONNECT_TIMEOUT,
                "tls": ErrorClass.TLS_ERROR,
            }
            raise _Failed(kind.get(exc.kind, ErrorClass.CONNECTION_RESET), str(exc)) from None

    @staticmethod
    def _expect(call, deadlines: _Deadlines | None):
        try:
            return call()
        except _Expired:
            raise deadlines.expired() from None
        except TransportError as exc:
            if exc.kind == "timeout":
                raise deadlines.expired() from None
            error = {"protocol": ErrorClass.MALFORMED, "closed": ErrorClass.TRUNCATED}.get(
                exc.kind, ErrorClass.CONNECTION_RESET
            )
            raise _Failed(error, str(exc)) from None

    def _read_events(
        self,
        body: Body,
        events: list[Event],
        deadlines: _Deadlines,
        watchdog: _Watchdog,
        max_tokens: int,
        decoder: Callable[[bytes], bytes] | None = None,
    ) -> bool:
        """Read events until ``[DONE]`` (or the end of the body); return whether the stream ended properly.
        ``decoder``: undoes the body's Content-Encoding. A stream that goes on past ``overrun_after(max_tokens)``
        events is cut there (``_overran``)."""
        parser = SSEParser()
        pieces = body.pieces(lambda: None)  # the watchdog keeps the deadlines
        check_at = overrun_after(max_tokens)
        checked = texts = 0  # events looked at for text so far, and how many of them had it
        while True:
            piece = self._expect(lambda: next(pieces, None), deadlines)
            if piece is None:  # the body ended without [DONE]: properly only if a finish reason came
                if parser.error is not None:
                    raise _error_event(parser.error)
                return any(
                    isinstance(c, dict) and c.get("finish_reason")
                    for e in events
                    for c in (e.data.get("choices") if isinstance(e.data.get("choices"), list) else [])
                )
            payload, t = piece
            try:
                raw_events = parser.feed(payload if decoder is None else decoder(payload))
            except EventTooLarge as exc:
                raise _Failed(ErrorClass.MALFORMED, str(exc)) from None
            except zlib.error as exc:
                why = f"the body does not decode as its Content-Encoding: {exc}"
                raise _Failed(ErrorClass.MALFORMED, why) from None
            for raw in raw_events:
                if raw.strip() == b"[DONE]":
                    self._drain(body)
                    return True
                events.append(Event(t, _chunk(raw)))
                deadlines.last_event = t
                if not deadlines.started:
                    deadlines.started = True
                    watchdog.rearm()
            if parser.error is not None:
                raise _error_event(parser.error)
            if len(events) >= check_at:  # counted only now and then (each event once): nothing per event
                texts += sum(1 for e in events[checked:] if event_text(e))
                checked = len(events)
                why = _overran(texts, checked, events[-1], max_tokens)
                if why:
                    raise _Failed(ErrorClass.SUSPECT_USAGE, why)
                check_at = len(events) + OVERRUN_SLACK

    @staticmethod
    def _drain(body: Body) -> None:
        """Read the end of the body after ``[DONE]`` briefly, so the connection can serve the next request."""
        try:
            for _ in body.pieces(lambda: DONE_DRAIN_S):
                pass
        except TransportError:
            pass

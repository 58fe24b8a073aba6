"""One streaming OpenAI-compatible request -> one ``RequestRecord``: sending and stamping only.

Each SSE event is stamped with ``records.now()`` the moment sseclient-py yields it; JSON decoding happens
after the stamp and token accounting (``accounting``) after the stream ends.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

import gevent
import sseclient

from ..records import ErrorClass, RequestRecord, now
from ..scenario import Timeouts
from .accounting import Event, account
from .engines import PATHS
from .http import requests, session

__all__ = ["RequestSpec", "StreamingClient"]


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
        if self.api == "chat":
            body["messages"] = [{"role": "user", "content": self.prompt}]
        else:
            body["prompt"] = self.prompt
        body.update(self.extra)
        return body


class _PhaseTimeout(Exception):
    def __init__(self, error_class: str, seconds: float, what: str):
        super().__init__(f"no {what} within {seconds:g} s")
        self.error_class = error_class


class _MalformedEvent(Exception):
    pass


class _ServerErrorEvent(Exception):
    pass


class StreamingClient:
    """Streams completions from one server. One instance per Locust user (it owns a connection pool)."""

    def __init__(self, base_url: str, timeouts: Timeouts = Timeouts(), verify_tls: bool = True,
                 tokenize: Callable[[str], int] | None = None, pool_size: int = 16):
        self.base_url = base_url.rstrip("/")
        self.timeouts = timeouts
        self.tokenize = tokenize
        self.session = session(pool_size, verify_tls)
        self.session.headers["Accept"] = "text/event-stream"

    def close(self) -> None:
        self.session.close()

    def stream(self, spec: RequestSpec, record: RequestRecord) -> RequestRecord:
        """Send ``spec``, fill ``record`` in place and return it. Never raises for request failures."""
        t = self.timeouts
        record.api = spec.api
        record.max_tokens = spec.max_tokens
        events: list[Event] = []
        done = False
        response = None
        total = gevent.Timeout(t.total_s, _PhaseTimeout(ErrorClass.TOTAL_TIMEOUT, t.total_s, "complete response"))
        total.start()
        try:
            record.t_send = now()
            # The first-token deadline runs from the send, through the response headers (llama.cpp
            # sends them only with the first token), to the first event.
            with gevent.Timeout(t.first_token_s, _PhaseTimeout(ErrorClass.FIRST_TOKEN_TIMEOUT, t.first_token_s,
                                                               "first token")):
                response = self.session.post(self.base_url + PATHS[spec.api], json=spec.body(), stream=True,
                                             timeout=(t.connect_s, max(t.first_token_s, t.idle_s)))
            record.http_status = response.status_code
            if response.status_code != 200:
                record.error_class = ErrorClass.HTTP_ERROR
                record.error_message = f"HTTP {response.status_code}: {response.text[:500]}"
                return record
            done = self._read_events(response, events, record.t_send + t.first_token_s)
        except _PhaseTimeout as exc:
            record.error_class, record.error_message = exc.error_class, str(exc)
        except requests.exceptions.ConnectTimeout as exc:
            record.error_class, record.error_message = ErrorClass.CONNECT_TIMEOUT, str(exc)[:500]
        except requests.exceptions.ReadTimeout as exc:
            record.error_class = ErrorClass.FIRST_TOKEN_TIMEOUT if not events else ErrorClass.IDLE_TIMEOUT
            record.error_message = str(exc)[:500]
        except requests.exceptions.ConnectionError as exc:
            # Refused (nothing was sent), or reset once the exchange had begun.
            refused = record.http_status is None and ("NewConnectionError" in str(exc) or "refused" in str(exc))
            record.error_class = ErrorClass.CONNECT_ERROR if refused else ErrorClass.CONNECTION_RESET
            record.error_message = str(exc)[:500]
        except (requests.exceptions.ChunkedEncodingError, ConnectionResetError) as exc:
            record.error_class, record.error_message = ErrorClass.CONNECTION_RESET, str(exc)[:500]
        except _MalformedEvent as exc:
            record.error_class, record.error_message = ErrorClass.MALFORMED, str(exc)[:500]
        except _ServerErrorEvent as exc:
            record.error_class, record.error_message = ErrorClass.SERVER_ERROR_EVENT, str(exc)[:500]
        except Exception as exc:  # anything else is still a counted failure, never a crash
            record.error_class, record.error_message = ErrorClass.CLIENT_ERROR, f"{type(exc).__name__}: {exc}"[:500]
        finally:
            total.close()
            if response is not None:
                response.close()
        account(record, events, done, self.tokenize)
        return record

    def _read_events(self, response, events: list[Event], first_token_by: float) -> bool:
        """Read SSE events until ``[DONE]``; return whether the stream ended properly."""
        iterator = sseclient.SSEClient(response).events()
        finished = False
        first = True
        while True:
            if first:
                seconds = max(first_token_by - now(), 0.0)
                phase = _PhaseTimeout(ErrorClass.FIRST_TOKEN_TIMEOUT, self.timeouts.first_token_s, "first token")
            else:
                seconds = self.timeouts.idle_s
                phase = _PhaseTimeout(ErrorClass.IDLE_TIMEOUT, seconds, "event")
            with gevent.Timeout(seconds, phase):
                event = next(iterator, None)
            t = now()
            if event is None:
                return finished
            data = event.data
            if data.strip() == "[DONE]":
                return True
            try:
                chunk = json.loads(data)
            except ValueError:
                raise _MalformedEvent(f"event is not JSON: {data[:200]!r}") from None
            if not isinstance(chunk, dict):
                raise _MalformedEvent(f"event is not a JSON object: {data[:200]!r}")
            if "error" in chunk and not chunk.get("choices"):
                raise _ServerErrorEvent(f"server sent an error event: {json.dumps(chunk['error'])[:400]}")
            events.append(Event(t, chunk))
            if any(c.get("finish_reason") for c in chunk.get("choices") or [] if isinstance(c, dict)):
                finished = True
            first = False

"""One streaming OpenAI-compatible request -> one RequestRecord. The only HTTP/SSE code of the package.

Each SSE event is stamped with ``records.now()`` the moment sseclient-py yields it; everything
else (JSON decoding, token accounting) happens after the stamp or after the stream ends.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable

import locust  # noqa: F401  (gevent must patch sockets before requests is imported)
import gevent
import requests
import sseclient

from . import records as R
from .records import RequestRecord, now

API_KEY_ENV = "LOCUST_LLM_API_KEY"
PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


@dataclass(frozen=True)
class Timeouts:
    connect_s: float = 10.0
    first_token_s: float = 120.0
    idle_s: float = 60.0
    total_s: float = 600.0


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
    def __init__(self, error_class: str, seconds: float):
        super().__init__(f"no {error_class.replace('_timeout', '').replace('_', ' ')} within {seconds:g} s")
        self.error_class = error_class


@dataclass
class _Event:
    t: float
    data: dict


def _choice_text(choice: dict) -> str:
    if "text" in choice:
        return choice.get("text") or ""
    delta = choice.get("delta") or {}
    return (delta.get("content") or "") + (delta.get("reasoning_content") or delta.get("reasoning") or "")


def _token_ids(chunk: dict) -> int | None:
    """Tokens in a chunk when the server lists them (vLLM return_token_ids, llama.cpp tokens)."""
    for choice in chunk.get("choices") or []:
        for key in ("token_ids", "tokens"):
            ids = choice.get(key)
            if isinstance(ids, list):
                return len(ids)
    return None


def count_tokens(events: list[_Event], tokenize: Callable[[str], int] | None) -> tuple[list[int], str, int | None]:
    """Tokens per event, the source of that count, and the server's final completion total (if any).

    Order: cumulative usage deltas (vLLM/SGLang continuous usage), token lists per chunk, the
    server's one-event-per-token stream checked against its final usage (llama.cpp), a tokenizer.
    """
    usage = [((e.data.get("usage") or {}).get("completion_tokens")) for e in events]
    texts = ["".join(_choice_text(c) for c in e.data.get("choices") or []) for e in events]
    final_total = next((u for u in reversed(usage) if isinstance(u, int)), None)
    carries_text = [bool(t) for t in texts]
    with_text_have_usage = all(isinstance(u, int) for u, c in zip(usage, carries_text) if c)
    # A count that only appears on the final usage chunk is not per-chunk information.
    per_chunk_usage = sum(isinstance(u, int) for u in usage) > 1 and with_text_have_usage
    if per_chunk_usage:
        counts, previous = [], 0
        for u in usage:
            if isinstance(u, int):
                counts.append(max(u - previous, 0))
                previous = max(previous, u)
            else:
                counts.append(0)
        return counts, "usage_deltas", final_total
    id_counts = [_token_ids(e.data) for e in events]
    if any(c is not None for c in id_counts):
        return [c or 0 for c in id_counts], "token_ids", final_total
    is_llamacpp = any("timings" in e.data for e in events)
    one_per_event = [1 if c else 0 for c in carries_text]
    if is_llamacpp or (final_total is not None and final_total == sum(one_per_event)):
        if final_total is not None and final_total != sum(one_per_event) and any(one_per_event):
            # llama.cpp holds back incomplete UTF-8, so one event can carry several tokens;
            # the server's total is exact, the difference lands on the last text event.
            last = max(i for i, c in enumerate(one_per_event) if c)
            one_per_event[last] += final_total - sum(one_per_event)
            return one_per_event, "server_events+usage", final_total
        return one_per_event, "server_events", final_total
    if tokenize is not None:
        try:
            return [tokenize(t) if t else 0 for t in texts], "tokenizer", final_total
        except Exception:  # a failing tokenizer leaves counts unknown, below
            pass
    return [0] * len(events), "unknown", final_total


class StreamingClient:
    """Streams completions from one server. One instance per Locust user (it owns a connection pool)."""

    def __init__(self, base_url: str, timeouts: Timeouts = Timeouts(), verify_tls: bool = True,
                 api_key_env: str = API_KEY_ENV, tokenize: Callable[[str], int] | None = None,
                 pool_size: int = 16):
        self.base_url = base_url.rstrip("/")
        self.timeouts = timeouts
        self.tokenize = tokenize
        self.session = requests.Session()
        adapter = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=pool_size, max_retries=0)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.session.verify = verify_tls
        # Never a POST retried behind our back, never gzip (it would batch chunks).
        self.session.headers.update({"Accept-Encoding": "identity", "Accept": "text/event-stream"})
        api_key = os.environ.get(api_key_env)
        if api_key:
            self.session.headers["Authorization"] = f"Bearer {api_key}"

    def close(self) -> None:
        self.session.close()

    def stream(self, spec: RequestSpec, record: RequestRecord) -> RequestRecord:
        """Send ``spec``, fill ``record`` in place and return it. Never raises for request failures."""
        record.api = spec.api
        record.max_tokens = spec.max_tokens
        events: list[_Event] = []
        done = False
        response = None
        total = gevent.Timeout(self.timeouts.total_s, _PhaseTimeout(R.TOTAL_TIMEOUT, self.timeouts.total_s))
        total.start()
        try:
            record.t_send = now()
            # The first-token deadline runs from the send, through the response headers (llama.cpp
            # sends them only with the first token), to the first event.
            with gevent.Timeout(self.timeouts.first_token_s,
                                _PhaseTimeout(R.FIRST_TOKEN_TIMEOUT, self.timeouts.first_token_s)):
                response = self.session.post(
                    self.base_url + PATHS[spec.api], json=spec.body(), stream=True,
                    timeout=(self.timeouts.connect_s, max(self.timeouts.first_token_s, self.timeouts.idle_s)))
            record.http_status = response.status_code
            if response.status_code != 200:
                record.error_class = R.HTTP_ERROR
                record.error_message = f"HTTP {response.status_code}: {response.text[:500]}"
                return record
            done = self._read_events(response, events, record.t_send + self.timeouts.first_token_s)
        except _PhaseTimeout as exc:
            record.error_class, record.error_message = exc.error_class, str(exc)
        except requests.exceptions.ConnectTimeout as exc:
            record.error_class, record.error_message = R.CONNECT_TIMEOUT, str(exc)[:500]
        except requests.exceptions.ReadTimeout as exc:
            record.error_class = R.FIRST_TOKEN_TIMEOUT if not events else R.IDLE_TIMEOUT
            record.error_message = str(exc)[:500]
        except requests.exceptions.ConnectionError as exc:
            # Refused (nothing was sent), or reset once the exchange had begun.
            refused = record.http_status is None and ("NewConnectionError" in str(exc) or "refused" in str(exc))
            record.error_class = R.CONNECT_ERROR if refused else R.CONNECTION_RESET
            record.error_message = str(exc)[:500]
        except (requests.exceptions.ChunkedEncodingError, ConnectionResetError) as exc:
            record.error_class, record.error_message = R.CONNECTION_RESET, str(exc)[:500]
        except _MalformedEvent as exc:
            record.error_class, record.error_message = R.MALFORMED, str(exc)[:500]
        except _ServerErrorEvent as exc:
            record.error_class, record.error_message = R.SERVER_ERROR_EVENT, str(exc)[:500]
        except Exception as exc:  # anything else is still a counted failure, never a crash
            record.error_class, record.error_message = R.CLIENT_ERROR, f"{type(exc).__name__}: {exc}"[:500]
        finally:
            total.close()
            if response is not None:
                response.close()
        self._account(record, events, done)
        return record

    def _read_events(self, response: requests.Response, events: list[_Event], first_token_by: float) -> bool:
        """Read SSE events until ``[DONE]``; return whether the stream ended properly."""
        iterator = sseclient.SSEClient(response).events()
        finished = False
        phase = (R.FIRST_TOKEN_TIMEOUT, self.timeouts.first_token_s)
        while True:
            seconds = max(first_token_by - now(), 0.0) if phase[0] == R.FIRST_TOKEN_TIMEOUT else phase[1]
            with gevent.Timeout(seconds, _PhaseTimeout(*phase)):
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
            events.append(_Event(t, chunk))
            if any(c.get("finish_reason") for c in chunk.get("choices") or []):
                finished = True
            phase = (R.IDLE_TIMEOUT, self.timeouts.idle_s)

    def _account(self, record: RequestRecord, events: list[_Event], done: bool) -> None:
        counts, source, final_total = count_tokens(events, self.tokenize)
        record.token_source = source
        for event, n in zip(events, counts):
            if n > 0:
                record.chunk_offsets.append(event.t - record.t_send)
                record.chunk_tokens.append(n)
        record.output_tokens = sum(record.chunk_tokens) if record.chunk_tokens else (final_total or 0)
        if record.chunk_offsets:
            record.t_first = record.t_send + record.chunk_offsets[0]
            record.t_end = record.t_send + record.chunk_offsets[-1]
        for event in events:
            choices = event.data.get("choices") or []
            for choice in choices:
                if choice.get("finish_reason"):
                    record.finish_reason = choice["finish_reason"]
            usage = event.data.get("usage") or {}
            if isinstance(usage.get("prompt_tokens"), int):
                record.prompt_tokens = usage["prompt_tokens"]
            timings = event.data.get("timings") or {}
            if "draft_n" in timings:
                record.draft_n = int(timings["draft_n"])
                record.draft_accepted = int(timings.get("draft_n_accepted", 0))
            spec = (event.data.get("metrics") or {}).get("speculative_decoding") or {}
            if "num_draft_tokens" in spec:
                record.draft_n = int(spec["num_draft_tokens"])
                record.draft_accepted = int(spec.get("num_accepted_draft_tokens", 0))
        if record.error_class is None:
            if not done:
                record.error_class = R.TRUNCATED
                record.error_message = f"stream ended without [DONE] or finish_reason after {len(events)} events"
            elif record.output_tokens == 0:
                record.error_class = R.EMPTY
                record.error_message = "the server finished without producing a token"


class _MalformedEvent(Exception):
    pass


class _ServerErrorEvent(Exception):
    pass

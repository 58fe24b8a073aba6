"""The probe suite: abnormal requests to a live server, one function per probe, each followed by a check that the
server still answers and how long it took to ("time to recover").

Every probe is a streaming OpenAI completion (the load's own API; the reference server only streams), bounded in
time (``timeout_s`` per request, ``recover_s`` for the server to answer a one-token completion again). A probe
returns what was sent (summarised: never the prompt text), the answer, and whether it was the expected one; the
runner adds the recovery check and the verdict: ok, unexpected (answered, not as expected), server-failed
(crashed, or silent for ``recover_s``), not-run (e.g. the server does not say its context size).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import gevent
import gevent.pool

from ..records import now
from ..rundir.probes import ProbeResult
from ..workload import TokenCounter, WorkloadError
from ..workload.generate import Generator, Measure
from .engines import PATHS, request_extra
from .http import requests, session

__all__ = ["PROBES", "Target", "recover", "run_suite"]

MAX_ANSWER_BYTES = 1 << 20
ERROR_CHARS = 300
TINY = {"prompt": "Hello", "max_tokens": 1}
OUTPUT_CAP = 2048  # output probe: tokens asked for at most (a 128k context would take minutes to fill)
OVER_BY = 16  # tokens beyond the context of the over-limit prompt
AT_LIMIT_OUTPUT = 4
DISCONNECT_AFTER = 3  # chunks read before the client closes its socket
CONTROL_TEXT = "start \u0000 nul \u001b[31m escape \u0007 bell \u0008 backspace \u007f delete \u0085 next end"
RETRY_S = 0.2
# A connection per request: a pooled one the server closed while idle would fail the next probe on its own.
HEADERS = {"Content-Type": "application/json", "Connection": "close"}


class NotRun(Exception):
    """The probe cannot be made against this server; the message says why."""


class _Deadline(Exception):
    """Not a TimeoutError: the HTTP stack must not mistake it for (and swallow it as) a socket timeout."""


@dataclass
class Target:
    """The server a suite probes, and the bounds."""

    variant: str
    base_url: str
    engine: str
    model: str
    context: int | None  # tokens one request may hold (prompt + output), as the server says
    burst: int  # concurrent requests of the burst
    alive: Callable[[], bool]  # the launched process still runs (always true for a server we did not start)
    counter: TokenCounter | None = None  # the server's own token count, for a prompt of an exact length
    burst_tokens: int = 32
    recover_s: float = 30.0
    timeout_s: float = 120.0

    def body(self, **fields) -> dict:
        body = {"max_tokens": 8, "stream": True, **fields}
        if self.model and "model" not in fields:
            body["model"] = self.model
        return body


@dataclass
class Answer:
    status: int | None = None
    latency_ms: float | None = None
    tokens: int = 0  # completion tokens (the server's usage, else events with text)
    prompt_tokens: int | None = None
    finish: str | None = None
    error: str | None = None

    def summary(self) -> str:
        if self.status is None:
            return "no answer"
        text = f"HTTP {self.status}"
        if self.status == 200:
            text += f", {self.tokens} tokens"
            if self.prompt_tokens is not None:
                text += f" after {self.prompt_tokens} prompt tokens"
            text += f", finish {self.finish or 'none'}"
        return text


@dataclass
class Outcome:
    sent: str
    answer: Answer
    ok: bool
    note: str | None = None
    shown: str | None = None  # the answer in words, where its summary would not say it (a burst, a disconnect)


def client_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]


def error_text(obj) -> str:
    error = obj.get("error") if isinstance(obj, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return str(message if message is not None else obj)[:ERROR_CHARS]


def count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def parse(status: int, raw: bytes, latency_ms: float) -> Answer:
    """An answer from its status and body: SSE events (text, finish, usage, error events) or one JSON object."""
    answer = Answer(status=status, latency_ms=latency_ms)
    text = raw.decode("utf-8", "replace")
    payloads = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")] or [text]
    events = 0
    for payload in payloads:
        if payload == "[DONE]":
            continue
        try:
            obj = json.loads(payload)
        except ValueError:
            answer.error = answer.error or payload[:ERROR_CHARS]
            continue
        if not isinstance(obj, dict):
            continue
        if "error" in obj or status != 200:
            answer.error = error_text(obj)
        choice = (obj.get("choices") or [None])[0]
        if isinstance(choice, dict):
            piece = choice.get("text") or (choice.get("delta") or {}).get("content")
            events += bool(piece)
            answer.finish = choice.get("finish_reason") or answer.finish
        usage = obj.get("usage")
        if isinstance(usage, dict):
            answer.tokens = count(usage.get("completion_tokens")) or answer.tokens
            answer.prompt_tokens = count(usage.get("prompt_tokens")) or answer.prompt_tokens
    answer.tokens = answer.tokens or events
    return answer


def post(http: requests.Session, target: Target, body: dict | bytes, timeout_s: float | None = None) -> Answer:
    """One completion request, read whole (at most 1 MiB) within ``timeout_s`` in all."""
    timeout_s = timeout_s or target.timeout_s
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    t0 = now()
    try:
        with gevent.Timeout(timeout_s, _Deadline(f"no complete answer within {timeout_s:g} s")):
            response = http.post(
                f"{target.base_url}{PATHS['completions']}", data=data, timeout=timeout_s, headers=HEADERS, stream=True
            )
            raw = response.raw.read(MAX_ANSWER_BYTES, decode_content=True)
            response.close()
            # Each probe on a connection of its own (it asked for Connection: close): a pooled one the server is
            # closing right now would fail the next probe with a disconnect that was not its answer.
            http.close()
    except Exception as exc:  # refused, reset, timed out: the answer is that there was none
        return Answer(latency_ms=(now() - t0) * 1e3, error=client_error(exc))
    return parse(response.status_code, raw, (now() - t0) * 1e3)


def refused(answer: Answer) -> bool:
    return answer.status is not None and 400 <= answer.status < 500


def completed_or_refused(answer: Answer) -> bool:
    return answer.status == 200 or refused(answer)


def usage_text(answer: Answer, context: int | None) -> str:
    if answer.prompt_tokens is None or answer.status != 200:
        return ""
    return f"; prompt {answer.prompt_tokens} + output {answer.tokens} of a {context}-token context"


# -- the probes: each returns what it sent and whether the answer was the expected one --------------------------


def empty_prompt(http: requests.Session, target: Target) -> Outcome:
    answer = post(http, target, target.body(prompt=""))
    return Outcome('prompt "" (empty), max_tokens 8', answer, completed_or_refused(answer))


def exact_prompt(target: Target, tokens: int) -> str:
    """A text of exactly ``tokens`` tokens by the server's own count."""
    if target.counter is None:
        raise NotRun("no token counter (the server has no /tokenize): a prompt of an exact length cannot be built")
    try:
        return Generator(target.counter).fit(tokens, random.Random(0), Measure(target.counter), "probe prompt")
    except WorkloadError as exc:
        raise NotRun(str(exc)) from None


def need_context(target: Target) -> int:
    if not target.context:
        raise NotRun("the server does not say its context size (/v1/models, /props)")
    return target.context


def prompt_at_context(http: requests.Session, target: Target) -> Outcome:
    context = need_context(target)
    # One token of the context goes to the BOS token the server adds (llama.cpp, most chat models).
    text = exact_prompt(target, context - AT_LIMIT_OUTPUT - 1)
    answer = post(http, target, target.body(prompt=text, max_tokens=AT_LIMIT_OUTPUT))
    return Outcome(
        f"a prompt of {context - AT_LIMIT_OUTPUT - 1} tokens (+1 BOS) and max_tokens {AT_LIMIT_OUTPUT}: "
        f"exactly the {context}-token context",
        answer,
        answer.status == 200,
        usage_text(answer, context).lstrip("; ") or None,
    )


def prompt_over_context(http: requests.Session, target: Target) -> Outcome:
    context = need_context(target)
    words = context + OVER_BY  # every word is at least one token
    answer = post(http, target, target.body(prompt=" ".join(["the"] * words), max_tokens=AT_LIMIT_OUTPUT))
    note = (
        "a prompt longer than the context was answered" + usage_text(answer, context) if answer.status == 200 else None
    )
    return Outcome(
        f"a prompt of {words} words (at least {OVER_BY} tokens over the {context}-token context)",
        answer,
        refused(answer),
        note,
    )


def output_to_context(http: requests.Session, target: Target) -> Outcome:
    context = need_context(target)
    asked = min(context, OUTPUT_CAP)
    answer = post(
        http,
        target,
        target.body(prompt="Once upon a time", max_tokens=asked, **request_extra(target.engine, None, ignore_eos=True)),
    )
    capped = f" (capped at {OUTPUT_CAP})" if asked < context else ""
    ok = (answer.status == 200 and answer.finish == "length") or refused(answer)
    return Outcome(
        f"a 4-word prompt and max_tokens {asked}{capped}: more than the {context}-token context holds",
        answer,
        ok,
        usage_text(answer, context).lstrip("; ") or None,
    )


def invalid_utf8(http: requests.Session, target: Target) -> Outcome:
    body = json.dumps(target.body(prompt="caf\u00e9 PLACEHOLDER bytes")).encode()
    # Raw bytes that are not UTF-8 inside the JSON string: a lone continuation byte, 0xff, a truncated sequence.
    body = body.replace(b"PLACEHOLDER", b"\x80 \xff\xfe \xc3")
    answer = post(http, target, body)
    return Outcome(
        "a JSON body whose prompt holds the bytes 80, ff fe, c3 (not UTF-8)", answer, completed_or_refused(answer)
    )


def control_characters(http: requests.Session, target: Target) -> Outcome:
    answer = post(http, target, target.body(prompt=CONTROL_TEXT))
    return Outcome(
        "a prompt with U+0000, U+001B (ESC [31m), U+0007, U+0008, U+007F, U+0085", answer, completed_or_refused(answer)
    )


def unknown_model(http: requests.Session, target: Target) -> Outcome:
    answer = post(http, target, target.body(prompt="Hello", model="locust-llm-no-such-model"))
    note = "answered with its own model" if answer.status == 200 else None
    return Outcome('model "locust-llm-no-such-model"', answer, completed_or_refused(answer), note)


def temperature_not_a_number(http: requests.Session, target: Target) -> Outcome:
    answer = post(http, target, target.body(prompt="Hello", temperature="hot"))
    note = "accepted a temperature that is not a number" if answer.status == 200 else None
    return Outcome('temperature "hot"', answer, refused(answer), note)


def negative_max_tokens(http: requests.Session, target: Target) -> Outcome:
    answer = post(http, target, target.body(prompt="Hello", max_tokens=-5))
    note = "accepted max_tokens -5" if answer.status == 200 else None
    return Outcome("max_tokens -5", answer, refused(answer), note)


def client_disconnect(http: requests.Session, target: Target) -> Outcome:
    """Open a long stream, read a few chunks, close the socket: the server must free the request's slot."""
    asked = min(target.context or 256, 256)
    body = json.dumps(
        target.body(prompt="Once upon a time", max_tokens=asked, **request_extra(target.engine, None, ignore_eos=True))
    ).encode()
    answer, t0, chunks = Answer(), now(), 0
    try:
        with gevent.Timeout(target.timeout_s, _Deadline(f"no {DISCONNECT_AFTER} chunks within {target.timeout_s:g} s")):
            response = http.post(
                f"{target.base_url}{PATHS['completions']}",
                data=body,
                stream=True,
                headers=HEADERS,
                timeout=target.timeout_s,
            )
            answer.status = response.status_code
            for line in response.iter_lines():
                chunks += line.startswith(b"data:")
                if chunks >= DISCONNECT_AFTER:
                    break
            response.close()  # unread: the connection is closed, not returned to the pool
    except Exception as exc:  # the answer is that there was none
        answer.error = client_error(exc)
    answer.latency_ms = (now() - t0) * 1e3
    return Outcome(
        f"a stream of max_tokens {asked}, closed by the client after {DISCONNECT_AFTER} chunks",
        answer,
        answer.status == 200 and chunks >= DISCONNECT_AFTER,
        None if chunks >= DISCONNECT_AFTER else f"only {chunks} chunks came before the stream ended",
        shown=f"HTTP {answer.status}, {chunks} chunks read, then the socket closed" if answer.status else None,
    )


def burst(http: requests.Session, target: Target) -> Outcome:
    """``target.burst`` requests at once, each on its own connection."""
    body = target.body(prompt="Once upon a time", max_tokens=target.burst_tokens)
    t0 = now()
    with session("probes", pool_size=target.burst) as many:
        group = gevent.pool.Group()
        answers = group.map(lambda _: post(many, target, body), range(target.burst))
    statuses = Counter(a.status for a in answers)
    shown = ", ".join(f"{n} x {status if status is not None else 'no answer'}" for status, n in statuses.most_common())
    bad = [a for a in answers if a.status not in (200, 429, 503)]
    answer = Answer(
        status=statuses.most_common(1)[0][0],
        latency_ms=(now() - t0) * 1e3,
        tokens=sum(a.tokens for a in answers),
        error=next((a.error for a in bad if a.error), None),
    )
    return Outcome(
        f"{target.burst} concurrent requests of max_tokens {target.burst_tokens}",
        answer,
        not bad,
        f"{len(bad)} of {target.burst} neither answered nor refused with 429/503" if bad else None,
        shown=f"{shown}; the last answered after {answer.latency_ms / 1e3:.2f} s",
    )


@dataclass(frozen=True)
class Probe:
    name: str
    expected: str
    send: Callable[[requests.Session, Target], Outcome]


ANSWERS = "the server keeps answering"
PROBES = [
    Probe("empty_prompt", f"a completion (200) or a 4xx with an error message; {ANSWERS}", empty_prompt),
    Probe(
        "prompt_at_context",
        f"200 with a completion: prompt and output fill the context exactly; {ANSWERS}",
        prompt_at_context,
    ),
    Probe(
        "prompt_over_context",
        f"a 4xx saying the prompt is too long (no silent truncation); {ANSWERS}",
        prompt_over_context,
    ),
    Probe(
        "output_to_context",
        "200 with the output stopped at the context (finish length), or a 4xx saying prompt "
        f"+ max_tokens exceed it; {ANSWERS}",
        output_to_context,
    ),
    Probe(
        "invalid_utf8",
        f"a 4xx (the body is not UTF-8 JSON) or a completion with the bytes replaced; {ANSWERS}",
        invalid_utf8,
    ),
    Probe(
        "control_characters",
        f"a completion (control characters are valid JSON text) or a 4xx; {ANSWERS}",
        control_characters,
    ),
    Probe(
        "unknown_model",
        "a 404/400 naming the model, or (a single-model server such as llama.cpp) a completion "
        f"from its own model; {ANSWERS}",
        unknown_model,
    ),
    Probe("temperature_not_a_number", f"a 4xx naming the field; {ANSWERS}", temperature_not_a_number),
    Probe("negative_max_tokens", f"a 4xx naming the field; {ANSWERS}", negative_max_tokens),
    Probe(
        "client_disconnect",
        f"the stream starts; after the client closes its socket the server frees the slot and {ANSWERS}",
        client_disconnect,
    ),
    Probe("burst", f"every request answered (200) or refused with 429/503, none past the timeout; {ANSWERS}", burst),
]


def recover(http: requests.Session, target: Target, since: float) -> tuple[bool, float | None, str | None]:
    """Whether the server answers a one-token completion within ``recover_s`` of ``since`` (run clock), the time
    it took in ms, and why not."""
    deadline = since + target.recover_s
    while True:
        if not target.alive():
            return False, None, "the server process exited"
        answer = post(http, target, target.body(**TINY), timeout_s=max(min(deadline - now(), 10.0), 0.5))
        if answer.status == 200 and answer.tokens >= 1:
            return True, (now() - since) * 1e3, None
        if now() >= deadline:
            why = answer.error or answer.summary()
            return False, None, f"no one-token completion within {target.recover_s:g} s (last: {why})"
        gevent.sleep(RETRY_S)


def run_probe(http: requests.Session, target: Target, probe: Probe) -> ProbeResult:
    t_start = now()
    try:
        outcome = probe.send(http, target)
    except NotRun as exc:
        return ProbeResult(
            variant=target.variant,
            probe=probe.name,
            sent="-",
            expected=probe.expected,
            verdict="not-run",
            note=str(exc),
            t_start=t_start,
            t_end=now(),
        )
    t_end = now()
    recovered, recover_ms, why = recover(http, target, t_end)
    answer = outcome.answer
    verdict = "server-failed" if not recovered else "ok" if outcome.ok else "unexpected"
    return ProbeResult(
        variant=target.variant,
        probe=probe.name,
        sent=outcome.sent,
        expected=probe.expected,
        status=answer.status,
        answer=outcome.shown or answer.summary(),
        error=answer.error,
        latency_ms=answer.latency_ms,
        recovered=recovered,
        recover_ms=recover_ms,
        verdict=verdict,
        note=why or outcome.note,
        t_start=t_start,
        t_end=t_end,
    )


def run_suite(target: Target, probes: list[Probe] = PROBES) -> Iterator[ProbeResult]:
    """Each probe in turn; once the server has failed, the rest are not run."""
    failed = None
    with session("probes") as http:
        for probe in probes:
            if failed is not None:
                yield ProbeResult(
                    variant=target.variant,
                    probe=probe.name,
                    sent="-",
                    expected=probe.expected,
                    verdict="not-run",
                    note=f"the server failed at {failed}",
                )
                continue
            result = run_probe(http, target, probe)
            if result.verdict == "server-failed":
                failed = probe.name
            yield result

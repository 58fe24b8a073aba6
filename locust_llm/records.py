"""The one record every request produces, its Parquet schema, its vocabularies, and the run clock."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields

import pyarrow as pa

__all__ = [
    "FAST_FAIL_S",
    "NEVER_REACHED",
    "NOT_SENT",
    "ErrorClass",
    "Phase",
    "REQUESTS_SCHEMA",
    "RequestRecord",
    "epoch_anchor",
    "now",
]

ANCHOR_TRIES = 16


def epoch_anchor(
    tries: int = ANCHOR_TRIES, perf: Callable[[], float] = time.perf_counter, wall: Callable[[], float] = time.time
) -> float:
    """``time.time() - time.perf_counter()``, read where nothing came between the two clocks: of a few tries, the one
    whose wall-clock read sits in the shortest perf_counter bracket. One pair of reads is off by whatever preempts
    the process between them, milliseconds on a busy host, and processes on one host then disagree by that (a
    master and its two workers, started together on this 2-core VM, once measured 0.5 ms apart, beyond the clock
    exchanges' own bound)."""
    brackets = []
    for _ in range(tries):
        before = perf()
        read = wall()
        after = perf()
        brackets.append((after - before, read - (before + after) / 2.0))
    return min(brackets)[1]


# One clock per run: perf_counter's resolution, anchored once per process to the epoch so that
# processes (and machines) line up with each other and with telemetry timestamps.
# LOCUST_LLM_TEST_CLOCK_OFFSET_S moves this process's clock, as another host's would be: for tests of the clock
# alignment only (``rundir.clocks``).
_EPOCH_ANCHOR = epoch_anchor() + float(os.environ.get("LOCUST_LLM_TEST_CLOCK_OFFSET_S") or 0.0)


def now() -> float:
    """Seconds since the epoch with perf_counter resolution; monotonic within a process."""
    return time.perf_counter() + _EPOCH_ANCHOR


NAN = math.nan


class ErrorClass:
    """The ``error_class`` column; each fires a Locust failure and counts in every denominator."""

    HTTP_ERROR = "http_error"
    CONNECT_ERROR = "connect_error"
    CONNECTION_RESET = "connection_reset"
    CONNECT_TIMEOUT = "connect_timeout"
    TLS_ERROR = "tls_error"
    FIRST_TOKEN_TIMEOUT = "first_token_timeout"
    IDLE_TIMEOUT = "idle_timeout"
    TOTAL_TIMEOUT = "total_timeout"
    TRUNCATED = "truncated_stream"
    MALFORMED = "malformed_event"
    SUSPECT_USAGE = "suspect_usage"  # the server's token count disagrees with what it was asked for or sent
    EMPTY = "empty_completion"
    SERVER_ERROR_EVENT = "server_error_event"
    NOT_STREAMED = "not_streamed"  # a whole answer (Content-Type application/json) to a streaming request
    DROPPED = "dropped_inflight_cap"
    CANCELLED = "cancelled"
    CLIENT_ERROR = "client_error"


# A failure this soon after the request began (its connection, else its send), before any token, was the server's
# (or the network's) refusal, not an answer: the user backs off, and a step made mostly of them says so. A refused
# connection or a failed TLS handshake is one however long it took: no request reached the server.
FAST_FAIL_S = 0.010
# Failures that say nothing about the server: never sent, or cut by the client.
NOT_SENT = (ErrorClass.DROPPED, ErrorClass.CANCELLED, ErrorClass.CLIENT_ERROR)
NEVER_REACHED = (ErrorClass.CONNECT_ERROR, ErrorClass.TLS_ERROR)


class Phase:
    """Where a process is in a ladder step (``StepState.phase``, the ``phase`` column)."""

    IDLE = "idle"
    STARTING = "starting"
    WARMUP = "warmup"
    STEADY = "steady"
    DRAIN = "drain"


@dataclass
class RequestRecord:
    """One request, failed or not. Times are ``now()`` seconds; chunk offsets are after ``t_send``."""

    run_id: str = ""
    variant: str = ""
    level: float = NAN
    step: int = -1
    phase: str = ""
    mode: str = "closed"
    worker: int = 0
    # Which user of its process sent it (closed loop: a user's requests in send order make its request cycles);
    # -1 in open loop (``seq`` is the arrival slot) and in runs before the column.
    user: int = -1
    request_id: str = ""
    seq: int = -1  # the k-th request of this worker in this step: the same k is the same prompt in every variant
    bucket: str = "default"
    api: str = "completions"
    prompt_tokens: int = -1
    max_tokens: int = -1
    output_tokens: int = 0
    token_source: str = "none"
    t_intended: float = NAN
    # Open loop, ``load.at_max_inflight: hold``: an arrival that found ``max_inflight`` requests in flight waited for a
    # slot until this time (NaN: it did not wait). Its latencies still run from ``t_intended``.
    t_slot: float = NAN
    t_connect: float = NAN  # a new connection was started (NaN: an open one was reused)
    t_send: float = NAN
    t_first: float = NAN
    # The first answer token's chunk: after any reasoning (``reasoning_content``/``reasoning`` deltas, or
    # ``<think>...</think>`` in content when asked); NaN when the request gave no answer (cut while thinking).
    t_first_output: float = NAN
    t_end: float = NAN
    t_done: float = NAN  # the client was done with the request: the stream ended or failed
    chunk_offsets: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    error_class: str | None = None
    error_message: str | None = None
    http_status: int | None = None
    draft_n: int | None = None
    draft_accepted: int | None = None
    # Tokens of the output that were reasoning (``usage.completion_tokens_details.reasoning_tokens`` when the
    # server gives it, else counted from the reasoning chunks); 0 when nothing was reasoning.
    reasoning_tokens: int = 0
    # llama.cpp ``timings_per_token`` (``load.acceptance_by_position``): the request's cumulative draft and
    # accepted tokens as each chunk of ``chunk_offsets`` reported them; empty otherwise.
    chunk_drafted: list[int] = field(default_factory=list)
    chunk_accepted: list[int] = field(default_factory=list)
    # The server's own split of this request (llama.cpp ``timings``): prompt processing and generation time.
    server_prefill_ms: float | None = None
    server_decode_ms: float | None = None
    # Images the request carried (a bucket with ``images``) and their bytes before base64: 0 for the bucket's
    # text-only twins, None in buckets without images.
    images: int | None = None
    image_bytes: int | None = None
    # Which server of a scale-out step the request went to (index into its servers); None outside scale-out steps.
    server: int | None = None
    # Prompt tokens the server says it took from its prompt cache (llama.cpp ``timings.cache_n``, OpenAI
    # ``usage.prompt_tokens_details.cached_tokens``); None when it does not say.
    cached_tokens: int | None = None
    # A 63-bit fingerprint of the prompt text sent: which requests repeated a prompt their server had been sent.
    prompt_hash: int | None = None
    # A conversation's turn (``load.conversation``): the worker's k-th conversation in the step, the turn (from 1)
    # and the turns the conversation was to send; -1 / 0 / 0 outside conversations.
    conversation: int = -1
    turn: int = 0
    turns: int = 0
    # A hash of the assistant answers the request carried back to the server (from turn 2 on): two variants' turns
    # with the same hash had the same history.
    history: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_class is None

    @property
    def failed_fast(self) -> bool:
        """Failed within ``FAST_FAIL_S`` of its start, before any token (the same rule as the analysis's)."""
        start = self.t_connect if not math.isnan(self.t_connect) else self.t_send
        return (
            not self.ok
            and self.error_class not in NOT_SENT
            and math.isnan(self.t_first)
            and (self.error_class in NEVER_REACHED or self.t_done - start < FAST_FAIL_S)
        )

    def to_dict(self) -> dict:
        # Shallow on purpose: called once per request on the load loop, and a finished record is not mutated.
        return dict(vars(self))


# Column types by annotation. Counts are int64 so that no value a server or a user can send overflows a
# column; offsets are float32 (microsecond resolution over ten minutes) to keep long runs small.
_ARROW = {
    "str": pa.string(),
    "str | None": pa.string(),
    "int": pa.int64(),
    "int | None": pa.int64(),
    "float": pa.float64(),
    "float | None": pa.float64(),
    "list[float]": pa.list_(pa.float32()),
    "list[int]": pa.list_(pa.int32()),
}

REQUESTS_SCHEMA = pa.schema([(f.name, _ARROW[str(f.type)]) for f in fields(RequestRecord)])

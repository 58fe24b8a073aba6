"""The one record every request produces, and the run clock its times are on."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, fields

# One clock per run: perf_counter's resolution, anchored once per process to the epoch so that
# processes (and machines) line up with each other and with telemetry timestamps.
_EPOCH_ANCHOR = time.time() - time.perf_counter()


def now() -> float:
    """Seconds since the epoch with perf_counter resolution; monotonic within a process."""
    return time.perf_counter() + _EPOCH_ANCHOR


NAN = math.nan


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
    request_id: str = ""
    bucket: str = "default"
    api: str = "completions"
    prompt_tokens: int = -1
    max_tokens: int = -1
    output_tokens: int = 0
    token_source: str = "none"
    t_intended: float = NAN
    t_send: float = NAN
    t_first: float = NAN
    t_end: float = NAN
    chunk_offsets: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    error_class: str | None = None
    error_message: str | None = None
    http_status: int | None = None
    draft_n: int | None = None
    draft_accepted: int | None = None

    @property
    def ok(self) -> bool:
        return self.error_class is None

    def to_dict(self) -> dict:
        # Shallow on purpose: called once per request on the load loop, and a finished record is not mutated.
        return dict(vars(self))

    @classmethod
    def from_dict(cls, data: dict) -> "RequestRecord":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


# Error classes (the ``error_class`` column); each fires a Locust failure and counts in every denominator.
HTTP_ERROR = "http_error"
CONNECT_ERROR = "connect_error"
CONNECTION_RESET = "connection_reset"
CONNECT_TIMEOUT = "connect_timeout"
FIRST_TOKEN_TIMEOUT = "first_token_timeout"
IDLE_TIMEOUT = "idle_timeout"
TOTAL_TIMEOUT = "total_timeout"
TRUNCATED = "truncated_stream"
MALFORMED = "malformed_event"
EMPTY = "empty_completion"
SERVER_ERROR_EVENT = "server_error_event"
DROPPED = "dropped_inflight_cap"
CLIENT_ERROR = "client_error"

"""Production-shaped traffic: the scenario's ``load.conversation`` (multi-turn chat) and ``load.trace`` (replay
of a recorded trace's arrivals and lengths). Settings only; pure: no Locust, no I/O.

* **Conversations** (``conversation: {turns: 3, think_s: 1.0}``, chat API): each user (closed loop) or each arrival
  (open loop) runs a conversation; the request of turn t carries every earlier user message and the answers the
  server returned, so prompts grow turn by turn as they do in a chat product.
* **Trace replay** (``trace: {path: FILE, format: mooncake | azure | burstgpt}``): the open loop sends the trace's
  records at their own times (scaled by the ladder's speeds), with their prompt and output lengths.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from .base import Strict

__all__ = ["ConversationSpec", "TRACE_FORMATS", "TraceSpec"]

DAY_S = 86_400.0
# An HTTP header name (RFC 9110 token characters).
HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")
TRACE_FORMATS = ("mooncake", "azure", "burstgpt")


class ConversationSpec(Strict):
    """``load.conversation``: multi-turn chat. Turn t's request carries the whole history: the earlier user
    messages and the assistant answers the server actually returned."""

    turns: int = Field(default=3, ge=1, le=1000)
    # Seconds between an answer and the next user message of the same conversation.
    think_s: float = Field(default=0.0, ge=0, le=DAY_S)
    # Sent with every request of a conversation (one value per conversation), so a router can keep the
    # conversation on one replica; null sends none.
    session_header: str | None = "X-Session-ID"

    @field_validator("session_header")
    @classmethod
    def _header(cls, name: str | None) -> str | None:
        if name is not None and not HEADER_NAME.fullmatch(name):
            raise ValueError("must be an HTTP header name (letters, digits, '-'; e.g. X-Session-ID) or null")
        return name


class TraceSpec(Strict):
    """``load.trace``: replay a recorded trace's arrival times and lengths in the open loop."""

    path: str  # relative to the scenario's folder
    format: Literal["mooncake", "azure", "burstgpt"]
    # Playback speed when ``load.ladder`` is not given; with a ladder, its levels are the speeds.
    speed: float = Field(default=1.0, gt=0, le=1000)
    # The part of the trace replayed: records from start_s (seconds after the first record) for duration_s.
    start_s: float = Field(default=0.0, ge=0, le=366 * DAY_S)
    duration_s: float | None = Field(default=None, gt=0, le=366 * DAY_S)
    # Mooncake: tokens per ``hash_ids`` block (the trace's own block size; 512 in the published traces).
    block_tokens: int = Field(default=512, ge=1, le=1_000_000)

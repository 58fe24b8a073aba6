"""The documents of a run's conversations: per turn, per step, pooled per level and turn, against the baseline."""

from __future__ import annotations

from .base import Doc
from .speedup import Ratio

__all__ = ["ConversationSummary", "Histories", "StepConversations", "TurnComparison", "TurnFigures", "TurnLevel"]


class TurnFigures(Doc):
    """One turn of a step's conversations: the steady window's requests of that turn."""

    turn: int
    """The turn, from 1 (its request carries the turns before it)."""
    requests: int
    """Requests of this turn sent in the steady window, failed ones included."""
    errors: int
    """Failed requests among them."""
    ttft_p50_ms: float | None = None
    """TTFT P50 from the actual send, successful requests, ms."""
    ttft_p95_ms: float | None = None
    """TTFT P95, ms."""
    ttft_p99_ms: float | None = None
    """TTFT P99, ms."""
    ttft_sched_p50_ms: float | None = None
    """Open loop: TTFT P50 from the intended send (turn 1: the arrival; later turns: the answer before plus the
    think time), ms."""
    tpot_p50_ms: float | None = None
    """TPOT P50, ms."""
    tpot_p95_ms: float | None = None
    """TPOT P95, ms."""
    tpot_p99_ms: float | None = None
    """TPOT P99, ms."""
    decode_tps: float | None = None
    """Mean decode tok/s per request."""
    prompt_tokens: float | None = None
    """Mean prompt tokens of the successful requests, as the server counted them (its chat template included)."""
    cached_tokens: float | None = None
    """Mean prompt tokens the server's prefix cache served, where it reports them (null: not reported)."""


class StepConversations(Doc):
    """What became of the conversations that started in a step (every phase)."""

    started: int
    """Conversations whose first turn arrived in the step."""
    completed: int
    """Conversations that sent every turn they were to send, each answered."""
    cut_short: int
    """Conversations whose step ended before their last turn: the turn in flight finished, the rest was not sent."""
    failed: int
    """Conversations ended by a failed turn (no answer to carry on with); the failure is counted in ``errors``."""
    dropped: int
    """Open loop: conversations whose first turn was dropped at the in-flight cap."""
    turns_sent: int
    """Turns sent."""
    turns_planned: int
    """Turns the started conversations were to send (the dataset's turns, cut to the server's context)."""


class TurnLevel(Doc):
    """One variant at one level and turn: its clean steps pooled."""

    variant: str
    """The variant."""
    level: float
    """Load level, as the mode says."""
    turn: int
    """The turn."""
    requests: int
    """Requests measured (clean steps, steady windows)."""
    ttft_p50_ms: float | None = None
    """TTFT P50 (open loop: from the intended send), ms."""
    tpot_p50_ms: float | None = None
    """TPOT P50, ms."""
    decode_tps: float | None = None
    """Mean decode tok/s per request."""
    prompt_tokens: float | None = None
    """Mean prompt tokens, as the server counted them."""
    cached_tokens: float | None = None
    """Mean prompt tokens served by the server's prefix cache (null: not reported)."""


class TurnComparison(Doc):
    """A variant against the baseline at one level and turn, paired by request (the same conversation's turn)."""

    variant: str
    """The compared variant."""
    level: float
    """Load level."""
    turn: int
    """The turn."""
    ttft_p50_speedup: Ratio
    """TTFT P50, baseline / variant (open loop: from the intended send)."""
    tpot_p50_speedup: Ratio
    """TPOT P50, baseline / variant."""
    decode_tps_speedup: Ratio
    """Mean decode tok/s per request, variant / baseline."""


class Histories(Doc):
    """Whether a variant's conversations carried the same answers as the baseline's."""

    variant: str
    """The compared variant."""
    compared: int
    """Paired turns from turn 2 on that both sides sent (the same conversation and turn)."""
    diverged: int
    """Of which the history (the earlier answers) differed from the baseline's: the variant answered differently."""
    text: str
    """The same in words."""


class ConversationSummary(Doc):
    turns: int
    """Turns per conversation (``load.conversation.turns``; a dataset's conversation may have fewer)."""
    think_s: float
    """Seconds between an answer and the next user message."""
    levels: list[TurnLevel] = []
    """Per variant (run order), level and turn."""
    comparisons: list[TurnComparison] = []
    """Per variant, level and turn: speed-ups against the baseline."""
    histories: list[Histories] = []
    """Per variant: paired histories that differed from the baseline's."""

"""The scale-out document of ``summary.json`` (``Summary.scale_out``), typed: one server against N, per variant, with
the slope of goodput, the scaling efficiency, each step and how the requests were spread. Present only when the run
had scale-out steps (``--scale-out N`` / ``scale_out:``; ``analysis.scaleout``).
"""

from __future__ import annotations

from .server_documents import Doc, Interval

__all__ = ["ScaleOutSummary", "ScaleOutVariant", "ScaleStep", "ServerShare"]


class ServerShare(Doc):
    """The requests of a step's steady window that went to one of its servers."""

    server: int
    """Index of the server: 0 is the variant's own (the one-server steps use it), 1.. the further ones."""
    requests: int
    errors: int
    output_tokens: int
    """Output tokens of its successful requests."""
    share: float
    """Its requests / the step's requests."""


class ScaleStep(Doc):
    """One step of the scale-out: its servers, its status and the figures the slope rests on."""

    step: int
    pair: int
    """Which (1 server, N servers) pair it belongs to; pairs alternate their order (ABBA)."""
    servers: int
    level: float
    """The whole step's level: servers x level per server."""
    server_level: float
    status: str
    """clean, or why it is left out of the slope (contended, insufficient, ...)."""
    status_reasons: list[str] = []
    requests: int = 0
    errors: int = 0
    goodput_rps: float | None = None
    """Good requests (succeeded, every per-request SLO met) per second of the steady window, all servers."""
    goodput_rps_ci95: Interval = None
    output_tps: float | None = None
    output_tps_ci95: Interval = None
    ttft_p50_ms: float | None = None
    """Over all requests, failures at the time they failed (open loop: from the intended send)."""
    ttft_p99_ms: float | None = None
    tpot_p50_ms: float | None = None
    per_server: list[ServerShare] = []
    """How the round-robin spread the requests (empty for steps before this field existed)."""


class ScaleOutVariant(Doc):
    variant: str
    servers: int
    server_level: float
    unit: str
    """``concurrent streams`` (closed loop) or ``req/s`` (open loop), per server."""
    steps: list[ScaleStep] = []
    one_goodput_rps: float | None = None
    """One server's goodput, its clean steps pooled."""
    one_goodput_rps_ci95: Interval = None
    many_goodput_rps: float | None = None
    """N servers' goodput, their clean steps pooled."""
    many_goodput_rps_ci95: Interval = None
    slope: float | None = None
    """N servers' goodput / one server's, the clean pairs paired (block ratio, as the speed-ups): N is linear."""
    slope_ci95: Interval = None
    pairs: int = 0
    """Pairs the slope rests on (both steps clean)."""
    pairs_agree: bool | None = None
    """Whether the pairs agree beyond their noise (null: fewer than two)."""
    efficiency: float | None = None
    """slope / N: 1 is linear scaling."""
    efficiency_ci95: Interval = None
    tokens_slope: float | None = None
    """The same ratio for output tok/s."""
    tokens_slope_ci95: Interval = None
    scaling: str = "not judged"
    """``linear`` (the slope's CI reaches N), ``sub-linear`` (CI between 1 and N), ``no gain`` (CI reaches 1 or
    below), ``not judged`` (no clean pair)."""
    excluded: list[str] = []
    """Steps left out of the slope, with their reasons."""
    text: str
    """The answer in words."""


class ScaleOutSummary(Doc):
    """One server against N after each ladder: does capacity scale with servers?"""

    servers: int
    level: float
    """Per server."""
    pairs: int
    """Planned (1 server, N servers) pairs per variant."""
    min_efficiency: float | None = None
    """The gate (null: none): exit 3 when the efficiency's whole CI lies below it."""
    method: str
    variants: list[ScaleOutVariant] = []
    text: str

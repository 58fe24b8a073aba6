"""The scale-out document of ``summary.json`` (``Summary.scale_out``), typed: one server against N, per variant, with
the slope of goodput, the scaling efficiency, each step and how the requests were spread. Present only when the run
had scale-out steps (``--scale-out N`` / ``scale_out:``; ``analysis.scale_out``).
"""

from __future__ import annotations

from .base import Doc, Interval

__all__ = ["ScaleOutSummary", "ScaleOutVariant", "ScaleStep", "ServerShare"]


class ServerShare(Doc):
    """The requests of a step's steady window that went to one of its servers."""

    server: int
    """Index of the server: 0 is the variant's own (the one-server steps use it), 1.. the further ones."""
    requests: int
    """Requests of the steady window sent to it, failed ones included."""
    errors: int
    """Failed requests among them."""
    output_tokens: int
    """Output tokens of its successful requests."""
    share: float
    """Its requests / the step's requests."""


class ScaleStep(Doc):
    """One step of the scale-out: its servers, its status and the figures the slope rests on."""

    step: int
    """Step number in steps.json."""
    pair: int
    """Which (1 server, N servers) pair it belongs to; pairs alternate their order (ABBA)."""
    servers: int
    """Servers the step spread its requests over (1 or N)."""
    level: float
    """The whole step's level: servers x level per server."""
    server_level: float
    """Level per server (users, or offered req/s in open loop)."""
    status: str
    """clean, or why it is left out of the slope (contended, insufficient, ...)."""
    status_reasons: list[str] = []
    """Every reason that applies, the status's first."""
    requests: int = 0
    """Requests sent in the steady window, failed ones included, all servers."""
    errors: int = 0
    """Failed requests among them."""
    goodput_rps: float | None = None
    """Good requests (succeeded, every per-request SLO met) per second of the steady window, all servers."""
    goodput_rps_ci95: Interval = None
    """95% t interval of ``goodput_rps`` over its per-second bins (AR(1)-aware, ``analysis.rates``)."""
    output_tps: float | None = None
    """Aggregate output tok/s of the steady window, all servers."""
    output_tps_ci95: Interval = None
    """95% t interval of ``output_tps`` over its per-second bins (AR(1)-aware)."""
    ttft_p50_ms: float | None = None
    """Over all requests, failures at the time they failed (open loop: from the intended send)."""
    ttft_p99_ms: float | None = None
    """P99 of the same TTFT, ms."""
    cached_fraction: float | None = None
    """Share of the step's prompt tokens its servers took from their prompt caches, as the responses say (null: not
    measured)."""
    tpot_p50_ms: float | None = None
    """Median TPOT over all requests (one that failed after two tokens counts with its pace until then), ms."""
    per_server: list[ServerShare] = []
    """How the round-robin spread the requests (empty for steps before this field existed)."""


class ScaleOutVariant(Doc):
    variant: str
    """The variant."""
    servers: int
    """N: the servers of the many-server steps."""
    server_level: float
    """Level per server, in ``unit``."""
    unit: str
    """``concurrent streams`` (closed loop) or ``req/s`` (open loop), per server."""
    steps: list[ScaleStep] = []
    """Every scale-out step of the variant, in run order."""
    one_goodput_rps: float | None = None
    """One server's goodput, its clean steps pooled."""
    one_goodput_rps_ci95: Interval = None
    """95% t interval of ``one_goodput_rps`` over the pooled per-second bins (AR(1)-aware)."""
    many_goodput_rps: float | None = None
    """N servers' goodput, their clean steps pooled."""
    many_goodput_rps_ci95: Interval = None
    """95% t interval of ``many_goodput_rps`` over the pooled per-second bins (AR(1)-aware)."""
    slope: float | None = None
    """N servers' goodput / one server's, the clean pairs paired (block ratio, as the speed-ups): N is linear."""
    slope_ci95: Interval = None
    """95% interval of ``slope``: pairs of blocks pooled with random effects (``rates.block_ratio_ci``)."""
    pairs: int = 0
    """Pairs the slope rests on (both steps clean)."""
    pairs_agree: bool | None = None
    """Whether the pairs agree beyond their noise (null: fewer than two)."""
    efficiency: float | None = None
    """slope / N: 1 is linear scaling."""
    efficiency_ci95: Interval = None
    """``slope_ci95`` / N."""
    tokens_slope: float | None = None
    """The same ratio for output tok/s."""
    tokens_slope_ci95: Interval = None
    """95% interval of ``tokens_slope``, computed as ``slope_ci95``."""
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
    """N: the servers of the many-server steps."""
    level: float
    """Per server."""
    pairs: int
    """Planned (1 server, N servers) pairs per variant."""
    min_efficiency: float | None = None
    """The gate (null: none): exit 3 when the efficiency's whole CI lies below it."""
    method: str
    """How the slope and the efficiency are computed, in words."""
    variants: list[ScaleOutVariant] = []
    """Per variant with scale-out steps, in run order."""
    text: str
    """Every variant's answer in words, joined by "; "."""

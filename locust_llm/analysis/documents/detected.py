"""What each variant's numbers rest on: its server, what the run found out about it, and every request the run sent
it. Part of ``summary.json`` (``detected``; ``analysis.detected`` builds it)."""

from __future__ import annotations

from .base import Doc

__all__ = ["Detected", "RequestCount"]


class RequestCount(Doc):
    """Requests of one kind the run sent a server besides the measured streams (``env.json`` ``server_requests``)."""

    purpose: str
    """Why: server checks (health, models, context size), token counting (sizing the prompts; splitting final-only
    usage totals over chunks between windows), consistency, quality, telemetry (``/metrics`` scrapes), probes,
    faults."""
    method: str
    """HTTP method."""
    path: str
    """Path on the server."""
    count: int
    """How many."""
    while_running: int = 0
    """Those of them sent while a step ran (its warm-up, its window, or the window's last streams arriving):
    telemetry scrapes and probes by design; token counting never (it waits for a pause in the load)."""


class Detected(Doc):
    """One variant's server and what its numbers rest on, as the console's first lines of a ``--host`` run say."""

    url: str | None = None
    """Where the requests went."""
    launched: bool | None = None
    """True: the run started the server; False: it was running already (``--host``)."""
    server: str = ""
    """The server in words: the launched engine, or what ``/v1/models`` says owns the model."""
    model: str | None = None
    """The model requested (the server's own name for it unless ``--model`` gave one)."""
    api: str | None = None
    """completions or chat."""
    token_sources: dict[str, int] = {}
    """Requests per token-count source (docs/metrics.md, "Token counts and their source")."""
    usage: str = ""
    """How the server reports token counts, in words (per chunk, a final total only, none)."""
    cached_prompt_tokens: bool | None = None
    """The server's final usage says how many prompt tokens came from its cache (``prompt_tokens_details.
    cached_tokens``, llama.cpp ``timings.cache_n``); null: no stream ended to tell."""
    spec_decoding: str = ""
    """Which speculative-decoding figures the server gives: its counters on ``/metrics``, per-request draft counts
    in the responses, or none."""
    metrics: str = ""
    """Whether ``/metrics`` answered, and with which engine's names."""
    streams: dict[str, int] = {}
    """Measured streams sent to this server (every variant's that went there), per ``METHOD path``: the rows of
    ``requests.parquet`` that were sent."""
    requests: list[RequestCount] = []
    """Everything else the run sent this server (null counts are left out)."""
    accounted: dict[str, int] = {}
    """Per ``METHOD path``: streams plus the other requests, what the server's own count should show."""
    text: str = ""
    """The above in a few lines."""

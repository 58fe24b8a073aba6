"""What each variant's numbers rest on: the server (launched or attached with ``--host``), the model and API, what
the run found out about the server (how it counts tokens, whether it reports cached prompt tokens, its
speculative-decoding figures, its ``/metrics``), and every request the run sent it, so that the server's own count
can be reconciled: measured streams (the rows of ``requests.parquet`` that were sent) + the other requests listed
(``env.json`` ``server_requests``, ``client.ledger``) = what the server received. Pure.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from ..client.engines import PATHS
from ..client.ledger import server_of
from ..client.usage import CACHED_PROMPT_TOKENS
from ..fmt import shown
from ..rundir.env import ServerEnv
from ..rundir.load import RunData
from ..rundir.telemetry_meta import TelemetryMeta

__all__ = ["detected"]

OWNERS = {"llamacpp": "llama.cpp", "vllm": "vLLM", "sglang": "SGLang"}
USAGE = {
    "usage_deltas": "cumulative usage on every chunk (exact per-chunk counts)",
    "token_ids": "token ids on every chunk",
    "server_events": "one event per token, checked against the final usage",
    "server_events+usage": "one event per token, checked against the final usage",
    "usage_below_events": "one event per token, with a final usage below their number",
    "usage+tokenizer": "a final usage total only (split over chunks by the tokenizer)",
    "usage+text_share": "a final usage total only (split over chunks by text length: ITL approximate)",
    "tokenizer": "no usage (the tokenizer counted the text)",
    "unknown": "no usage and no tokenizer (token counts unknown)",
}


def _server_words(server: ServerEnv, engine: str | None) -> str:
    if server.launched:
        return f"{server.engine or engine or 'a server'}, launched by the run"
    owner = server.owned_by
    if not owner:
        return "already running (--host); its /v1/models does not say what it is"
    known = f" ({OWNERS[owner]})" if owner in OWNERS else ""
    return f"already running (--host); its /v1/models says owned_by {shown(owner)}{known}"


def _metrics_words(entry: dict, meta: TelemetryMeta, variant: str) -> str:
    telemetry = entry.get("telemetry") or {}
    if telemetry.get("missing"):
        return f"not read: {telemetry['missing']}"
    scraped = [
        s for a in meta.attachments if a.variant == variant for s in a.sources if s.source in ("scrape", "prometheus")
    ]
    # Found: samples were recorded (a run before the count: a poll answered). A source that answered with none of
    # the names it reads is "not found", with the gap's reason when there is one.
    answered = [s for s in scraped if (s.samples if s.samples is not None else s.polls - s.failures) > 0]
    if answered:
        engine = telemetry.get("engine")
        names = f"{OWNERS.get(engine, engine)} names, " if engine and engine != "external" else ""
        return f"found ({names}{'scraped' if answered[0].source == 'scrape' else 'through Prometheus'})"
    errors = [g.get("error") for g in telemetry.get("gaps") or [] if g.get("error")]
    if errors:
        return f"not found: {shown(errors[0])}"
    if any(s.polls > s.failures for s in scraped):
        return "not exposed (its pages hold none of the names read)"
    return "not found"


def _spec_words(steps: list[dict]) -> str:
    counters = any(((s.get("server") or {}).get("acceptance") or {}).get("draft_tokens") for s in steps)
    responses = any(s.get("acceptance_client") for s in steps)
    found = [
        text
        for text, present in (
            ("the server's draft and accepted-token counters on /metrics", counters),
            ("per-request draft counts in the responses", responses),
        )
        if present
    ]
    return " and ".join(found) if found else "none reported (no draft counts in the responses or on /metrics)"


def _usage_words(sources: dict[str, int]) -> str:
    if not sources:
        return "no stream answered"
    main = max(sources, key=lambda source: sources[source])
    return USAGE.get(main, main) + (f" ({', '.join(sorted(sources))})" if len(sources) > 1 else "")


def _streams(requests: pd.DataFrame, variants: list[str]) -> dict[str, int]:
    """Measured streams of ``variants`` that were sent (a connection refused sends nothing), per method and path;
    a scale-out step's further servers are theirs."""
    if not len(requests):
        return {}
    rows = requests[requests["variant"].isin(variants) & requests["t_send"].notna()]
    if "server" in rows:
        rows = rows[rows["server"].fillna(0) == 0]
    return {f"POST {PATHS.get(api, api)}": int(n) for api, n in rows["api"].value_counts().sort_index().items()}


def detected(run: RunData, variants: dict[str, dict]) -> dict[str, dict]:
    """Per variant of the summary (``variants``: its figures so far), what its numbers rest on."""
    env = run.env
    seen = env.server_seen
    scenario_server = env.recorded_scenario.server
    by_url: dict[str, list[str]] = {}
    for name, known in env.servers.items():
        if known is not None and known.url:
            by_url.setdefault(server_of(known.url), []).append(name)
    out = {}
    for name, entry in variants.items():
        server = env.server(name)
        steps = entry.get("steps") or []
        sources: Counter[str] = Counter()
        for s in steps:
            sources.update(s.get("token_sources") or {})
        key = server_of(server.url) if server.url else None
        requests = [
            {
                **e.model_dump(include={"purpose", "method", "path", "count"}),
                "while_running": sum(step.count for step in e.while_running),
            }
            for e in env.server_requests
            if e.server == key
        ]
        streams = _streams(run.requests, by_url.get(key, [name]) if key is not None else [name])
        accounted: Counter[str] = Counter(streams)
        for e in requests:
            accounted[f"{e['method']} {e['path']}"] += e["count"]
        facts = {
            "url": server.url,
            "launched": server.launched,
            "server": _server_words(server, scenario_server.engine if scenario_server else None),
            "model": server.served_model or server.model,
            "api": env.recorded_load.api,
            "token_sources": dict(sources),
            "usage": _usage_words(dict(sources)),
            "cached_prompt_tokens": (CACHED_PROMPT_TOKENS in seen.get(key or "", [])) if sources else None,
            "spec_decoding": _spec_words(steps),
            "metrics": _metrics_words(entry, run.telemetry_meta, name),
            "streams": streams,
            "requests": requests,
            "accounted": dict(sorted(accounted.items())),
        }
        facts["text"] = _text(name, facts)
        out[name] = facts
    return out


def _text(name: str, f: dict) -> str:
    cached = {True: "reported", False: "not reported", None: "unknown (no stream ended)"}[f["cached_prompt_tokens"]]
    others = ", ".join(
        f"{e['method']} {e['path']} {e['count']:,} ({e['purpose']}"
        + (f"; {e['while_running']:,} while a step ran)" if e["while_running"] else ")")
        for e in f["requests"]
    )
    streams = ", ".join(f"{k} {n:,}" for k, n in f["streams"].items()) or "none"
    totals = ", ".join(f"{k} {n:,}" for k, n in f["accounted"].items()) or "none"
    return "\n".join(
        [
            f"server of {name}: {f['url'] or 'not recorded'}, {f['server']}; model {shown(f['model']) or 'not said'}; "
            f"API {f['api'] or 'not recorded'}",
            f"  detected: token counts from {f['usage']}; cached prompt tokens {cached}; speculative decoding: "
            f"{f['spec_decoding']}; /metrics {f['metrics']}",
            f"  requests it received from the run: measured streams {streams}; besides them {others or 'none'}; "
            f"in all {totals}",
        ]
    )

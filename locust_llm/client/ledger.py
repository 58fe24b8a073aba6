"""What this process sent to servers besides the measured streams, and what the streams' answers showed of them.

* **Requests**, counted by server, purpose, method and path, so that a user can account for every request their
  server received: the measured streams are the rows of ``requests.parquet``, everything else (checks, token
  counting, the consistency and quality prompts, telemetry scrapes, probes) is counted here. Control-plane calls
  count themselves (``client.control.call`` and the sessions of ``client.http``) with the purpose their caller
  names; a request is counted once it is attempted on an open connection (``control``) or handed to the HTTP stack
  (sessions).
* **What the answers showed** (``seen``): facts about a server that only its streams tell, such as whether its final
  usage says how many prompt tokens it served from its cache (``client.usage``).

One ledger per process: the load processes send theirs to the master with their records (``runtime.shipper``), and
the master writes the sum to ``env.json`` (``server_requests``, ``server_seen``). Pure bookkeeping; no I/O.
"""

from __future__ import annotations

from collections import Counter
from urllib.parse import urlsplit

__all__ = ["count", "merged", "reset", "see", "snapshot"]

_COUNTS: Counter[tuple[str, str, str, str]] = Counter()
_SEEN: set[tuple[str, str]] = set()


def server_of(url: str) -> str:
    """``scheme://host:port`` of ``url`` (never its user name or password), the key the run's servers go by."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}:{port}"


def count(purpose: str, method: str, url: str) -> None:
    """One request of ``purpose`` to ``url`` (its query string left out)."""
    _COUNTS[(server_of(url), purpose, method.upper(), urlsplit(url).path or "/")] += 1


def see(url: str, fact: str) -> None:
    """The server at ``url`` showed ``fact`` in an answer."""
    _SEEN.add((server_of(url), fact))


def reset() -> None:
    """A new run in this process starts from zero."""
    _COUNTS.clear()
    _SEEN.clear()


def snapshot() -> dict:
    """This process's ledger so far: ``{"requests": [one entry per server, purpose, method and path],
    "seen": {server: [facts]}}``."""
    return merged({"requests": _entries(_COUNTS), "seen": _grouped(_SEEN)})


def merged(*snapshots: dict) -> dict:
    """Several processes' snapshots as one: counts summed, facts joined."""
    total: Counter[tuple[str, str, str, str]] = Counter()
    seen: set[tuple[str, str]] = set()
    for snap in snapshots:
        for e in (snap or {}).get("requests") or []:
            total[(e["server"], e["purpose"], e["method"], e["path"])] += int(e["count"])
        seen.update((server, fact) for server, facts in ((snap or {}).get("seen") or {}).items() for fact in facts)
    return {"requests": _entries(total), "seen": _grouped(seen)}


def _entries(counts: Counter) -> list[dict]:
    return [
        {"server": server, "purpose": purpose, "method": method, "path": path, "count": n}
        for (server, purpose, method, path), n in sorted(counts.items())
    ]


def _grouped(seen: set[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for server, fact in sorted(seen):
        out.setdefault(server, []).append(fact)
    return out

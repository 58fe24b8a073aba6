"""What this process sent to servers besides the measured streams, and what the streams' answers showed of them.

* **Requests**, counted by server, purpose, method and path, so that a user can account for every request their
  server received: the measured streams are the rows of ``requests.parquet``, everything else (checks, token
  counting, the consistency and quality prompts, telemetry scrapes, probes) is counted here. Control-plane calls
  count themselves (``client.control.call`` and the sessions of ``client.http``) with the purpose their caller
  names; a request is counted once it is attempted on an open connection (``control``) or handed to the HTTP stack
  (sessions).
  Each count also says how many were sent while a step ran (its warm-up, its window, or the window's last streams
  still arriving: ``watch``), per step: what competes with the measurement, where tokenizer calls must be none.
* **What the answers showed** (``seen``): facts about a server that only its streams tell, such as whether its final
  usage says how many prompt tokens it served from its cache (``client.usage``).

One ledger per process: the load processes send theirs to the master with their records (``runtime.shipper``), and
the master writes the sum to ``env.json`` (``server_requests``, ``server_seen``). Pure bookkeeping; no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from urllib.parse import urlsplit

__all__ = ["count", "merged", "reset", "see", "snapshot", "watch"]

_COUNTS: Counter[tuple[str, str, str, str]] = Counter()
_RUNNING: Counter[tuple[str, str, str, str, str, int]] = Counter()  # the same keys, and the step that ran
_SEEN: set[tuple[str, str]] = set()


def _between_steps() -> tuple[str, int] | None:
    return None


_step_running: Callable[[], tuple[str, int] | None] = _between_steps


def server_of(url: str) -> str:
    """``scheme://host:port`` of ``url`` (never its user name or password), the key the run's servers go by."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}:{port}"


def watch(step_running: Callable[[], tuple[str, int] | None]) -> None:
    """How this process tells the step that runs now (variant and step number; None between steps)."""
    global _step_running
    _step_running = step_running


def count(purpose: str, method: str, url: str) -> None:
    """One request of ``purpose`` to ``url`` (its query string left out)."""
    key = (server_of(url), purpose, method.upper(), urlsplit(url).path or "/")
    _COUNTS[key] += 1
    running = _step_running()
    if running is not None:
        _RUNNING[(*key, *running)] += 1


def see(url: str, fact: str) -> None:
    """The server at ``url`` showed ``fact`` in an answer."""
    _SEEN.add((server_of(url), fact))


def reset() -> None:
    """A new run in this process starts from zero."""
    _COUNTS.clear()
    _RUNNING.clear()
    _SEEN.clear()


def snapshot() -> dict:
    """This process's ledger so far: ``{"requests": [one entry per server, purpose, method and path, with
    ``while_running``: those sent while a step ran, per step], "seen": {server: [facts]}}``."""
    return {"requests": _entries(_COUNTS, _RUNNING), "seen": _grouped(_SEEN)}


def merged(*snapshots: dict) -> dict:
    """Several processes' snapshots as one: counts summed, facts joined."""
    total: Counter[tuple[str, str, str, str]] = Counter()
    running: Counter[tuple[str, str, str, str, str, int]] = Counter()
    seen: set[tuple[str, str]] = set()
    for snap in snapshots:
        for e in (snap or {}).get("requests") or []:
            key = (e["server"], e["purpose"], e["method"], e["path"])
            total[key] += int(e["count"])
            for step in e["while_running"]:
                running[(*key, step["variant"], int(step["step"]))] += int(step["count"])
        seen.update((server, fact) for server, facts in ((snap or {}).get("seen") or {}).items() for fact in facts)
    return {"requests": _entries(total, running), "seen": _grouped(seen)}


def _entries(counts: Counter, running: Counter) -> list[dict]:
    steps: dict[tuple, list[dict]] = {}
    for (*key, variant, step), n in sorted(running.items()):
        steps.setdefault(tuple(key), []).append({"variant": variant, "step": step, "count": n})
    return [
        {
            "server": key[0],
            "purpose": key[1],
            "method": key[2],
            "path": key[3],
            "count": n,
            "while_running": steps.get(key, []),
        }
        for key, n in sorted(counts.items())
    ]


def _grouped(seen: set[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for server, fact in sorted(seen):
        out.setdefault(server, []).append(fact)
    return out

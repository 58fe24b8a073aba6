"""The reference server's configuration, pure: its defaults and choices, the ``ref`` object's validation, and
the token schedule (chunk sizes, token text, word ids), which tests use to predict what a stream holds.

Kept apart from ``server`` (the gevent WSGI application) so that what a stream will be can be computed and
checked without a server, and the server module stays small.
"""

from __future__ import annotations

import itertools
import zlib
from typing import Any

__all__ = [
    "BadRequest",
    "DEFAULTS",
    "FRAMINGS",
    "HUGE_EVENT_BYTES",
    "LOG_SIZE",
    "MODEL",
    "MODELS_ANSWERS",
    "USAGE_MODES",
    "chunk_sizes",
    "patch",
    "REASONING_FORMATS",
    "token_parts",
    "validate",
    "word_ids",
]

MODEL = "refserver-model"
USAGE_MODES = ("continuous", "final", "none")
FAULTS = (
    "none",
    "truncate_after",
    "malformed_after",
    "http_500",
    "http_500_endless",
    "error_event",
    "error_event_after",
    "empty",
    "reset_after",
    "close_after",
    "huge_event_after",
)
MODELS_ANSWERS = ("object", "list", "garbage")
HUGE_EVENT_BYTES = 8 << 20
FRAMINGS = ("chunked", "close")
REASONING_FORMATS = ("reasoning_content", "reasoning", "think_tags")
DEFAULTS: dict[str, Any] = {
    "ttft_s": 0.05,
    "gap_s": 0.01,
    "tokens_per_chunk": 1,
    "usage": "continuous",
    "llamacpp": False,
    "fault": "none",
    "stall_once_s": 0.0,
    "pause_once_s": 0.0,
    "headers_early": True,
    "framing": "chunked",
    "patch_last": {},
    "drop_connection": False,
    "draft_n": 0,
    "draft_accepted": 0,
    "image_ms_per_kpx": 0.0,
    "prefill_s_per_token": 0.0,
    "reasoning_tokens": 0,
    "reasoning_format": "reasoning_content",
    "reasoning_details": False,
    "unique_answers": False,
    "usage_factor": 1.0,
    "id": None,
}
LOG_SIZE = 50_000


class BadRequest(ValueError):
    pass


def parse_fault(fault: str) -> tuple[str, int]:
    """``"reset_after:3"`` -> ``("reset_after", 3)``; ``"http_500"`` -> ``("http_500", 0)``."""
    kind, _, n = str(fault).partition(":")
    if kind not in FAULTS:
        raise BadRequest(f"unknown fault {fault!r}; one of {', '.join(FAULTS)} (with ':N' where it ends in _after)")
    if kind.endswith("_after"):
        try:
            count = int(n)
        except ValueError:
            raise BadRequest(f"fault {fault!r} needs a chunk count, e.g. {kind}:3") from None
        if count < 0:
            raise BadRequest(f"fault {fault!r}: the chunk count must be >= 0")
        return ("error_event" if kind == "error_event_after" else kind), count
    if n:
        raise BadRequest(f"fault {fault!r} takes no count")
    return kind, 0


def validate(cfg: dict[str, Any]) -> dict[str, Any]:
    unknown = set(cfg) - set(DEFAULTS)
    if unknown:
        raise BadRequest(f"unknown ref keys {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    for key in (
        "ttft_s",
        "gap_s",
        "stall_once_s",
        "pause_once_s",
        "image_ms_per_kpx",
        "prefill_s_per_token",
        "usage_factor",
    ):
        if not isinstance(cfg[key], (int, float)) or cfg[key] < 0:
            raise BadRequest(f"ref.{key} must be a number >= 0, got {cfg[key]!r}")
    tpc = cfg["tokens_per_chunk"]
    tpc = list(tpc) if isinstance(tpc, (list, tuple)) else [tpc]
    if not tpc or not all(isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in tpc):
        raise BadRequest(
            f"ref.tokens_per_chunk must be an int >= 1 or a non-empty list of them, got {cfg['tokens_per_chunk']!r}"
        )
    cfg["tokens_per_chunk"] = tpc
    if cfg["usage"] not in USAGE_MODES:
        raise BadRequest(f"ref.usage must be one of {USAGE_MODES}, got {cfg['usage']!r}")
    if cfg["framing"] not in FRAMINGS:
        raise BadRequest(f"ref.framing must be one of {FRAMINGS}, got {cfg['framing']!r}")
    if not isinstance(cfg["patch_last"], dict):
        raise BadRequest("ref.patch_last must be an object of dotted paths to values")
    n = cfg["reasoning_tokens"]
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise BadRequest(f"ref.reasoning_tokens must be an int >= 0, got {n!r}")
    if cfg["reasoning_format"] not in REASONING_FORMATS:
        raise BadRequest(f"ref.reasoning_format must be one of {REASONING_FORMATS}, got {cfg['reasoning_format']!r}")
    if cfg["reasoning_format"] == "think_tags" and n == 1:
        raise BadRequest("ref.reasoning_tokens must be 0 or >= 2 with think_tags (<think> and </think> are tokens)")
    cfg["fault"] = parse_fault(cfg["fault"])
    return cfg


def patch(obj: dict, dotted: str, value: Any) -> None:
    """Set ``obj["a"][0]["b"] = value`` for ``"a.0.b"``, creating objects on the way."""
    *path, last = dotted.split(".")
    for key in path:
        obj = obj[int(key)] if isinstance(obj, list) else obj.setdefault(key, {})
    if isinstance(obj, list):
        obj[int(last)] = value
    else:
        obj[last] = value


def chunk_sizes(max_tokens: int, pattern: list[int]) -> list[int]:
    sizes, left = [], max_tokens
    for k in itertools.cycle(pattern):
        if left <= 0:
            break
        sizes.append(min(k, left))
        left -= sizes[-1]
    return sizes


def token_parts(start: int, n: int, reasoning_tokens: int, think_tags: bool, tag: str = "") -> tuple[str, str]:
    """The reasoning and answer text of tokens ``start .. start + n - 1``, one word `` w<k>`` per token (with
    ``unique_answers``, `` w<k>s<stream>``: each stream's answer its own): the first ``reasoning_tokens`` tokens of
    a stream are reasoning; with ``think_tags`` they open with ``<think>`` and close with ``</think>`` (one token
    each) and travel as answer text, as a server that does not separate them sends them."""
    reasoning, answer = [], []
    for k in range(start, start + n):
        if k >= reasoning_tokens:
            answer.append(f" w{k}{tag}")
        elif think_tags:
            answer.append("<think>" if k == 0 else "</think>" if k == reasoning_tokens - 1 else f" w{k}{tag}")
        else:
            reasoning.append(f" w{k}{tag}")
    return "".join(reasoning), "".join(answer)


def word_ids(text: str) -> list[int]:
    return [zlib.crc32(w.encode()) % 32000 for w in text.split()]

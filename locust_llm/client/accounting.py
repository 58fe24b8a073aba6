"""Stamped SSE events -> token counts per chunk, offsets, finish reason and error class. Pure.

The stamping code (``stream``) only collects ``Event(t, data)`` pairs; everything here runs after the
stream has ended, so none of it delays a timestamp.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..records import ErrorClass, RequestRecord

__all__ = ["Event", "account", "choice_text", "count_tokens"]


@dataclass
class Event:
    t: float
    data: dict


def choice_text(choice: dict) -> str:
    if "text" in choice:
        return choice.get("text") or ""
    delta = choice.get("delta") or {}
    return (delta.get("content") or "") + (delta.get("reasoning_content") or delta.get("reasoning") or "")


def _token_ids(chunk: dict) -> int | None:
    """Tokens in a chunk when the server lists them (vLLM return_token_ids, llama.cpp tokens)."""
    for choice in chunk.get("choices") or []:
        for key in ("token_ids", "tokens"):
            ids = choice.get(key)
            if isinstance(ids, list):
                return len(ids)
    return None


def count_tokens(events: list[Event], tokenize: Callable[[str], int] | None) -> tuple[list[int], str, int | None]:
    """Tokens per event, the source of that count, and the server's final completion total (if any).

    Order: cumulative usage deltas (vLLM/SGLang continuous usage), token lists per chunk, the
    server's one-event-per-token stream checked against its final usage (llama.cpp), a tokenizer.
    """
    usage = [((e.data.get("usage") or {}).get("completion_tokens")) for e in events]
    texts = ["".join(choice_text(c) for c in e.data.get("choices") or []) for e in events]
    final_total = next((u for u in reversed(usage) if isinstance(u, int)), None)
    carries_text = [bool(t) for t in texts]
    with_text_have_usage = all(isinstance(u, int) for u, c in zip(usage, carries_text) if c)
    # A count that only appears on the final usage chunk is not per-chunk information.
    per_chunk_usage = sum(isinstance(u, int) for u in usage) > 1 and with_text_have_usage
    if per_chunk_usage:
        counts, previous = [], 0
        for u in usage:
            if isinstance(u, int):
                counts.append(max(u - previous, 0))
                previous = max(previous, u)
            else:
                counts.append(0)
        return counts, "usage_deltas", final_total
    id_counts = [_token_ids(e.data) for e in events]
    if any(c is not None for c in id_counts):
        return [c or 0 for c in id_counts], "token_ids", final_total
    is_llamacpp = any("timings" in e.data for e in events)
    one_per_event = [1 if c else 0 for c in carries_text]
    if is_llamacpp or (final_total is not None and final_total == sum(one_per_event)):
        if final_total is not None and final_total != sum(one_per_event) and any(one_per_event):
            # llama.cpp holds back incomplete UTF-8, so one event can carry several tokens;
            # the server's total is exact, the difference lands on the last text event.
            last = max(i for i, c in enumerate(one_per_event) if c)
            one_per_event[last] += final_total - sum(one_per_event)
            return one_per_event, "server_events+usage", final_total
        return one_per_event, "server_events", final_total
    if tokenize is not None:
        try:
            return [tokenize(t) if t else 0 for t in texts], "tokenizer", final_total
        except Exception:  # a failing tokenizer leaves counts unknown, below
            pass
    return [0] * len(events), "unknown", final_total


def account(record: RequestRecord, events: list[Event], done: bool,
            tokenize: Callable[[str], int] | None = None) -> None:
    """Fill ``record`` from the stream's stamped events; ``done``: the stream ended properly."""
    counts, source, final_total = count_tokens(events, tokenize)
    record.token_source = source
    for event, n in zip(events, counts):
        if n > 0:
            record.chunk_offsets.append(event.t - record.t_send)
            record.chunk_tokens.append(n)
    record.output_tokens = sum(record.chunk_tokens) if record.chunk_tokens else (final_total or 0)
    if record.chunk_offsets:
        record.t_first = record.t_send + record.chunk_offsets[0]
        record.t_end = record.t_send + record.chunk_offsets[-1]
    for event in events:
        for choice in event.data.get("choices") or []:
            if choice.get("finish_reason"):
                record.finish_reason = choice["finish_reason"]
        usage = event.data.get("usage") or {}
        if isinstance(usage.get("prompt_tokens"), int):
            record.prompt_tokens = usage["prompt_tokens"]
        timings = event.data.get("timings") or {}
        if "draft_n" in timings:
            record.draft_n = int(timings["draft_n"])
            record.draft_accepted = int(timings.get("draft_n_accepted", 0))
        spec = (event.data.get("metrics") or {}).get("speculative_decoding") or {}
        if "num_draft_tokens" in spec:
            record.draft_n = int(spec["num_draft_tokens"])
            record.draft_accepted = int(spec.get("num_accepted_draft_tokens", 0))
    if record.error_class is None:
        if not done:
            record.error_class = ErrorClass.TRUNCATED
            record.error_message = f"stream ended without [DONE] or finish_reason after {len(events)} events"
        elif record.output_tokens == 0:
            record.error_class = ErrorClass.EMPTY
            record.error_message = "the server finished without producing a token"

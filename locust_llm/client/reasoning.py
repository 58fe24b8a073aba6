"""Which part of a stream was reasoning and which the answer: per chunk, after the stream. Pure.

A reasoning model streams its thinking first and its answer after. Servers that separate them put the thinking
in ``delta.reasoning_content`` (vLLM, SGLang, llama.cpp ``--reasoning-format``) or ``delta.reasoning``
(OpenRouter, newer vLLM) and the answer in ``delta.content``; servers that do not leave ``<think>...</think>`` in
the content, which is split here only when the scenario asks (``load.reasoning.think_tags``): the text up to and
including the first ``</think>`` is reasoning when the output opens with ``<think>`` or contains ``</think>``; an
output that opens ``<think>`` and never closes it is all reasoning (a model cut by ``max_tokens`` while thinking).

Tokens of a chunk that holds both parts (a multi-token chunk across the boundary) are split by text length, as
``accounting.apportion`` splits a total; a one-token chunk that holds both counts as answer (the answer began
there). The first answer chunk's time is ``t_first_output``; whitespace after the reasoning is answer text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..records import RequestRecord

__all__ = [
    "CLOSE_TAG",
    "OPEN_TAG",
    "Parts",
    "event_pieces",
    "mark_reasoning",
    "split_tags",
    "split_tokens",
]

OPEN_TAG, CLOSE_TAG = "<think>", "</think>"
REASONING_FIELDS = ("reasoning_content", "reasoning")


@dataclass(frozen=True)
class Parts:
    """One chunk's text: its reasoning and its answer."""

    reasoning: str
    answer: str


NO_PARTS = Parts("", "")


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def event_pieces(data: dict) -> tuple[str, Parts]:
    """One SSE event's text as the accounting reads it (each choice's content, then its reasoning fields, in that
    order; a completion's ``text``), and the same text as reasoning and answer (all choices): one walk for both."""
    choices = data.get("choices")
    if not isinstance(choices, list):
        return "", NO_PARTS
    text, reasoning, answer = [], [], []
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        if "text" in choice:  # the completions API has no reasoning field
            said = _text(choice["text"])
            text.append(said)
            answer.append(said)
            continue
        delta = choice.get("delta")
        if isinstance(delta, dict):
            content = _text(delta.get("content"))
            thought = [_text(delta.get(key)) for key in REASONING_FIELDS]
            text.append(content)
            text += thought
            answer.append(content)
            reasoning += thought
    return "".join(text), Parts("".join(reasoning), "".join(answer))


def split_tags(parts: list[Parts]) -> list[Parts]:
    """``<think>...</think>`` in the answer text moved to the reasoning (see the module's rule)."""
    answer = "".join(p.answer for p in parts)
    close = answer.find(CLOSE_TAG)
    if close >= 0:
        boundary = close + len(CLOSE_TAG)
    elif answer.lstrip().startswith(OPEN_TAG):
        boundary = len(answer)  # opened and never closed: all reasoning
    else:
        return parts
    out, start = [], 0
    for p in parts:
        cut = min(max(boundary - start, 0), len(p.answer))
        out.append(Parts(p.reasoning + p.answer[:cut], p.answer[cut:]))
        start += len(p.answer)
    return out


def split_tokens(parts: list[Parts], counts: list[int]) -> tuple[list[int], int | None]:
    """Reasoning tokens of each chunk (``counts`` are the chunk's tokens) and the index of the first chunk that
    carries answer text (None: no answer)."""
    reasoning, first_answer = [], None
    for i, (p, n) in enumerate(zip(parts, counts, strict=True)):
        r, a = len(p.reasoning), len(p.answer)
        if a and first_answer is None:
            first_answer = i
        if not r:
            reasoning.append(0)
        elif not a:
            reasoning.append(n)
        else:  # both: by text length, at least one token each side when there are two
            reasoning.append(min(max(round(n * r / (r + a)), 1), n - 1) if n >= 2 else 0)
    return reasoning, first_answer


def mark_reasoning(record: RequestRecord, parts: list[Parts], reported: int | None) -> None:
    """Set ``reasoning_tokens`` (the server's count when it gave one, else the chunks') and ``t_first_output``
    (the first answer chunk; the first chunk when nothing was reasoning; NaN when reasoning never gave way to
    an answer) from the parts of the chunks in ``record.chunk_offsets``."""
    per_chunk, first = split_tokens(parts, record.chunk_tokens)
    counted = sum(per_chunk)
    record.reasoning_tokens = reported if reported is not None else counted
    thought = any(p.reasoning for p in parts) or record.reasoning_tokens > 0
    if first is not None:
        record.t_first_output = record.t_send + record.chunk_offsets[first]
    else:
        record.t_first_output = math.nan if thought else record.t_first

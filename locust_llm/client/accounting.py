"""Stamped SSE events -> token counts per chunk, offsets, finish reason and error class. Pure.

The stamping code (``stream``) only collects ``Event(t, data)`` pairs; everything here runs after the stream
has ended, so none of it delays a timestamp. Token counts come from, in this order (``token_source``):

* ``usage_deltas``: cumulative usage on every chunk (vLLM/SGLang ``continuous_usage_stats``);
* ``token_ids``: token lists per chunk;
* ``server_events`` / ``server_events+usage``: llama.cpp's one event per token, checked against its final usage
  (a stream cut short keeps the tokens it delivered);
* ``usage_below_events``: llama.cpp-style events, but the final usage is lower than their number: the server's
  total is kept, split over the events by their text length (which events carried no token is unknown);
* ``usage+text_share``: only a final total: the total is exact, its split over chunks follows their text length
  (approximate per chunk) until a tokenizer refines it to ``usage+tokenizer``;
* ``tokenizer``: no usage at all: the server's ``/tokenize`` or a local tokenizer counts the whole text after the
  stream (the total), and each chunk's text (the split);
* ``unknown``: no usage and no tokenizer: times are known, counts are not.

Text is the evidence of a token: an event without text (``delta: null``, ``{}``, an empty string) carries no token
time and starts no TTFT; tokens the server counted on it are added to the chunk with text before it (or, before
the first one, to the first). A stream that delivered no text is ``empty_completion`` whatever its usage says.

Server-supplied values that cannot be right (a finish reason that is not text, a count that is not a
non-negative JSON integer of sane size (``10.0`` and ``-0.0`` are not counts), a cumulative count that goes down)
make the request a ``malformed_event`` failure naming the raw value. A count that can be right but disagrees with
the request is ``suspect_usage``, with the raw values: more output tokens than the ``max_tokens`` the server was
asked for, a total of zero for a stream that delivered text, or (``Split.apply``, after the stream, with a
tokenizer) a total more than ``SUSPECT_FACTOR`` times plus ``usage_slack`` away from the tokenizer's count of the
text the server streamed, in either direction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..records import ErrorClass, RequestRecord
from .reasoning import Parts, event_pieces, mark_reasoning, split_tags

__all__ = [
    "SHORT_SLACK",
    "SUSPECT_FACTOR",
    "SUSPECT_SLACK",
    "Event",
    "Malformed",
    "Split",
    "above_max_tokens",
    "account",
    "answer_text",
    "apportion",
    "cached_tokens",
    "count_tokens",
    "event_text",
    "text_disagrees",
    "usage_slack",
    "zero_against_text",
]

MAX_COUNT = 1 << 40  # larger than any real token count, small enough for every integer column
# A server's total and a tokenizer's count of the text it streamed agree within this: decoding then re-encoding
# text can merge or split a few tokens, and tokens without text (special ones) count for the server only.
SUSPECT_FACTOR = 2.0
SUSPECT_SLACK = 16
SHORT_SLACK = 2  # for short answers the slack is this plus the smaller count (``usage_slack``)


@dataclass
class Event:
    t: float
    data: dict


class Malformed(ValueError):
    pass


def _choices(data: dict) -> list:
    choices = data.get("choices")
    return choices if isinstance(choices, list) else []


def _count(value, what: str) -> int | None:
    """A server-supplied count: None when absent, an int when sane, ``Malformed`` otherwise."""
    if value is None:
        return None
    number = value  # a JSON number with a fraction or exponent (``10.0``, ``-0.0``) is not a count
    if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number <= MAX_COUNT:
        raise Malformed(f"{what} must be a non-negative integer up to {MAX_COUNT}, found {str(value)[:60]!r}")
    return number


MAX_DURATION_MS = 86_400_000.0


def _duration(value, what: str) -> float | None:
    """A server-supplied duration in ms: a finite non-negative number up to a day, ``Malformed`` otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_DURATION_MS:
        raise Malformed(
            f"{what} must be a duration in ms between 0 and {MAX_DURATION_MS:.0f}, found {str(value)[:60]!r}"
        )
    return float(value)


def _token_ids(chunk: dict) -> int | None:
    """Tokens in a chunk when the server lists them (vLLM return_token_ids, llama.cpp tokens)."""
    for choice in _choices(chunk):
        for key in ("token_ids", "tokens"):
            ids = choice.get(key) if isinstance(choice, dict) else None
            if isinstance(ids, list):
                return len(ids)
    return None


def apportion(total: int, weights: list[float]) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainder): integers that sum to ``total``."""
    weight_sum = sum(weights)
    if total <= 0 or not weights:
        return [0] * len(weights)
    if weight_sum <= 0:
        weights, weight_sum = [1.0] * len(weights), float(len(weights))
    exact = [total * w / weight_sum for w in weights]
    counts = [int(x) for x in exact]
    order = sorted(range(len(exact)), key=lambda i: exact[i] - counts[i], reverse=True)
    for i in order[: total - sum(counts)]:
        counts[i] += 1
    return counts


def _completion_tokens(data: dict) -> int | None:
    usage = data.get("usage")
    return _count(usage.get("completion_tokens"), "usage.completion_tokens") if isinstance(usage, dict) else None


def event_text(event: Event) -> str:
    return event_pieces(event.data)[0]


def answer_text(events: list[Event]) -> str:
    """The answer as a chat history carries it: the content of the first choice (completions: its text), without
    any reasoning the server streamed beside it."""
    parts = []
    for event in events:
        choices = _choices(event.data)
        choice = choices[0] if choices and isinstance(choices[0], dict) else {}
        delta = choice.get("delta")
        text = delta.get("content") if isinstance(delta, dict) else choice.get("text")
        if isinstance(text, str):
            parts.append(text)
    return "".join(parts)


def count_tokens(
    events: list[Event], llamacpp: bool = False, texts: list[str] | None = None
) -> tuple[list[int], str, int | None]:
    """Tokens per event, their source, and the server's final completion total (None when it gave none)."""
    usage = [_completion_tokens(e.data) for e in events]
    texts = texts if texts is not None else [event_text(e) for e in events]
    final_total = next((u for u in reversed(usage) if u is not None), None)
    with_text = [bool(t) for t in texts]
    # A count that only appears on the final usage chunk is not per-chunk information.
    per_chunk_usage = sum(u is not None for u in usage) > 1 and all(
        u is not None for u, c in zip(usage, with_text, strict=False) if c
    )
    if per_chunk_usage:
        counts, previous = [], 0
        for i, u in enumerate(usage):
            if u is not None and u < previous:
                raise Malformed(
                    f"cumulative usage.completion_tokens went down from {previous} to {u} at event {i + 1} of "
                    f"{len(events)}: a running count cannot decrease"
                )
            counts.append(u - previous if u is not None else 0)
            previous = u if u is not None else previous
        return counts, "usage_deltas", final_total
    id_counts = [_token_ids(e.data) for e in events]
    if any(c is not None for c in id_counts):
        return [c or 0 for c in id_counts], "token_ids", final_total
    one_per_event = [1 if c else 0 for c in with_text]
    events_total = sum(one_per_event)
    llamacpp = llamacpp or any("timings" in e.data for e in events)
    if llamacpp or (final_total is not None and final_total == events_total):
        if final_total is not None and final_total > events_total and events_total:
            # llama.cpp holds back incomplete UTF-8, so one event can carry several tokens;
            # the server's total is exact, the difference lands on the last text event.
            last = max(i for i, c in enumerate(one_per_event) if c)
            one_per_event[last] += final_total - events_total
            return one_per_event, "server_events+usage", final_total
        if final_total is not None and final_total < events_total:
            # Fewer tokens than text events: the server's total is what it generated; no event count is negative.
            return apportion(final_total, [len(t) for t in texts]), "usage_below_events", final_total
        return one_per_event, "server_events", final_total
    if final_total is not None:
        return apportion(final_total, [len(t) for t in texts]), "usage+text_share", final_total
    return [0] * len(events), "unknown", None


@dataclass
class Split:
    """What a tokenizer can still do after the stream (never on the stamping path): make per-chunk counts exact
    (``refine``), and check the server's total against its count of the text the server streamed."""

    record: RequestRecord
    texts: list[str]  # the text of each chunk in ``record.chunk_offsets``
    total: int | None  # the server's final total, when it gave one
    parts: list[Parts]  # each chunk's reasoning and answer text (``reasoning``)
    reasoning_total: int | None = None  # the server's count of reasoning tokens, when it gave one
    refine: bool = True  # False: the server's own per-chunk counts stand; only the total is checked

    def apply(self, count: Callable[[str], int]) -> None:
        """Count each chunk's text to set the split; the total is the server's when it gave one, else the count of
        the whole text (a word cut between chunks, or a tokenizer's leading space, makes per-chunk counts not add
        up to it). A server's total is then checked against the count of the whole text."""
        record = self.record
        if self.refine:
            counts = [count(t) if t else 0 for t in self.texts]
            if self.total is not None:
                record.chunk_tokens = apportion(self.total, counts)
                record.token_source = "usage+tokenizer"
            else:
                record.chunk_tokens = apportion(count("".join(self.texts)), counts)
                record.output_tokens = sum(record.chunk_tokens)
                record.token_source = "tokenizer"
                if record.error_class == ErrorClass.EMPTY and record.output_tokens:
                    record.error_class = record.error_message = None
            mark_reasoning(record, self.parts, self.reasoning_total)
        if self.total is not None and record.ok:
            why = self.check(count)
            if why:
                record.error_class, record.error_message = ErrorClass.SUSPECT_USAGE, why

    def check(self, count: Callable[[str], int]) -> str | None:
        """Why the server's total cannot be the text it streamed (None when they agree), the record untouched."""
        text = "".join(self.texts)
        return text_disagrees(self.total, count(text), len(text)) if self.total is not None else None


def usage_slack(total: int, counted: int) -> int:
    """The tolerance's additive part: ``SUSPECT_SLACK``, but for short answers ``SHORT_SLACK`` plus the smaller
    count, so that a total of none against ten tokens of text (or ten against none) is caught."""
    return min(SUSPECT_SLACK, SHORT_SLACK + min(total, counted))


def text_disagrees(total: int, counted: int, chars: int) -> str | None:
    """Why a server's total cannot be the text it streamed (None when they agree within the tolerance)."""
    slack = usage_slack(total, counted)
    if total <= SUSPECT_FACTOR * counted + slack and counted <= SUSPECT_FACTOR * total + slack:
        return None
    return (
        f"suspect usage: the server counts {total} output tokens (usage.completion_tokens), the tokenizer counts "
        f"{counted} in the {chars} characters it streamed (tolerance: within x{SUSPECT_FACTOR:g} + {slack} either "
        f"way; the slack is {SUSPECT_SLACK}, or {SHORT_SLACK} + the smaller count when that is less)"
    )[:500]


def zero_against_text(final_total: int | None, texts: list[str]) -> str | None:
    """Why a final total of zero cannot be a stream that delivered text (None when it is not that)."""
    if final_total != 0 or not texts:
        return None
    chars = sum(len(t) for t in texts)
    return (
        f"suspect usage: usage.completion_tokens 0 for a stream that delivered {chars} characters in "
        f"{len(texts)} chunks"
    )


def above_max_tokens(record: RequestRecord, final_total: int | None, source: str) -> str | None:
    """Why the server's count is above the ``max_tokens`` it was asked for (None when it is not)."""
    limit = record.max_tokens
    if limit <= 0 or source in ("tokenizer", "unknown") or record.output_tokens <= limit:
        return None
    raw = f"usage.completion_tokens {final_total}" if final_total is not None else f"{record.output_tokens} tokens"
    return f"suspect usage: {raw} ({source}) is above max_tokens {limit}, the most the server was asked for"


def _details(record: RequestRecord, events: list[Event]) -> None:
    for event in events:
        for choice in _choices(event.data):
            reason = choice.get("finish_reason") if isinstance(choice, dict) else None
            if reason is not None:
                if not isinstance(reason, str) or len(reason) > 64:
                    raise Malformed(f"finish_reason must be a short string, found {str(reason)[:60]!r}")
                record.finish_reason = reason
        usage = event.data.get("usage")
        prompt = _count(usage.get("prompt_tokens"), "usage.prompt_tokens") if isinstance(usage, dict) else None
        if prompt is not None:
            record.prompt_tokens = prompt
        timings = event.data.get("timings")
        if isinstance(timings, dict) and "predicted_ms" in timings:
            record.server_prefill_ms = _duration(timings.get("prompt_ms", 0.0), "timings.prompt_ms")
            record.server_decode_ms = _duration(timings["predicted_ms"], "timings.predicted_ms")
        if isinstance(timings, dict) and "draft_n" in timings:
            record.draft_n = _count(timings["draft_n"], "timings.draft_n")
            record.draft_accepted = _count(timings.get("draft_n_accepted", 0), "timings.draft_n_accepted")
        spec = (
            (event.data.get("metrics") or {}).get("speculative_decoding")
            if isinstance(event.data.get("metrics"), dict)
            else None
        )
        if isinstance(spec, dict) and "num_draft_tokens" in spec:
            record.draft_n = _count(spec["num_draft_tokens"], "num_draft_tokens")
            record.draft_accepted = _count(spec.get("num_accepted_draft_tokens", 0), "num_accepted_draft_tokens")


def cached_tokens(events: list[Event], done: bool, zero_when_absent: bool = False) -> int | None:
    """Prompt tokens the server took from its cache: the last usage's ``prompt_tokens_details.cached_tokens``, else
    llama.cpp's ``timings.cache_n``; None when the server does not say. ``zero_when_absent``: a server that leaves
    the detail out when nothing was cached (vLLM, SGLang) counts 0 for a finished stream that had usage."""
    usage_seen = False
    for event in reversed(events):
        usage = event.data.get("usage")
        if isinstance(usage, dict):
            usage_seen = True
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict) and details.get("cached_tokens") is not None:
                return _count(details["cached_tokens"], "usage.prompt_tokens_details.cached_tokens")
        timings = event.data.get("timings")
        if isinstance(timings, dict) and timings.get("cache_n") is not None:
            return _count(timings["cache_n"], "timings.cache_n")
    return 0 if zero_when_absent and done and usage_seen else None


def _reasoning_total(events: list[Event]) -> int | None:
    """``usage.completion_tokens_details.reasoning_tokens`` of the last usage that has it."""
    for event in reversed(events):
        usage = event.data.get("usage")
        details = usage.get("completion_tokens_details") if isinstance(usage, dict) else None
        if isinstance(details, dict) and details.get("reasoning_tokens") is not None:
            return _count(details["reasoning_tokens"], "usage.completion_tokens_details.reasoning_tokens")
    return None


INT32_MAX = (1 << 31) - 1


def _chunk_drafts(events: list[Event]) -> list[tuple[int, int]] | None:
    """Per event, the request's cumulative (drafted, accepted) tokens so far, from llama.cpp's per-token
    ``timings`` (``timings_per_token``; an event without them carries the last values on); None when the
    stream had no per-token timings with draft counts (only a final one, or none)."""
    timed = [e.data.get("timings") if isinstance(e.data.get("timings"), dict) else None for e in events]
    if sum(t is not None for t in timed) < 2 or not any(t is not None and "draft_n" in t for t in timed):
        return None
    out, drafted, accepted = [], 0, 0
    for t in timed:
        if t is not None and "draft_n" in t:
            drafted = _count(t["draft_n"], "timings.draft_n")
            accepted = _count(t.get("draft_n_accepted", 0), "timings.draft_n_accepted")
            if max(drafted, accepted) > INT32_MAX:
                raise Malformed(f"timings.draft_n per token must be below {INT32_MAX + 1}, found {drafted}")
        out.append((drafted, accepted))
    return out


def account(
    record: RequestRecord,
    events: list[Event],
    done: bool,
    llamacpp: bool = False,
    cache_zero: bool = False,
    think_tags: bool = False,
) -> Split | None:
    """Fill ``record`` from the stream's stamped events; ``done``: the stream ended properly; ``cache_zero``: the
    server omits a zero ``cached_tokens`` (``cached_tokens``); ``think_tags``: split ``<think>...</think>`` in the
    content into reasoning and answer (``reasoning``).

    Returns a ``Split`` when a tokenizer can still count the chunks (a final total only, or no usage)."""
    pieces = [event_pieces(e.data) for e in events]
    all_texts = [text for text, _ in pieces]
    try:
        counts, source, final_total = count_tokens(events, llamacpp, all_texts)
        _details(record, events)
        record.cached_tokens = cached_tokens(events, done, cache_zero)
        reasoning_total = _reasoning_total(events)
        drafts = _chunk_drafts(events)
    except Malformed as exc:
        record.error_class = record.error_class or ErrorClass.MALFORMED
        record.error_message = record.error_message or f"malformed server value: {exc}"
        return None
    record.token_source = source
    texts, parts = [], []
    carried = 0  # tokens the server counted on events without text, before the first event with text
    for i, (event, n, text) in enumerate(zip(events, counts, all_texts, strict=False)):
        if not text:  # no token arrived here: what the server counted on it belongs to a chunk with text
            if record.chunk_tokens:
                record.chunk_tokens[-1] += n
            else:
                carried += n
            continue
        record.chunk_offsets.append(event.t - record.t_send)
        record.chunk_tokens.append(n + carried)
        carried = 0
        texts.append(text)
        parts.append(pieces[i][1])
        if drafts is not None:
            record.chunk_drafted.append(drafts[i][0])
            record.chunk_accepted.append(drafts[i][1])
    record.output_tokens = sum(record.chunk_tokens) if source != "unknown" else 0
    if record.chunk_offsets:
        record.t_first = record.t_send + record.chunk_offsets[0]
        record.t_end = record.t_send + record.chunk_offsets[-1]
    suspect = above_max_tokens(record, final_total, source) or zero_against_text(final_total, texts)
    if record.error_class is None:
        if suspect:
            record.error_class, record.error_message = ErrorClass.SUSPECT_USAGE, suspect
        elif not done:
            record.error_class = ErrorClass.TRUNCATED
            record.error_message = f"stream ended without [DONE] or finish_reason after {len(events)} events"
        elif not record.chunk_offsets:
            record.error_class = ErrorClass.EMPTY
            said = f"; its usage.completion_tokens says {final_total}" if final_total else ""
            record.error_message = (
                f"the server finished without producing a token (no text in {len(events)} events{said})"
            )
    parts = split_tags(parts) if think_tags else parts
    mark_reasoning(record, parts, reasoning_total)
    if source in ("usage+text_share", "unknown") and texts:
        return Split(record, texts, final_total, parts, reasoning_total)
    if final_total is not None and texts and record.ok:
        return Split(record, texts, final_total, parts, reasoning_total, refine=False)
    return None

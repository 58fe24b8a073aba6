"""The prompts of a replayed trace (``TracePrompts``): each record's exact prompt length, and the trace's prefix
sharing reproduced as shared text. No Locust imports; built at set-up, so a request only joins strings.

A prompt is a run of blocks of ``block_tokens`` tokens (the last one shorter), joined by spaces. A Mooncake record
names its blocks by ``hash_ids``: every record that has a hash id at a position gets the same text there, so
records that share leading ids share that much prompt text, as the trace's requests did. Records without hash ids
(Azure, BurstGPT) get blocks of their own, so no two prompts share a prefix by accident.

Each block starts with a unique prefix (``generate.Prefixer``: words of a known token cost that spell the block's
number and the ladder step), followed by a body from a small pool of texts of the right length. A block no longer
than a prefix (a record's short last block) holds too few words to spell a number unique in the run, so its words
spell its rank among the blocks that follow the same text, with the step: records that share every earlier block
still differ in the last one (a hash of the number in one or two words would make two of them the same prompt, a
whole-prompt cache hit, whenever two of a few dozen such siblings collide). The prefix makes
blocks of different ids differ from their first token, and makes the same trace replayed in another step (another
speed, a repeat) cold: a later step never reuses a prompt an earlier step left in the server's prefix cache.
Variants at the same step get the same text (pairing). The total is exact when the tokenizer splits at spaces, as
llama/SentencePiece and GPT-style BPE tokenizers do; a sample of whole prompts is counted at set-up and the items
are marked ``exact=False`` (with a warning) if a count differs.
"""

from __future__ import annotations

import random
import warnings

from .generate import Generator, Measure, Prefixer
from .items import PromptItem, WorkloadError
from .tokenizers import TokenCounter
from .traces import Trace, TraceRecord

__all__ = ["TracePrompts"]

BODY_POOL = 16  # distinct bodies of full blocks (the prefix already makes every block unique)
CHECKED = 8  # whole prompts counted at set-up
_INDEX_BITS = 30  # the prefixer's index field; larger block numbers go into its worker field


class TracePrompts:
    """Prompt text per trace record and ladder step, and which records fit the server's context."""

    def __init__(
        self,
        trace: Trace,
        gen: Generator,
        counter: TokenCounter,
        exact: bool,
        seed: int,
        context: int | None = None,
        nonce: int = 0,
    ):
        self.trace, self.exact, self.context = trace, exact, context
        self.prefixer = Prefixer.build(counter, gen.costs, nonce)  # the run's nonce: no run repeats another's blocks
        # A prefix costs start_tokens + (n - 1) * word_tokens at the start of a prompt, n * word_tokens after a space.
        self.prefix_cost = {
            True: self.prefixer.tokens,
            False: self.prefixer.length * self.prefixer.word_tokens,
        }
        self.ids = self._block_ids(trace.records)
        # Short last blocks by the text before them: each block number's rank among its siblings.
        self.siblings: dict[tuple[int, ...], dict[int, int]] = {}
        for index, record in enumerate(trace.records):
            sizes = self._sizes(record)
            if sizes[-1] <= self.prefix_cost[len(sizes) == 1]:
                group = self.siblings.setdefault(self.ids[index][:-1], {})
                group.setdefault(self.ids[index][-1], len(group))
        after = Measure(counter, self.prefixer.text(0, 0, 0))  # a body (or a short block) after a space
        at_start = Measure(counter)  # a short first block, at the start of the prompt
        self.bodies: dict[int, list[str]] = {}  # body length -> texts
        self.fillers: dict[tuple[int, bool], str] = {}  # (tokens, at the start) -> a text that completes a short block
        full = trace.block_tokens
        for record in trace.records:
            for j, n in enumerate(self._sizes(record)):
                first = j == 0
                body = n - self.prefix_cost[first]
                if body < 1:
                    words, rest = self._short(n, first)
                    start = first and not words
                    if rest and (rest, start) not in self.fillers:
                        rng = random.Random(f"{seed}|trace-filler|{rest}|{start}")
                        measure = at_start if start else after
                        self.fillers[rest, start] = gen.fit(rest, rng, measure, f"trace block of {n}")
                elif body not in self.bodies:
                    count = BODY_POOL if n == full else 1
                    self.bodies[body] = [
                        gen.fit(body, random.Random(f"{seed}|trace-body|{body}|{i}"), after, f"trace block of {n}")
                        for i in range(count)
                    ]
        self.over_context = sum(not self.fits(i) for i in range(len(trace.records)))
        self.exact = exact and self._check(counter)

    def _block_ids(self, records: tuple[TraceRecord, ...]) -> list[tuple[int, ...]]:
        """Per record, the number of each block: the trace's hash ids in order of first use, then one fresh number
        per block of a record without ids."""
        dense: dict[int, int] = {}
        out = []
        for record in records:
            out.append(tuple(dense.setdefault(h, len(dense)) for h in record.hash_ids))
        fresh = len(dense)
        for i, record in enumerate(records):
            if not record.hash_ids:
                n = len(self._sizes(record))
                out[i] = tuple(range(fresh, fresh + n))
                fresh += n
        return out

    def _sizes(self, record: TraceRecord) -> list[int]:
        """Tokens per block: full blocks, the last one holding the rest."""
        full = self.trace.block_tokens
        blocks = max(len(record.hash_ids), -(-record.input_tokens // full))
        return [full] * (blocks - 1) + [record.input_tokens - full * (blocks - 1)]

    def _short(self, n: int, first: bool) -> tuple[int, int]:
        """A block no longer than its prefix is some of the prefix's words (they spell the block's number, so short
        blocks differ too): how many fit in ``n`` tokens, and the tokens a filler text adds to make ``n``."""
        lead = self.prefixer.start_tokens if first else self.prefixer.word_tokens
        if n < lead:
            return 0, n
        words = min(1 + (n - lead) // self.prefixer.word_tokens, self.prefixer.length)
        return words, n - lead - (words - 1) * self.prefixer.word_tokens

    def _block(self, ids: tuple[int, ...], j: int, step: int, n: int) -> str:
        """The text of block ``j`` of a prompt of block numbers ``ids``, ``n`` tokens long, in ladder ``step``."""
        number, first = ids[j], j == 0
        body = n - self.prefix_cost[first]
        if body >= 1:
            worker, index = number >> _INDEX_BITS, number & ((1 << _INDEX_BITS) - 1)
            texts = self.bodies[body]
            return f"{self.prefixer.text(worker, step, index)} {texts[number % len(texts)]}"
        words, rest = self._short(n, first)
        filler = [self.fillers[rest, first and not words]] if rest else []
        return " ".join(self._rank_words(ids[:j], number, step, words) + filler)

    def _rank_words(self, parent: tuple[int, ...], number: int, step: int, words: int) -> list[str]:
        """``words`` words spelling block ``number``'s rank among the short blocks after ``parent`` in this step,
        offset by the run's nonce: distinct for every sibling and step while ``steps x siblings`` fits in what the
        words can spell."""
        group = self.siblings[parent]
        alphabets = (
            [self.prefixer.first if not parent else self.prefixer.alphabet] + [self.prefixer.alphabet] * words
        )[:words]
        code = self.prefixer.nonce + step * len(group) + group[number]
        spelled = []
        for alphabet in alphabets:
            code, digit = divmod(code, len(alphabet))
            spelled.append(alphabet[digit])
        return spelled

    def fits(self, index: int) -> bool:
        """Whether record ``index``'s prompt and output fit the server's context (unknown: they do)."""
        record = self.trace.records[index]
        return self.context is None or record.input_tokens + record.output_tokens <= self.context

    def item(self, index: int, step: int) -> PromptItem:
        """Record ``index``'s request in ladder ``step``: its prompt of exactly ``input_tokens`` tokens, and its
        output length as ``max_tokens``."""
        if not 0 <= step < 1 << 10:
            raise WorkloadError(f"a trace replays in steps 0 to 1023; got step {step}")
        record = self.trace.records[index]
        ids = self.ids[index]
        blocks = [self._block(ids, j, step, n) for j, n in enumerate(self._sizes(record))]
        text = " ".join(blocks)
        return PromptItem("trace", text, record.input_tokens, record.output_tokens, self.exact, record.where)

    def _check(self, counter: TokenCounter) -> bool:
        for index in range(min(CHECKED, len(self.trace.records))):
            item = self.item(index, 0)
            got = counter.count(item.prompt)
            if got != item.prompt_tokens:
                warnings.warn(
                    f"trace: the prompt of {item.prompt_id} counts {got} tokens, not {item.prompt_tokens}: the "
                    "tokenizer merges across block boundaries, so prompt lengths are marked approximate (exact=False)",
                    stacklevel=2,
                )
                return False
        return True

    def describe(self) -> dict:
        return {
            **self.trace.describe(),
            "context": self.context,
            "over_context": self.over_context,
            "exact": self.exact,
            "prefix_tokens": self.prefix_cost[True],
        }

"""Prompt texts of an exact token count, and per-request unique prefixes of a known token cost."""

from __future__ import annotations

import random

from .items import WorkloadError
from .tokenizers import TokenCounter, count_each

__all__ = ["PREFIX_BITS", "Generator", "Measure", "Prefixer", "WORDS"]

# Unique-prefix capacity (56 bits: 7 words of a 300-word alphabet): worker < 2**10, step < 2**20 (a week's soak in
# one-second windows), index < 2**26 (67 million requests of one load process in one step).
_WORKER_BITS, _STEP_BITS, _INDEX_BITS = 10, 20, 26
PREFIX_BITS = _WORKER_BITS + _STEP_BITS + _INDEX_BITS
_MIX_MUL = 0x9E3779B97F4A7C15 & ((1 << PREFIX_BITS) - 1) | 1  # odd, so the mix is a bijection
_MIX_ADD = 0x5DEECE66D
FIRST_WORDS = 32  # first-word alphabet: enough that the first word varies from request to request

# Plain lowercase English words (printable ASCII). The set matters for prompt variety and for the
# unique-prefix alphabet, not its order; the tail holds consonant-vowel words, which are single
# tokens even in the tiny generated test model's vocabulary.
WORDS: tuple[str, ...] = tuple(
    dict.fromkeys(
        [
            "the",
            "of",
            "and",
            "to",
            "in",
            "is",
            "was",
            "for",
            "on",
            "are",
            "with",
            "as",
            "at",
            "be",
            "by",
            "this",
            "had",
            "not",
            "but",
            "from",
            "or",
            "have",
            "an",
            "they",
            "which",
            "one",
            "you",
            "were",
            "all",
            "we",
            "her",
            "she",
            "there",
            "would",
            "their",
            "will",
            "when",
            "who",
            "him",
            "been",
            "has",
            "more",
            "if",
            "no",
            "out",
            "do",
            "so",
            "can",
            "what",
            "up",
            "said",
            "about",
            "other",
            "into",
            "than",
            "its",
            "time",
            "only",
            "could",
            "new",
            "them",
            "man",
            "some",
            "these",
            "then",
            "two",
            "first",
            "may",
            "any",
            "like",
            "now",
            "my",
            "such",
            "make",
            "over",
            "our",
            "even",
            "most",
            "me",
            "state",
            "after",
            "also",
            "made",
            "many",
            "did",
            "must",
            "before",
            "back",
            "see",
            "through",
            "way",
            "where",
            "get",
            "much",
            "go",
            "well",
            "your",
            "know",
            "should",
            "down",
            "work",
            "year",
            "because",
            "come",
            "people",
            "just",
            "say",
            "each",
            "those",
            "take",
            "day",
            "good",
            "how",
            "long",
            "own",
            "too",
            "little",
            "use",
            "us",
            "very",
            "great",
            "still",
            "men",
            "here",
            "life",
            "both",
            "between",
            "old",
            "under",
            "last",
            "never",
            "place",
            "same",
            "another",
            "think",
            "house",
            "while",
            "high",
            "right",
            "might",
            "came",
            "off",
            "find",
            "states",
            "since",
            "used",
            "give",
            "against",
            "three",
            "himself",
            "look",
            "few",
            "general",
            "hand",
            "school",
            "part",
            "small",
            "american",
            "home",
            "during",
            "number",
            "again",
            "around",
            "thought",
            "went",
            "without",
            "however",
            "govern",
            "does",
            "got",
            "public",
            "united",
            "point",
            "end",
            "become",
            "head",
            "once",
            "course",
            "fact",
            "upon",
            "need",
            "system",
            "set",
            "every",
            "war",
            "put",
            "form",
            "water",
            "took",
            "program",
            "present",
            "government",
            "thing",
            "told",
            "possible",
            "group",
            "large",
            "until",
            "always",
            "city",
            "order",
            "away",
            "called",
            "want",
            "eyes",
            "something",
            "unit",
            "room",
            "far",
            "less",
            "interest",
            "early",
            "turn",
            "young",
            "side",
            "feet",
            "help",
            "toward",
            "asked",
            "later",
            "next",
            "power",
            "show",
            "left",
            "knew",
            "face",
            "best",
            "body",
            "family",
            "night",
            "door",
            "city",
            "level",
            "open",
            "best",
            "four",
            "white",
            "local",
            "world",
            "light",
            "known",
            "given",
            "case",
            "often",
            "whole",
            "national",
            "social",
            "half",
            "kind",
            "problem",
            "room",
            "mind",
            "seemed",
            "name",
            "far",
            "clear",
            "night",
            "game",
            "plan",
            "line",
            "area",
            "word",
            "river",
            "sound",
            "table",
            "story",
            "music",
            "money",
            "paper",
            "garden",
            "market",
            "letter",
            "window",
            "morning",
            "evening",
            "summer",
            "winter",
            "spring",
            "autumn",
            "bread",
            "apple",
            "orange",
            "yellow",
            "green",
            "blue",
            "red",
            "black",
            "brown",
            "silver",
            "golden",
            "stone",
            "metal",
            "glass",
            "wood",
            "paper",
            "cloth",
            "field",
            "forest",
            "mountain",
            "valley",
            "ocean",
            "island",
            "village",
            "bridge",
            "castle",
            "tower",
            "harbor",
            "engine",
            "wheel",
            "train",
            "plane",
            "ship",
            "boat",
            "road",
            "street",
            "corner",
            "station",
            "office",
            "doctor",
            "teacher",
            "farmer",
            "driver",
            "writer",
            "painter",
            "singer",
            "dancer",
            "student",
            "worker",
            "player",
            "friend",
            "mother",
            "father",
            "sister",
            "brother",
            "daughter",
            "child",
            "baby",
            "lady",
            "king",
            "queen",
            "prince",
            "captain",
            "pilot",
            "hero",
            "poet",
            "cook",
            "baker",
            "quiet",
            "gentle",
            "bright",
            "simple",
            "strong",
            "careful",
            "honest",
            "happy",
            "calm",
            "brave",
            "proud",
            "warm",
            "cold",
            "soft",
            "hard",
            "fast",
            "slow",
            "early",
            "late",
            "deep",
            "wide",
            "narrow",
            "short",
            "tall",
            "heavy",
            "light",
            "sharp",
            "smooth",
            "rough",
            "fresh",
            "clean",
            "walk",
            "run",
            "jump",
            "swim",
            "read",
            "write",
            "sing",
            "dance",
            "build",
            "carry",
            "follow",
            "listen",
            "watch",
            "remember",
            "visit",
            "wonder",
            "travel",
            "answer",
            "return",
            "enjoy",
            "explain",
            "decide",
            "choose",
            "begin",
            "finish",
            "gather",
            "share",
            "teach",
            "learn",
            "grow",
            "data",
            "menu",
            "solo",
            "memo",
            "logo",
            "demo",
            "taco",
            "sofa",
            "soda",
            "tuna",
            "lava",
            "gala",
            "bone",
            "fire",
            "game",
            "gone",
            "dome",
            "done",
            "bike",
            "base",
            "fame",
            "fate",
            "fine",
            "five",
            "gate",
            "give",
            "date",
            "dune",
            "duke",
            "bite",
            "bake",
            "dare",
            "fuse",
            "gave",
            "dive",
            "dose",
            "fade",
            "file",
            "fore",
            "tide",
            "ride",
            "wide",
            "side",
            "time",
            "lime",
            "mine",
            "nine",
            "pine",
            "wine",
            "tone",
            "zone",
            "rose",
            "nose",
            "hose",
            "pole",
            "role",
            "hole",
        ]
    )
)


class Measure:
    """Counts a body's tokens as it appears after ``prefix + " "`` (a reference prefix), memoized.

    The body's share is ``count(prefix + " " + body) - count(prefix)``: the separating space belongs
    to the body's first word (a lone trailing space is a token of its own in SentencePiece)."""

    def __init__(self, counter: TokenCounter, prefix: str = ""):
        self.counter, self.prefix = counter, prefix
        self.base = counter.count(prefix) if prefix else 0
        self._cache: dict[str, int] = {}

    def __call__(self, body: str) -> int:
        if body not in self._cache:
            text = f"{self.prefix} {body}" if self.prefix else body
            self._cache[body] = self.counter.count(text) - self.base
        return self._cache[body]


class Prefixer:
    """Per-request prefixes of ``length`` words: the first from ``first``, the others from ``alphabet`` (a mixed
    radix). Every ``alphabet`` word costs ``word_tokens`` after a space and every ``first`` word (a subset of them)
    ``start_tokens`` at the start of a text, so every prefix costs ``start_tokens + (length - 1) * word_tokens``.
    ``nonce`` (the run's, ``PREFIX_BITS`` bits) enters the mix: another nonce spells every request's prefix
    differently, so a server's cache from an earlier run serves none of them; 0 spells them as every run with 0."""

    def __init__(
        self,
        alphabet: list[str],
        word_tokens: int,
        start_tokens: int | None = None,
        first: list[str] | None = None,
        nonce: int = 0,
    ):
        first = list(first) if first is not None else list(alphabet)
        if len(alphabet) < 2 or len(first) < 2:
            raise WorkloadError("unique_prefix needs at least two words of equal token cost")
        self.alphabet, self.first, self.word_tokens = list(alphabet), first, word_tokens
        self.start_tokens = word_tokens if start_tokens is None else start_tokens
        self.nonce = nonce & ((1 << PREFIX_BITS) - 1)
        self.length = 1
        while len(first) * len(alphabet) ** (self.length - 1) < 1 << PREFIX_BITS:
            self.length += 1

    @property
    def tokens(self) -> int:
        return self.start_tokens + (self.length - 1) * self.word_tokens

    @property
    def tokens_after_space(self) -> int:
        """The cost of a prefix that follows other text and a space (a shared prefix before it)."""
        return self.length * self.word_tokens

    def text(self, worker: int, step: int, index: int) -> str:
        for name, value, bits in (
            ("worker", worker, _WORKER_BITS),
            ("step", step, _STEP_BITS),
            ("index", index, _INDEX_BITS),
        ):
            if not 0 <= value < 1 << bits:
                raise WorkloadError(f"unique_prefix supports {name} in [0, {1 << bits}); got {value}")
        value = (worker << (_STEP_BITS + _INDEX_BITS)) | (step << _INDEX_BITS) | index
        # A bijective scramble (xor with the nonce, then an odd multiplier): unique within the run, whatever the nonce.
        value = ((value ^ self.nonce) * _MIX_MUL + _MIX_ADD) & ((1 << PREFIX_BITS) - 1)
        value, digit = divmod(value, len(self.first))
        words = [self.first[digit]]
        for _ in range(self.length - 1):
            value, digit = divmod(value, len(self.alphabet))
            words.append(self.alphabet[digit])
        return " ".join(words)

    @classmethod
    def build(cls, counter: TokenCounter, costs: dict[str, int], nonce: int = 0) -> Prefixer:
        """The alphabet that makes the shortest prefix: words sharing their cost after a space (``costs``), and
        for the first word those of them that also share their cost at the start of a text. Start costs are
        counted (one tokenizer call each) only until ``FIRST_WORDS`` words agree: a larger first alphabet would
        rarely save a word, and every call is set-up time."""
        groups: dict[int, list[str]] = {}
        for word, cost in costs.items():
            groups.setdefault(cost, []).append(word)
        best: Prefixer | None = None
        for cost in sorted(groups):
            if len(groups[cost]) < 2 or (best and 1 + cost > best.tokens):  # a prefix has 2+ words
                continue
            by_start: dict[int, list[str]] = {}
            for word in sorted(groups[cost]):
                start = counter.count(word)
                by_start.setdefault(start, []).append(word)
                if len(by_start[start]) >= FIRST_WORDS:
                    break
            start, first = max(by_start.items(), key=lambda kv: (len(kv[1]), -kv[0]))
            if len(first) >= 2 and start >= 1:
                candidate = cls(sorted(groups[cost]), cost, start, first, nonce)
                if best is None or candidate.tokens < best.tokens:
                    best = candidate
        if best is None:
            raise WorkloadError(
                "unique_prefix: no two words of equal token cost were found with this tokenizer; turn unique_prefix off"
            )
        return best


# ----------------------------------------------------------------------------- prompt generation


class Generator:
    """Builds texts of an exact token count from the word list, given per-word costs in context."""

    MAX_ROUNDS = 32

    def __init__(self, counter: TokenCounter):
        anchor = "the"
        base = counter.count(anchor)
        in_context = count_each(counter, [f"{anchor} {w}" for w in WORDS])
        self.costs = {w: n - base for w, n in zip(WORDS, in_context, strict=True)}
        self.costs = {w: c for w, c in self.costs.items() if c >= 1}
        if not self.costs:
            raise WorkloadError(f"the token counter {counter!r} gives no word a positive cost")
        self.vocab = sorted(self.costs)
        self.by_cost: dict[int, list[str]] = {}
        for w in self.vocab:
            self.by_cost.setdefault(self.costs[w], []).append(w)
        self.max_cost = max(self.by_cost)
        self._compose_cache: dict[int, list[int] | None] = {}

    def compose(self, r: int) -> list[int] | None:
        """Fewest word costs summing to exactly ``r`` (None if impossible)."""
        if r in self._compose_cache:
            return self._compose_cache[r]
        best: list[list[int] | None] = [[]] + [None] * r
        for total in range(1, r + 1):
            for c in self.by_cost:
                prev = best[total - c] if c <= total else None
                if prev is not None and (best[total] is None or len(prev) + 1 < len(best[total])):
                    best[total] = prev + [c]
        self._compose_cache[r] = best[r]
        return best[r]

    def _complete(self, words: list[str], aim: int, rng: random.Random) -> bool:
        """Pop and append words until the table estimate equals ``aim``."""
        est = sum(self.costs[w] for w in words)
        while True:
            while est > aim and words:
                est -= self.costs[words.pop()]
            combo = self.compose(aim - est) if aim >= est else None
            if combo is not None:
                words.extend(rng.choice(self.by_cost[c]) for c in combo)
                return True
            if not words:
                return False
            est -= self.costs[words.pop()]

    def fit(self, target: int, rng: random.Random, measure: Measure, what: str) -> str:
        words: list[str] = []
        est = 0
        while est + 2 * self.max_cost < target:
            w = rng.choice(self.vocab)
            words.append(w)
            est += self.costs[w]
        bias, seen = 0, []
        for _ in range(self.MAX_ROUNDS):
            if target - bias < 1 or not self._complete(words, target - bias, rng):
                break
            text = " ".join(words)
            got = measure(text)
            if got == target:
                return text
            seen.append(got)
            # The table is per word in context; the difference (e.g. the first word, which has no
            # space before it) is assumed to persist, so aim the estimate off by it.
            bias = got - sum(self.costs[w] for w in words)
            if len(seen) > 4:  # not converging: drop a random tail so new words are tried
                del words[rng.randrange(len(words) + 1) :]
        raise WorkloadError(
            f"{what}: could not build a text of exactly {target} tokens with this tokenizer "
            f"(counts seen: {seen[-6:]}); try another prompt_tokens or turn unique_prefix off"
        )

"""The prompts a load test sends: exact token lengths, named buckets, datasets, seeded per worker.

What this module guarantees
---------------------------
* **Exact prompt lengths.** With a token counter (the server's own ``/tokenize`` via
  :class:`ServerTokenizer`, or a local tokenizer via :class:`LocalTokenizer`), every generated
  prompt is verified to be exactly ``prompt_tokens`` tokens long (``PromptItem.exact`` is True).
  Counts are of the prompt *text* without special tokens: the server may add a BOS token, and the
  chat API adds its template, on top.
* **Everything happens at set-up.** :meth:`Workload.from_spec` builds a pool of distinct prompts
  per bucket (64 by default) and tokenizes them then; :meth:`Workload.item` is a pure function that
  costs a hash and a string join, and never tokenizes.
* **Reproducible sequences.** ``item(worker, step, index)`` depends only on
  ``(seed, worker, index)`` (plus ``step`` for the unique prefix, below). Randomness comes from a
  counter-based generator: a BLAKE2b hash of ``(seed, purpose, worker, index)``; there is no
  module-level or per-object RNG state, so Locust forking processes after import, gevent
  scheduling, or the order in which users ask cannot change which prompt the k-th request of a
  worker gets. Baseline and speculative variants therefore see the same prompt sequence. Pools are
  built with ``random.Random`` instances seeded from ``(seed, bucket name, pool slot)``, so every
  process that builds the workload with the same tokenizer gets the same pools.
* **Why ``step`` does not change the prompt:** each ladder step restarts the same sequence, so
  levels and variants are compared on the same prompts. ``step`` only enters the unique prefix:
  a prefix that repeated in every step would hit the server's prefix cache from the second step
  on, which is exactly what ``unique_prefix`` exists to prevent.
* **Unique prefix** (``load.unique_prefix``): each request starts with ``K`` words that spell a
  bijective mix of ``(worker, step, index)`` in base ``len(alphabet)``, so prefixes never repeat
  within a run. All alphabet words have the same verified cost at the start of a text and the same
  cost after a space, so every prefix costs the same known number of tokens (``prefix_tokens``).
  Pool prompts are built for ``target - prefix_tokens`` tokens, measured *after* a prefix, so the
  total stays exact. A sample of prefixed prompts is re-counted at set-up; if the tokenizer merges
  across the word boundary (llama/SPM and GPT-style BPE tokenizers split at spaces, so they do not),
  the items are marked ``exact=False`` with a warning instead of claiming a wrong count.
* **Without a counter** (no ``/tokenize`` and no local tokenizer) lengths come from
  :class:`ApproxCounter`, a crude characters-per-word estimate, and every item has
  ``exact=False``; reports must say so.
* **Datasets:** JSONL (``{"prompt": ..., "max_tokens"|"output_tokens": n, "bucket": name}`` per
  line) or ShareGPT JSON (a list of ``{"conversations": [{"from": "human", "value": ...},
  {"from": "gpt", "value": ...}]}``; ShareGPT objects may also appear as JSONL lines). Requests
  draw dataset items uniformly (bucket labels are reported, ``load.buckets`` weights do not apply).
  Large files are reduced to a seeded sample of ``max_dataset_items`` before tokenization.

This module does not import Locust; its only HTTP code uses ``urllib`` (no proxies: loopback).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
import os
import random
import urllib.error
import urllib.request
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Protocol, runtime_checkable

from .scenario import LoadSpec

API_KEY_ENV = "LOCUST_LLM_API_KEY"  # same variable as client.py (not imported: it imports Locust)
DEFAULT_POOL_SIZE = 64
DEFAULT_MAX_DATASET_ITEMS = 1024
# Unique-prefix capacity: worker < 2**16, step < 2**10, index < 2**30 (56 bits in all).
_WORKER_BITS, _STEP_BITS, _INDEX_BITS = 16, 10, 30
_PREFIX_BITS = _WORKER_BITS + _STEP_BITS + _INDEX_BITS
_MIX_MUL = 0x9E3779B97F4A7C15 & ((1 << _PREFIX_BITS) - 1) | 1  # odd, so the mix is a bijection
_MIX_ADD = 0x5DEECE66D

HUMAN_ROLES = ("human", "user")
ANSWER_ROLES = ("gpt", "assistant", "chatgpt", "bard", "model")

# Plain lowercase English words (printable ASCII). The set matters for prompt variety and for the
# unique-prefix alphabet, not its order; the tail holds consonant-vowel words, which are single
# tokens even in the tiny generated test model's vocabulary.
WORDS: tuple[str, ...] = tuple(dict.fromkeys("""
the of and to in is was for on are with as at be by this had not but from or have an they which
one you were all we her she there would their will when who him been has more if no out do so can
what up said about other into than its time only could new them man some these then two first may
any like now my such make over our even most me state after also made many did must before back see
through way where get much go well your know should down work year because come people just say
each those take day good how long own too little use us very great still men here life both between
old under last never place same another think house while high right might came off find states
since used give against three himself look few general hand school part small american home during
number again around thought went without however govern does got public united point end
become head once course fact upon need system set every war put form water took program present
government thing told possible group large until always city order away called want eyes
something unit room far less interest early turn young side feet help toward asked later next power
show left knew face best body family night door city level open best four white local world light
known given case often whole national social half kind problem room mind seemed name far clear night
game plan line area word river sound table story music money paper garden market letter window
morning evening summer winter spring autumn bread apple orange yellow green blue red black brown
silver golden stone metal glass wood paper cloth field forest mountain valley ocean island village
bridge castle tower harbor engine wheel train plane ship boat road street corner station office
doctor teacher farmer driver writer painter singer dancer student worker player friend mother father
sister brother daughter child baby lady king queen prince captain pilot hero poet cook baker
quiet gentle bright simple strong careful honest happy calm brave proud warm cold soft hard fast
slow early late deep wide narrow short tall heavy light sharp smooth rough fresh clean
walk run jump swim read write sing dance build carry follow listen watch remember visit wonder
travel answer return enjoy explain decide choose begin finish gather share teach learn grow
data menu solo memo logo demo taco sofa soda tuna lava gala bone fire game gone dome done bike
base fame fate fine five gate give date dune duke bite bake dare fuse gave dive dose fade file
fore tide ride wide side time lime mine nine pine wine tone zone rose nose hose pole role hole
""".split()))


class WorkloadError(ValueError):
    """A workload that cannot be built; the message names the file, line or bucket and the fix."""


@runtime_checkable
class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...


# ----------------------------------------------------------------------------- token counters

class ServerTokenizer:
    """Counts tokens with the inference server's own tokenize endpoint (the tokenizer it serves).

    Shapes tried, in order, on the first call; the one that works is remembered:

    * ``llamacpp``: ``POST /tokenize {"content": text, "add_special": false}`` -> ``{"tokens": [...]}``
    * ``vllm`` (vLLM, SGLang): ``POST /tokenize {"model": m, "prompt": text,
      "add_special_tokens": false}`` -> ``{"count": n, "tokens": [...]}``
    """

    SHAPES = ("llamacpp", "vllm")
    PROBE = "hello world"

    def __init__(self, base_url: str, model: str | None = None, timeout: float = 10.0):
        self.base_url = base_url.rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[:-3]
        self.model = model
        self.timeout = timeout
        self.shape: str | None = None
        # Loopback servers: never route through an environment proxy.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _body(self, shape: str, text: str) -> dict[str, Any]:
        if shape == "llamacpp":
            return {"content": text, "add_special": False}
        body: dict[str, Any] = {"prompt": text, "add_special_tokens": False}
        if self.model:
            body["model"] = self.model
        return body

    def _post(self, shape: str, text: str) -> int:
        headers = {"Content-Type": "application/json"}
        if os.environ.get(API_KEY_ENV):
            headers["Authorization"] = f"Bearer {os.environ[API_KEY_ENV]}"
        request = urllib.request.Request(f"{self.base_url}/tokenize", method="POST", headers=headers,
                                         data=json.dumps(self._body(shape, text)).encode())
        with self._opener.open(request, timeout=self.timeout) as response:
            data = json.loads(response.read().decode("utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"unexpected response {str(data)[:80]!r}")
        tokens = data.get("tokens")
        if isinstance(tokens, list):
            return len(tokens)
        if isinstance(data.get("count"), int):
            return data["count"]
        raise ValueError(f"response has neither 'tokens' nor 'count': {str(data)[:120]!r}")

    def _detect(self) -> str:
        failures = []
        for shape in self.SHAPES:
            try:
                n = self._post(shape, self.PROBE)
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:160].decode("utf-8", "replace").strip()
                failures.append(f"{shape} request shape: HTTP {exc.code} {detail}")
                continue
            except urllib.error.URLError as exc:  # not listening at all: no point trying shapes
                raise WorkloadError(f"cannot reach {self.base_url}/tokenize to count prompt tokens: "
                                    f"{exc.reason}; is the server up?") from None
            except (ValueError, OSError) as exc:
                failures.append(f"{shape} request shape: {exc}")
                continue
            if n > 0:
                return shape
            failures.append(f"{shape} request shape: {self.PROBE!r} counted as 0 tokens")
        raise WorkloadError(f"{self.base_url} has no usable POST /tokenize endpoint ("
                            + "; ".join(failures) + "). Give a local tokenizer instead, or accept "
                            "approximate prompt lengths (no counter: PromptItem.exact is False)")

    def count(self, text: str) -> int:
        if not text:
            return 0
        if self.shape is None:
            self.shape = self._detect()
        try:
            return self._post(self.shape, text)
        except (urllib.error.URLError, ValueError, OSError) as exc:
            raise WorkloadError(f"tokenizing {len(text)} characters at {self.base_url}/tokenize "
                                f"({self.shape} shape) failed: {exc}") from None

    @staticmethod
    def available(base_url: str, model: str | None = None, timeout: float = 5.0) -> bool:
        """True when ``base_url`` answers one of the tokenize shapes (a probe; never raises)."""
        try:
            ServerTokenizer(base_url, model, timeout).count(ServerTokenizer.PROBE)
            return True
        except WorkloadError:
            return False

    def __repr__(self) -> str:
        return f"ServerTokenizer({self.base_url!r}, model={self.model!r}, shape={self.shape!r})"


class LocalTokenizer:
    """A Hugging Face tokenizer in this process (``tokenizer.json`` file/dir or a model id/path).

    Uses the ``tokenizers`` package when the path holds a ``tokenizer.json``, else ``transformers``;
    neither is a dependency of locust-llm, so the error says what to install.
    """

    def __init__(self, name_or_path: str | Path):
        self.name = str(name_or_path)
        path = Path(name_or_path).expanduser()
        file = path / "tokenizer.json" if path.is_dir() else path
        self._encode = None
        if file.is_file() and file.suffix == ".json":
            try:
                from tokenizers import Tokenizer
            except ImportError:
                pass
            else:
                tok = Tokenizer.from_file(str(file))
                self._encode = lambda text: len(tok.encode(text, add_special_tokens=False).ids)
        if self._encode is None:
            try:
                from transformers import AutoTokenizer
            except ImportError:
                raise WorkloadError(f"local tokenizer {self.name!r} needs the 'tokenizers' package (for a "
                                    "tokenizer.json) or 'transformers'; pip install one of them") from None
            tok = AutoTokenizer.from_pretrained(str(path) if path.exists() else self.name)
            self._encode = lambda text: len(tok.encode(text, add_special_tokens=False))

    def count(self, text: str) -> int:
        return self._encode(text) if text else 0

    def __repr__(self) -> str:
        return f"LocalTokenizer({self.name!r})"


class ApproxCounter:
    """Crude estimate used when nothing better exists: per whitespace-separated word,
    ``max(1, round(len(word) / 4))`` tokens (common English words are one token in GPT/Llama
    vocabularies, long ones two or three). Never claims exactness: items built with it are
    ``exact=False``."""

    def count(self, text: str) -> int:
        return sum(max(1, round(len(word) / 4)) for word in text.split())


def counter_for(base_url: str | None, model: str | None = None,
                tokenizer: str | Path | None = None, timeout: float = 10.0) -> TokenCounter | None:
    """The best counter available: the server's ``/tokenize``, else a local tokenizer, else None
    (None makes :class:`Workload` fall back to :class:`ApproxCounter` with ``exact=False``)."""
    if base_url and ServerTokenizer.available(base_url, model, timeout):
        counter = ServerTokenizer(base_url, model, timeout)
        counter.count(ServerTokenizer.PROBE)  # fixes the shape now
        return counter
    if tokenizer is not None:
        return LocalTokenizer(tokenizer)
    return None


# ----------------------------------------------------------------------------- request fields

def request_extra(engine: str, max_tokens: int | None = None, ignore_eos: bool = True) -> dict[str, Any]:
    """Body fields that pin the output length on ``engine``, beyond ``max_tokens``.

    * vLLM and SGLang: ``ignore_eos`` and ``min_tokens`` (both are extra sampling parameters of
      their OpenAI-compatible endpoints), so every request produces exactly ``max_tokens``.
    * llama.cpp: ``ignore_eos`` (it has no ``min_tokens``; ``max_tokens`` maps to ``n_predict``).
    * external / unknown servers: nothing, since strict OpenAI-compatible servers reject unknown
      fields; their output lengths are whatever the model produces (recorded per request).

    ``ignore_eos=False`` (the scenario's ``load.ignore_eos``) returns ``{}``: natural stopping.
    """
    if not ignore_eos:
        return {}
    if engine in ("vllm", "sglang"):
        extra: dict[str, Any] = {"ignore_eos": True}
        if max_tokens:
            extra["min_tokens"] = int(max_tokens)
        return extra
    if engine == "llamacpp":
        return {"ignore_eos": True}
    return {}


# ----------------------------------------------------------------------------- items and seeding

@dataclass(frozen=True)
class PromptItem:
    bucket: str
    prompt: str
    prompt_tokens: int
    max_tokens: int
    exact: bool  # prompt_tokens was verified by a real tokenizer (not an estimate)
    prompt_id: str = ""  # "<bucket>/<pool slot>" (generated) or "<file>:<line>" (dataset)


def _hash64(*parts: Any) -> int:
    """A 64-bit value from the parts: the counter-based RNG behind every per-request choice."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _unit(*parts: Any) -> float:
    return _hash64(*parts) / 2.0**64


class _Measure:
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


class _Prefixer:
    """Per-request prefixes of ``length`` words from ``alphabet``. Every alphabet word costs
    ``start_tokens`` at the start of a text and ``word_tokens`` after a space, so every prefix costs
    ``start_tokens + (length - 1) * word_tokens``."""

    def __init__(self, alphabet: list[str], word_tokens: int, start_tokens: int | None = None):
        if len(alphabet) < 2:
            raise WorkloadError("unique_prefix needs at least two words of equal token cost")
        self.alphabet, self.word_tokens = list(alphabet), word_tokens
        self.start_tokens = word_tokens if start_tokens is None else start_tokens
        self.length = math.ceil(_PREFIX_BITS / math.log2(len(alphabet)))
        while len(alphabet) ** (self.length - 1) >= 1 << _PREFIX_BITS:  # float log2 rounding
            self.length -= 1

    @property
    def tokens(self) -> int:
        return self.start_tokens + (self.length - 1) * self.word_tokens

    def text(self, worker: int, step: int, index: int) -> str:
        for name, value, bits in (("worker", worker, _WORKER_BITS), ("step", step, _STEP_BITS),
                                  ("index", index, _INDEX_BITS)):
            if not 0 <= value < 1 << bits:
                raise WorkloadError(f"unique_prefix supports {name} in [0, {1 << bits}); got {value}")
        value = (worker << (_STEP_BITS + _INDEX_BITS)) | (step << _INDEX_BITS) | index
        value = (value * _MIX_MUL + _MIX_ADD) & ((1 << _PREFIX_BITS) - 1)  # bijective scramble
        base, words = len(self.alphabet), []
        for _ in range(self.length):
            value, digit = divmod(value, base)
            words.append(self.alphabet[digit])
        return " ".join(words)

    @classmethod
    def build(cls, counter: TokenCounter, costs: dict[str, int]) -> "_Prefixer":
        """The alphabet that makes the shortest prefix: words sharing both their cost after a space
        (``costs``) and their cost at the start of a text (counted here)."""
        groups: dict[int, list[str]] = {}
        for word, cost in costs.items():
            groups.setdefault(cost, []).append(word)
        best: _Prefixer | None = None
        for cost in sorted(groups):
            if len(groups[cost]) < 2 or (best and 1 + cost > best.tokens):  # a prefix has 2+ words
                continue
            by_start: dict[int, list[str]] = {}
            for word in groups[cost]:
                by_start.setdefault(counter.count(word), []).append(word)
            start, alphabet = max(by_start.items(), key=lambda kv: (len(kv[1]), -kv[0]))
            if len(alphabet) >= 2 and start >= 1:
                candidate = cls(alphabet, cost, start)
                if best is None or candidate.tokens < best.tokens:
                    best = candidate
        if best is None:
            raise WorkloadError("unique_prefix: no two words of equal token cost were found with this "
                                "tokenizer; turn unique_prefix off")
        return best


# ----------------------------------------------------------------------------- prompt generation

class _Generator:
    """Builds texts of an exact token count from the word list, given per-word costs in context."""

    MAX_ROUNDS = 32

    def __init__(self, counter: TokenCounter):
        anchor = "the"
        base = counter.count(anchor)
        self.costs = {w: counter.count(f"{anchor} {w}") - base for w in WORDS}
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

    def fit(self, target: int, rng: random.Random, measure: _Measure, what: str) -> str:
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
                del words[rng.randrange(len(words) + 1):]
        raise WorkloadError(f"{what}: could not build a text of exactly {target} tokens with this tokenizer "
                            f"(counts seen: {seen[-6:]}); try another prompt_tokens or turn unique_prefix off")


# ----------------------------------------------------------------------------- datasets

@dataclass(frozen=True)
class DatasetRecord:
    prompt: str
    max_tokens: int | None
    answer: str | None
    bucket: str | None
    where: str  # "file:line"


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _jsonl_record(obj: Any, where: str) -> DatasetRecord | None:
    if not isinstance(obj, dict):
        raise WorkloadError(f"{where}: expected a JSON object with a 'prompt' string, found "
                            f"{type(obj).__name__} {_describe(obj)}")
    if "conversations" in obj:
        return _sharegpt_record(obj, where)
    if "prompt" not in obj:
        raise WorkloadError(f"{where}: missing key 'prompt' (a non-empty string); keys found: "
                            f"{', '.join(map(str, obj)) or 'none'}")
    prompt = obj["prompt"]
    if not isinstance(prompt, str) or not prompt.strip():
        raise WorkloadError(f"{where}: 'prompt' must be a non-empty string, found {_describe(prompt)}")
    max_tokens = None
    for key in ("max_tokens", "output_tokens"):
        if key in obj:
            if not _positive_int(obj[key]):
                raise WorkloadError(f"{where}: {key!r} must be a positive integer, found {_describe(obj[key])}")
            max_tokens = obj[key]
            break
    bucket = obj.get("bucket")
    if bucket is not None and (not isinstance(bucket, str) or not bucket):
        raise WorkloadError(f"{where}: 'bucket' must be a non-empty string, found {_describe(bucket)}")
    return DatasetRecord(prompt, max_tokens, None, bucket, where)


def _sharegpt_record(obj: Any, where: str) -> DatasetRecord | None:
    """First human turn = prompt, the next answer turn = reference output; None if no prompt."""
    if not isinstance(obj, dict):
        raise WorkloadError(f"{where}: expected a conversation object with a 'conversations' list, found "
                            f"{type(obj).__name__} {_describe(obj)}")
    turns = obj.get("conversations")
    if not isinstance(turns, list):
        raise WorkloadError(f"{where}: 'conversations' must be a list of {{'from': ..., 'value': ...}} turns, "
                            f"found {_describe(turns)}")
    prompt = answer = None
    for i, turn in enumerate(turns):
        if not (isinstance(turn, dict) and isinstance(turn.get("from"), str) and isinstance(turn.get("value"), str)):
            raise WorkloadError(f"{where}: conversations[{i}] must be an object with string 'from' and 'value', "
                                f"found {_describe(turn)}")
        role = turn["from"].lower()
        if prompt is None and role in HUMAN_ROLES:
            prompt = turn["value"]
        elif prompt is not None and role in ANSWER_ROLES:
            answer = turn["value"]
            break
    if prompt is None or not prompt.strip():
        return None
    return DatasetRecord(prompt, None, answer, None, where)


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _read_sharegpt(path: Path, text: str) -> tuple[list[DatasetRecord], int]:
    """A top-level JSON list, decoded one element at a time so errors can name the element's line."""
    decoder = json.JSONDecoder()
    records, skipped = [], 0
    i = _skip_ws(text, 0) + 1  # past '['
    line, line_pos = 1, 0

    def line_at(pos: int) -> int:
        nonlocal line, line_pos
        line += text.count("\n", line_pos, pos)
        line_pos = pos
        return line

    while True:
        i = _skip_ws(text, i)
        if i < len(text) and text[i] == "]" and not records and not skipped:
            break
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno})") from None
        record = _sharegpt_record(obj, f"{path}:{line_at(i)}")
        if record is None:
            skipped += 1
        else:
            records.append(record)
        i = _skip_ws(text, end)
        if i < len(text) and text[i] == ",":
            i += 1
            continue
        if i < len(text) and text[i] == "]":
            break
        raise WorkloadError(f"{path}:{line_at(min(i, len(text)))}: not valid JSON: expected ',' or ']' "
                            "after a conversation")
    rest = _skip_ws(text, i + 1)
    if rest < len(text):
        raise WorkloadError(f"{path}:{line_at(rest)}: not valid JSON: extra data after the closing ']'")
    return records, skipped


def read_dataset(path: str | Path) -> tuple[list[DatasetRecord], int]:
    """Parse a JSONL or ShareGPT JSON file -> (records, number of conversations skipped for having
    no human turn). Errors name the file, the line and what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise WorkloadError(f"{path}: dataset file not found")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    first = _skip_ws(text, 0)
    if first < len(text) and text[first] == "[" and path.suffix.lower() != ".jsonl":
        records, skipped = _read_sharegpt(path, text)
    else:
        records, skipped = [], 0
        for lineno, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise WorkloadError(f"{path}:{lineno}: not valid JSON: {exc.msg} (column {exc.colno}); "
                                    "JSONL needs one complete JSON object per line") from None
            record = _jsonl_record(obj, f"{path}:{lineno}")
            if record is None:
                skipped += 1
            else:
                records.append(record)
    if not records:
        raise WorkloadError(f"{path}: no usable prompts (" + (f"{skipped} conversations without a human turn"
                                                             if skipped else "no entries") + ")")
    return records, skipped


# ----------------------------------------------------------------------------- the workload

class Workload:
    """Pools of prompts per bucket plus the seeded choice of which one a request gets."""

    def __init__(self, pools: dict[str, list[PromptItem]], weights: dict[str, float], seed: int,
                 prefixer: _Prefixer | None = None, prefix_exact: bool = True, source: str = "generated",
                 skipped: int = 0):
        if not pools or any(not items for items in pools.values()):
            raise WorkloadError("a workload needs at least one bucket with at least one prompt")
        if set(weights) != set(pools) or any(w <= 0 for w in weights.values()):
            raise WorkloadError("bucket weights must be positive and name exactly the pools")
        self.pools = {name: list(items) for name, items in pools.items()}
        self.weights = dict(weights)
        self.seed = seed
        self.prefixer = prefixer
        self.prefix_exact = prefix_exact
        self.source = source
        self.skipped = skipped
        self._names = list(self.pools)
        total = sum(self.weights[n] for n in self._names)
        acc, self._cum = 0.0, []
        for name in self._names:
            acc += self.weights[name] / total
            self._cum.append(acc)
        self._cum[-1] = 1.0

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def from_spec(cls, load: LoadSpec, counter: TokenCounter | None, base_dir: Path,
                  pool_size: int = DEFAULT_POOL_SIZE,
                  max_dataset_items: int = DEFAULT_MAX_DATASET_ITEMS) -> "Workload":
        """Build the workload a scenario's ``load`` section describes. ``counter`` None means no
        tokenizer: lengths are estimated and every item has ``exact=False``. ``base_dir`` resolves a
        relative ``load.dataset`` (the scenario file's folder)."""
        exact = counter is not None
        counter = counter if counter is not None else ApproxCounter()
        # The word-cost table (one count per word) is needed for generated prompts and prefixes only.
        gen = _Generator(counter) if (load.unique_prefix or not load.dataset) else None
        prefixer = _Prefixer.build(counter, gen.costs) if load.unique_prefix else None
        measure = _Measure(counter, prefixer.text(0, 0, 0) if prefixer else "")
        if load.dataset:
            path = Path(load.dataset).expanduser()
            path = path if path.is_absolute() else Path(base_dir) / path
            workload = cls._dataset(path, load, counter, exact, measure, prefixer, max_dataset_items)
        else:
            buckets = {name: (b.prompt_tokens, b.max_tokens, b.weight) for name, b in load.buckets.items()} \
                or {"default": (load.prompt_tokens, load.max_tokens, 1.0)}
            pools = {}
            for name, (prompt_tokens, max_tokens, _) in buckets.items():
                pools[name] = cls._generate_pool(name, prompt_tokens, max_tokens, load.seed, gen, measure,
                                                 prefixer, exact, pool_size)
            workload = cls(pools, {n: b[2] for n, b in buckets.items()}, load.seed, prefixer)
        if prefixer and exact:
            workload.prefix_exact = workload._check_prefixes(counter)
        return workload

    @staticmethod
    def _generate_pool(name: str, prompt_tokens: int, max_tokens: int, seed: int, gen: _Generator,
                       measure: _Measure, prefixer: _Prefixer | None, exact: bool, size: int) -> list[PromptItem]:
        body_tokens = prompt_tokens - (prefixer.tokens if prefixer else 0)
        if body_tokens < 1:
            raise WorkloadError(f"bucket {name!r}: prompt_tokens {prompt_tokens} leaves no room for the unique "
                                f"prefix, which costs {prefixer.tokens} tokens with this tokenizer; raise "
                                f"prompt_tokens to at least {prefixer.tokens + 1} or turn unique_prefix off")
        items, seen = [], set()
        for slot in range(size):
            for attempt in range(8):  # a handful of retries keeps the pool distinct
                rng = random.Random(f"{seed}|{name}|{slot}|{attempt}")
                text = gen.fit(body_tokens, rng, measure, f"bucket {name!r}")
                if text not in seen:
                    break
            seen.add(text)
            items.append(PromptItem(name, text, body_tokens, max_tokens, exact, f"{name}/{slot}"))
        return items

    @classmethod
    def _dataset(cls, path: Path, load: LoadSpec, counter: TokenCounter, exact: bool, measure: _Measure,
                 prefixer: _Prefixer | None, limit: int) -> "Workload":
        records, skipped = read_dataset(path)
        if limit and len(records) > limit:
            keep = sorted(random.Random(f"{load.seed}|dataset").sample(range(len(records)), limit))
            records = [records[i] for i in keep]
        items = []
        for rec in records:
            if rec.max_tokens is not None:
                max_tokens = rec.max_tokens
            elif rec.answer and exact:
                max_tokens = max(1, counter.count(rec.answer))
            else:
                max_tokens = load.max_tokens
            items.append(PromptItem(rec.bucket or "dataset", rec.prompt, measure(rec.prompt), max_tokens,
                                    exact, rec.where))
        return cls({"dataset": items}, {"dataset": 1.0}, load.seed, prefixer, source=str(path), skipped=skipped)

    def _check_prefixes(self, counter: TokenCounter, per_bucket: int = 16) -> bool:
        """Re-count a sample of prefixed prompts; False (and a warning) if the total is not exact."""
        for name in self._names:
            for j, base in enumerate(self.pools[name][:per_bucket]):
                w, s, k = _hash64(self.seed, "check", j) % 1000, j % 7, _hash64(self.seed, "idx", j) % 100000
                item = self._prefixed(base, w, s, k)
                got = counter.count(item.prompt)
                if got != item.prompt_tokens:
                    warnings.warn(f"unique_prefix: bucket {name!r} prompt {base.prompt_id} counts {got} tokens "
                                  f"with a prefix, not {item.prompt_tokens}; the tokenizer merges across the "
                                  "prefix boundary, so prompt lengths are marked approximate (exact=False)")
                    return False
        return True

    # -- per request -----------------------------------------------------------------------------
    def _prefixed(self, base: PromptItem, worker: int, step: int, index: int) -> PromptItem:
        prefix = self.prefixer.text(worker, step, index)
        return PromptItem(base.bucket, f"{prefix} {base.prompt}", base.prompt_tokens + self.prefixer.tokens,
                          base.max_tokens, base.exact and self.prefix_exact, base.prompt_id)

    def item(self, worker: int, step: int, index: int) -> PromptItem:
        """The prompt of request ``index`` of ``worker`` in ladder ``step``.

        Deterministic in ``(seed, worker, index)``: the same in every run, variant and step, so
        variants and levels are compared on the same prompts. ``step`` only changes the unique
        prefix (when enabled), so a later step never hits the prefix cache an earlier one filled.
        """
        pool_name = self._names[bisect.bisect_right(self._cum, _unit(self.seed, "bucket", worker, index))] \
            if len(self._names) > 1 else self._names[0]
        pool = self.pools[pool_name]
        base = pool[_hash64(self.seed, "prompt", worker, index) % len(pool)]
        return self._prefixed(base, worker, step, index) if self.prefixer else base

    def consistency_prompts(self, n: int, max_tokens: int | None = None) -> list[PromptItem]:
        """``n`` fixed prompts (round-robin over buckets, pool order, no unique prefix) for a greedy
        baseline-vs-variant output agreement check; ``max_tokens`` caps their output length."""
        out = []
        for i in range(n):
            name = self._names[i % len(self._names)]
            pool = self.pools[name]
            base = pool[(i // len(self._names)) % len(pool)]
            if max_tokens is not None:
                base = PromptItem(base.bucket, base.prompt, base.prompt_tokens, min(base.max_tokens, max_tokens),
                                  base.exact, base.prompt_id)
            out.append(base)
        return out

    # -- description and transport ------------------------------------------------------------------
    @property
    def exact(self) -> bool:
        """True when every request's prompt_tokens is tokenizer-verified."""
        return all(it.exact for items in self.pools.values() for it in items) and \
            (self.prefixer is None or self.prefix_exact)

    @property
    def prefix_tokens(self) -> int:
        return self.prefixer.tokens if self.prefixer else 0

    def describe(self) -> dict[str, Any]:
        """Conditions for env.json and the report: source, exactness, buckets and their pools."""
        def span(values: list[int]) -> int | dict[str, int]:
            return values[0] if min(values) == max(values) else {"min": min(values), "max": max(values)}

        total = sum(self.weights.values())
        return {
            "source": self.source, "seed": self.seed, "exact": self.exact,
            "unique_prefix_tokens": self.prefix_tokens, "skipped_conversations": self.skipped,
            "buckets": {name: {"share": self.weights[name] / total, "pool": len(items),
                               "prompt_tokens": span([it.prompt_tokens + self.prefix_tokens for it in items]),
                               "max_tokens": span([it.max_tokens for it in items])}
                        for name, items in self.pools.items()},
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form, e.g. to build once on the Locust master and ship to workers."""
        return {"version": 1, "seed": self.seed, "source": self.source, "skipped": self.skipped,
                "weights": self.weights, "prefix_exact": self.prefix_exact,
                "prefix": None if not self.prefixer else
                {"alphabet": self.prefixer.alphabet, "word_tokens": self.prefixer.word_tokens,
                 "start_tokens": self.prefixer.start_tokens},
                "pools": {name: [asdict(it) for it in items] for name, items in self.pools.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Workload":
        if data.get("version") != 1:
            raise WorkloadError(f"unsupported workload format version {data.get('version')!r}")
        prefix = data.get("prefix")
        prefixer = _Prefixer(prefix["alphabet"], prefix["word_tokens"], prefix["start_tokens"]) if prefix else None
        pools = {name: [PromptItem(**it) for it in items] for name, items in data["pools"].items()}
        return cls(pools, data["weights"], data["seed"], prefixer, data.get("prefix_exact", True),
                   data.get("source", "generated"), data.get("skipped", 0))

    def __iter__(self) -> Iterator[PromptItem]:
        """Every pool item (without per-request prefixes), for inspection."""
        return (it for items in self.pools.values() for it in items)

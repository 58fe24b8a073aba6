"""The prompts a load test sends: exact token lengths, named buckets, datasets, seeded per worker.

What this module guarantees
---------------------------
* **Exact prompt lengths.** With a token counter (the server's own ``/tokenize`` via
  ``client.tokenizer.ServerTokenizer``, or a local tokenizer via :class:`LocalTokenizer`), every generated
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
* **Cold prompts: the unique prefix** (``load.unique_prefix``, on by default): each request starts with
  ``K`` words (a few tokens) that spell a bijective mix of ``(worker, step, index)`` in a mixed radix
  (``Prefixer``), so no prompt repeats within a run (warm-up, blocks, levels, repeats, soak windows)
  and a server's prompt cache can reuse nothing but what precedes the text (BOS, a chat template's
  header). All alphabet words have the same verified cost at the start of a text and the same cost
  after a space, so every prefix costs the same known number of tokens (``prefix_tokens``). Pool
  prompts and dataset prompts are built (or counted) *after* a prefix, so the total stays exact; a
  dataset smaller than the run is cycled, each request with its own marker. A sample of prefixed
  prompts is re-counted at set-up; if the tokenizer merges across the word boundary (llama/SPM and
  GPT-style BPE tokenizers split at spaces, so they do not), the items are marked ``exact=False``
  with a warning instead of claiming a wrong count. ``unique_prefix: false`` replays the pool's
  prompts (the old behaviour, cache hits and all).
* **Shared prefixes** (``load.shared_prefix: {tokens: N, groups: G}``): cache hits on purpose. Every
  prompt starts with one of G texts of exactly N tokens (chosen per ``(worker, index)``, so the same in
  every variant), then its unique marker, then its body; ``primers()`` are the G prefixes alone, sent
  unmeasured before each step so that each is in the cache.
* **Without a counter** (no ``/tokenize`` and no local tokenizer) lengths come from
  :class:`ApproxCounter`, a crude characters-per-word estimate, and every item has
  ``exact=False``; reports must say so.
* **Images** (``buckets.<name>.images``, chat only): a request of such a bucket carries its images
  (synthetic PNGs built once per workload, or ``count`` files drawn per request) on half of its requests,
  as ``hash64(seed, "images", worker, index)`` decides; the others are its text-only twins, drawn
  from the same pool of texts, so TTFT with and without the images is measured at the same text length.
* **Datasets:** JSONL (``{"prompt": ..., "max_tokens"|"output_tokens": n, "bucket": name}`` per
  line) or ShareGPT JSON (a list of ``{"conversations": [{"from": "human", "value": ...},
  {"from": "gpt", "value": ...}]}``; ShareGPT objects may also appear as JSONL lines). Requests
  draw dataset items uniformly (bucket labels are reported, ``load.buckets`` weights do not apply).
  Large files are reduced to a seeded sample of ``max_dataset_items`` before tokenization.

No Locust imports.
"""

from __future__ import annotations

import bisect
import random
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..scenario import LoadSpec
from ..scenario.images import Image, ImagesSpec, as_image, image_files, synthetic_png
from .conversations import Conversations, dialogue_items
from .datasets import read_dataset
from .generate import Generator, Measure, Prefixer
from .items import PromptItem, WorkloadError, hash64, unit
from .replay import TracePrompts
from .tokenizers import ApproxCounter, TokenCounter
from .traces import read_trace

__all__ = ["ImageSet", "Lead", "Workload"]

DEFAULT_POOL_SIZE = 64
DEFAULT_MAX_DATASET_ITEMS = 1024


@dataclass(frozen=True)
class ImageSet:
    """A bucket's images, encoded once: ``count`` per request, drawn from ``choices`` (all of them when synthetic)."""

    choices: tuple[Image, ...]
    count: int

    @classmethod
    def build(cls, spec: ImagesSpec, seed: int, bucket: str, base_dir: Path) -> ImageSet:
        if not spec.files:
            return cls(
                tuple(
                    as_image(synthetic_png(spec.width, spec.height, f"{seed}|{bucket}|image|{i}"))
                    for i in range(spec.count)
                ),
                spec.count,
            )
        try:
            return cls(
                tuple(as_image(path.read_bytes(), str(path)) for path in image_files(spec.files, Path(base_dir))),
                spec.count,
            )
        except (OSError, ValueError) as exc:
            raise WorkloadError(f"bucket {bucket!r}: images: {exc}") from None

    def pick(self, seed: int, worker: int, index: int) -> tuple[Image, ...]:
        if len(self.choices) == self.count:
            return self.choices
        return tuple(
            self.choices[hash64(seed, "image", worker, index, j) % len(self.choices)] for j in range(self.count)
        )

    def describe(self) -> dict[str, Any]:
        return {
            "per_request": self.count,
            "distinct": len(self.choices),
            "sizes": sorted({f"{i.width}x{i.height}" for i in self.choices}),
            "bytes_mean": sum(i.nbytes for i in self.choices) / len(self.choices),
        }


@dataclass(frozen=True)
class Lead:
    """What goes before every prompt body: its group's shared prefix (``load.shared_prefix``), then a unique marker
    (``load.unique_prefix``); nothing when prompts are replayed."""

    seed: int
    prefixer: Prefixer | None = None
    shared: tuple[str, ...] = ()  # one text per group, each exactly ``shared_tokens`` tokens at a text's start
    shared_tokens: int = 0

    @property
    def mode(self) -> str:
        """``cold``, ``replayed`` or ``shared``, as ``LoadSpec.prompt_cache``."""
        return "shared" if self.shared else "cold" if self.prefixer else "replayed"

    @property
    def marker_tokens(self) -> int:
        if self.prefixer is None:
            return 0
        return self.prefixer.tokens_after_space if self.shared else self.prefixer.tokens

    @property
    def tokens(self) -> int:
        return self.shared_tokens + self.marker_tokens

    def group(self, worker: int, index: int) -> int:
        """The shared prefix request ``index`` of ``worker`` starts with: the same in every step and variant."""
        return hash64(self.seed, "shared", worker, index) % len(self.shared)

    def text(self, worker: int, step: int, index: int) -> str:
        if self.prefixer is None:
            return ""
        marker = self.prefixer.text(worker, step, index)
        return f"{self.shared[self.group(worker, index)]} {marker}" if self.shared else marker

    def describe(self) -> dict[str, Any]:
        return {
            "prompt_cache": self.mode,
            "unique_prefix_tokens": self.marker_tokens,
            "shared_prefix": {"tokens": self.shared_tokens, "groups": len(self.shared)} if self.shared else None,
        }


class Workload:
    """Pools of prompts per bucket plus the seeded choice of which one a request gets."""

    def __init__(
        self,
        pools: dict[str, list[PromptItem]],
        weights: dict[str, float],
        seed: int,
        lead: Lead | None = None,
        prefix_exact: bool = True,
        source: str = "generated",
        skipped: int = 0,
    ):
        if not pools or any(not items for items in pools.values()):
            raise WorkloadError("a workload needs at least one bucket with at least one prompt")
        if set(weights) != set(pools) or any(w <= 0 for w in weights.values()):
            raise WorkloadError("bucket weights must be positive and name exactly the pools")
        self.pools = {name: list(items) for name, items in pools.items()}
        self.weights = dict(weights)
        self.seed = seed
        self.lead = lead if lead is not None else Lead(seed)
        self.prefixer = self.lead.prefixer
        self.prefix_exact = prefix_exact
        self.source = source
        self.skipped = skipped
        self.counter: TokenCounter | None = None  # the exact counter it was built with (None: lengths estimated)
        self.contexts: dict[int, list[PromptItem]] = {}  # context-axis pools by prompt length, never mixed in
        self.images: dict[str, ImageSet] = {}  # buckets whose requests carry images (half of them)
        self.conversations: Conversations | None = None  # load.conversation: the user messages of each turn
        self.trace: TracePrompts | None = None  # load.trace: the replayed records' prompts
        self.dialogues: list[tuple[PromptItem, ...]] | None = None  # a dataset's conversations, turn by turn
        self._names = list(self.pools)
        total = sum(self.weights[n] for n in self._names)
        acc, self._cum = 0.0, []
        for name in self._names:
            acc += self.weights[name] / total
            self._cum.append(acc)
        self._cum[-1] = 1.0

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def from_spec(
        cls,
        load: LoadSpec,
        counter: TokenCounter | None,
        base_dir: Path,
        pool_size: int = DEFAULT_POOL_SIZE,
        max_dataset_items: int = DEFAULT_MAX_DATASET_ITEMS,
        context: int | None = None,
        nonce: int = 0,
    ) -> Workload:
        """Build the workload a scenario's ``load`` section describes. ``counter`` None means no
        tokenizer: lengths are estimated and every item has ``exact=False``. ``base_dir`` resolves a
        relative ``load.dataset`` (the scenario file's folder). ``context``: the server's tokens per request, which
        bounds conversations and skips trace records that do not fit (None: unknown). ``nonce``: the run's, mixed
        into every unique marker (``Prefixer``), so no run repeats another's prompts; lengths and texts stay."""
        exact = counter is not None
        counter = counter if counter is not None else ApproxCounter()
        # The word-cost table (one count per word) is needed for generated prompts and prefixes only.
        gen = Generator(counter) if (load.unique_prefix or not load.dataset) else None
        prefixer = Prefixer.build(counter, gen.costs, nonce) if load.unique_prefix else None
        shared = cls._shared_prefixes(load, gen, counter)
        lead = Lead(load.seed, prefixer, tuple(shared), load.shared_prefix.tokens if shared else 0)
        measure = Measure(counter, lead.text(0, 0, 0))
        if load.dataset:
            path = Path(load.dataset).expanduser()
            path = path if path.is_absolute() else Path(base_dir) / path
            workload = cls._dataset(path, load, counter, exact, measure, lead, max_dataset_items)
        else:
            buckets = {name: (b.prompt_tokens, b.max_tokens, b.weight) for name, b in load.buckets.items()} or {
                "default": (load.prompt_tokens, load.max_tokens, 1.0)
            }
            pools = {}
            for name, (prompt_tokens, max_tokens, _) in buckets.items():
                pools[name] = cls._generate_pool(
                    name, prompt_tokens, max_tokens, load.seed, gen, measure, lead, exact, pool_size
                )
            workload = cls(pools, {n: b[2] for n, b in buckets.items()}, load.seed, lead)
            workload.images = {
                name: ImageSet.build(b.images, load.seed, name, base_dir)
                for name, b in load.buckets.items()
                if b.images
            }
            # Long prompts cost a tokenizer round trip each: a smaller pool per context length.
            workload.contexts = {
                n: cls._generate_pool(
                    f"ctx-{n}", n, load.max_tokens, load.seed, gen, measure, lead, exact, max(pool_size // 4, 1)
                )
                for n in load.context_tokens
            }
        if prefixer and exact:
            workload.prefix_exact = workload._check_prefixes(counter)
        workload.counter = counter if exact else None
        if load.conversation is not None:
            workload.conversations = Conversations(workload, load.conversation, workload.dialogues, context)
        if load.trace is not None:
            trace = read_trace(load.trace, Path(base_dir) / Path(load.trace.path).expanduser())
            workload.trace = TracePrompts(trace, gen, counter, exact, load.seed, context, nonce)
        return workload

    @staticmethod
    def _shared_prefixes(load: LoadSpec, gen: Generator | None, counter: TokenCounter) -> list[str]:
        """``load.shared_prefix``: one text of exactly ``tokens`` tokens (counted at a text's start) per group."""
        spec = load.shared_prefix
        if spec is None or gen is None:
            return []
        measure, texts = Measure(counter), []
        for group in range(spec.groups):
            for attempt in range(8):  # distinct groups: two equal prefixes would be one group
                rng = random.Random(f"{load.seed}|shared|{group}|{attempt}")
                text = gen.fit(spec.tokens, rng, measure, f"shared_prefix group {group}")
                if text not in texts:
                    break
            texts.append(text)
        return texts

    @staticmethod
    def _generate_pool(
        name: str,
        prompt_tokens: int,
        max_tokens: int,
        seed: int,
        gen: Generator,
        measure: Measure,
        lead: Lead,
        exact: bool,
        size: int,
    ) -> list[PromptItem]:
        body_tokens = prompt_tokens - lead.tokens
        if body_tokens < 1:
            what = "shared prefix and unique prefix" if lead.shared else "unique prefix"
            raise WorkloadError(
                f"bucket {name!r}: prompt_tokens {prompt_tokens} leaves no room for the {what}, which "
                f"cost {lead.tokens} tokens with this tokenizer; raise prompt_tokens to at least "
                f"{lead.tokens + 1}"
                + (", or lower shared_prefix.tokens" if lead.shared else ", or set unique_prefix: false")
            )
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
    def _dataset(
        cls,
        path: Path,
        load: LoadSpec,
        counter: TokenCounter,
        exact: bool,
        measure: Measure,
        lead: Lead,
        limit: int,
    ) -> Workload:
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
            items.append(
                PromptItem(rec.bucket or "dataset", rec.prompt, measure(rec.prompt), max_tokens, exact, rec.where)
            )
        workload = cls({"dataset": items}, {"dataset": 1.0}, load.seed, lead, source=str(path), skipped=skipped)
        if load.conversation is not None:
            workload.dialogues = dialogue_items(
                records, load.conversation.turns, load.max_tokens, counter, exact, measure
            )
        return workload

    def _check_prefixes(self, counter: TokenCounter, per_bucket: int = 16) -> bool:
        """Re-count a sample of prefixed prompts; False (and a warning) if the total is not exact."""
        for name in self._names:
            for j, base in enumerate(self.pools[name][:per_bucket]):
                w, s, k = hash64(self.seed, "check", j) % 1000, j % 7, hash64(self.seed, "idx", j) % 100000
                item = self._prefixed(base, w, s, k)
                got = counter.count(item.prompt)
                if got != item.prompt_tokens:
                    warnings.warn(
                        f"unique_prefix: bucket {name!r} prompt {base.prompt_id} counts {got} tokens "
                        f"with a prefix, not {item.prompt_tokens}; the tokenizer merges across the "
                        "prefix boundary, so prompt lengths are marked approximate (exact=False)",
                        stacklevel=2,
                    )
                    return False
        return True

    # -- per request -----------------------------------------------------------------------------
    def _prefixed(self, base: PromptItem, worker: int, step: int, index: int) -> PromptItem:
        return PromptItem(
            base.bucket,
            f"{self.lead.text(worker, step, index)} {base.prompt}",
            base.prompt_tokens + self.prefix_tokens,
            base.max_tokens,
            base.exact and self.prefix_exact,
            base.prompt_id,
        )

    def primers(self) -> list[PromptItem]:
        """One request per shared prefix, sent (unmeasured) before each step so that its prefix is in the cache."""
        exact = self.counter is not None
        return [
            PromptItem("shared", text, self.lead.shared_tokens, 1, exact, f"shared/{group}")
            for group, text in enumerate(self.lead.shared)
        ]

    def item(self, worker: int, step: int, index: int, context: int = 0) -> PromptItem:
        """The prompt of request ``index`` of ``worker`` in ladder ``step`` (of the ``context``-token pool in
        a context-axis step).

        Deterministic in ``(seed, worker, index)``: the same in every run, variant and step, so
        variants and levels are compared on the same prompts. ``step`` only changes the unique
        prefix (when enabled), so a later step never hits the prefix cache an earlier one filled.
        """
        if context:
            pool = self.contexts[context]
        else:
            pool_name = (
                self._names[bisect.bisect_right(self._cum, unit(self.seed, "bucket", worker, index))]
                if len(self._names) > 1
                else self._names[0]
            )
            pool = self.pools[pool_name]
        base = pool[hash64(self.seed, "prompt", worker, index) % len(pool)]
        item = self._prefixed(base, worker, step, index) if self.prefixer else base
        images = None if context else self.images.get(item.bucket)
        if images is None:
            return item
        with_images = hash64(self.seed, "images", worker, index) % 2 == 0
        return replace(item, images=images.pick(self.seed, worker, index) if with_images else ())

    def consistency_prompts(self, n: int, max_tokens: int | None = None) -> list[PromptItem]:
        """``n`` fixed prompts (round-robin over buckets, pool order, no unique prefix) for a greedy
        baseline-vs-variant output agreement check; ``max_tokens`` caps their output length."""
        out = []
        for i in range(n):
            name = self._names[i % len(self._names)]
            pool = self.pools[name]
            base = pool[(i // len(self._names)) % len(pool)]
            if max_tokens is not None:
                base = PromptItem(
                    base.bucket,
                    base.prompt,
                    base.prompt_tokens,
                    min(base.max_tokens, max_tokens),
                    base.exact,
                    base.prompt_id,
                )
            out.append(base)
        return out

    # -- description and transport ------------------------------------------------------------------
    @property
    def exact(self) -> bool:
        """True when every request's prompt_tokens is tokenizer-verified."""
        return all(it.exact for items in [*self.pools.values(), *self.contexts.values()] for it in items) and (
            self.prefixer is None or self.prefix_exact
        )

    @property
    def prefix_tokens(self) -> int:
        """Tokens before every body: the shared prefix (if any) and the unique marker."""
        return self.lead.tokens

    def describe(self) -> dict[str, Any]:
        """Conditions for env.json and the report: source, exactness, buckets and their pools."""

        def span(values: list[int]) -> int | dict[str, int]:
            return values[0] if min(values) == max(values) else {"min": min(values), "max": max(values)}

        total = sum(self.weights.values())
        return {
            "source": self.source,
            "seed": self.seed,
            "exact": self.exact,
            **self.lead.describe(),
            "skipped_conversations": self.skipped,
            "buckets": {
                name: {
                    "share": self.weights[name] / total,
                    "pool": len(items),
                    "prompt_tokens": span([it.prompt_tokens + self.prefix_tokens for it in items]),
                    "max_tokens": span([it.max_tokens for it in items]),
                    **({"images": self.images[name].describe()} if name in self.images else {}),
                }
                for name, items in self.pools.items()
            },
            "contexts": {
                str(n): {
                    "pool": len(items),
                    "prompt_tokens": span([it.prompt_tokens + self.prefix_tokens for it in items]),
                }
                for n, items in self.contexts.items()
            },
            **({"conversation": self.conversations.describe()} if self.conversations else {}),
            **({"trace": self.trace.describe()} if self.trace else {}),
        }

    def __iter__(self) -> Iterator[PromptItem]:
        """Every pool item (without per-request prefixes), for inspection."""
        return (it for items in self.pools.values() for it in items)

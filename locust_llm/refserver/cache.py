"""The reference server's prompt cache: a block prefix cache whose every hit is known, and its counters.

Like vLLM's prefix cache, a prompt (its whitespace-separated words, one token each, as the reference server's
``/tokenize`` counts them) is split into blocks of ``block`` tokens; block i's key chains the keys of the blocks
before it, starting from the request's ``cache_salt`` (requests with different salts share nothing). A request's
cached tokens are its leading blocks already in the cache, whole blocks only and at most ``tokens - 1`` (the last
token is always computed); then every full block of it enters the cache, which forgets the least recently used
blocks beyond ``capacity``. ``block`` 0 turns the cache off (no request is cached, nothing is reported).

``/metrics`` shows the counters in one engine's names (``style``), so that each engine's reading of them is tested:
``vllm`` (``prefix_cache_queries`` / ``prefix_cache_hits``, every prompt token / the cached ones), ``sglang``
(``prompt_tokens`` / ``cached_tokens``, the latter only once a hit happened, as SGLang creates it) and ``llamacpp``
(``prompt_tokens``, the *computed* ones, and ``prompt_tokens_cached``).
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["METRIC_STYLES", "PrefixCache"]

METRIC_STYLES = ("vllm", "sglang", "llamacpp")


class PrefixCache:
    def __init__(self, block: int = 16, capacity: int = 100_000, style: str = "vllm", reported: bool = True):
        if not isinstance(block, int) or isinstance(block, bool) or block < 0:
            raise ValueError(f"cache block size must be an int >= 0 (0: no cache), got {block!r}")
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
            raise ValueError(f"cache capacity must be an int >= 1 (blocks), got {capacity!r}")
        if style not in METRIC_STYLES:
            raise ValueError(f"metrics style must be one of {METRIC_STYLES}, got {style!r}")
        self.block, self.capacity, self.style = block, capacity, style
        self.said = reported  # False: a cache that says nothing (no cached_tokens, no /metrics), as some servers
        self.blocks: OrderedDict[int, None] = OrderedDict()
        self.prompt_tokens = 0
        self.cached_tokens = 0

    @property
    def enabled(self) -> bool:
        return self.block > 0

    @property
    def reported(self) -> bool:
        """Whether answers and ``/metrics`` tell the cache's hits."""
        return self.enabled and self.said

    def _keys(self, words: list[str], salt: str) -> list[int]:
        keys, key = [], hash(("salt", salt))
        for start in range(0, len(words) - self.block + 1, self.block):
            key = hash((key, tuple(words[start : start + self.block])))
            keys.append(key)
        return keys

    def admit(self, prompt: str, salt: str = "") -> int:
        """The cached tokens of a request with this prompt, which then enters the cache; counted."""
        words = prompt.split()
        cached = 0
        if self.enabled:
            keys = self._keys(words, str(salt))
            hit = 0
            while hit < len(keys) and keys[hit] in self.blocks:
                hit += 1
            cached = self.block * min(hit, max(len(words) - 1, 0) // self.block)
            for key in keys:
                self.blocks[key] = None
                self.blocks.move_to_end(key)
            while len(self.blocks) > self.capacity:
                self.blocks.popitem(last=False)
        self.prompt_tokens += len(words)
        self.cached_tokens += cached
        return cached

    def metrics_text(self, model: str) -> str:
        """The counters as a Prometheus text page in this cache's engine style."""
        labels = f'{{model_name="{model}"}}'
        if self.style == "vllm":
            counters = [
                ("vllm:prefix_cache_queries", self.prompt_tokens),
                ("vllm:prefix_cache_hits", self.cached_tokens),
            ]
            counters.append(("vllm:prompt_tokens", self.prompt_tokens))
        elif self.style == "sglang":
            counters = [("sglang:prompt_tokens", self.prompt_tokens)]
            if self.cached_tokens:
                counters.append(("sglang:cached_tokens", self.cached_tokens))
        else:
            counters = [
                ("llamacpp:prompt_tokens", self.prompt_tokens - self.cached_tokens),
                ("llamacpp:prompt_tokens_cached", self.cached_tokens),
            ]
        lines = []
        for name, value in counters:
            lines += [f"# TYPE {name} counter", f"{name}_total{labels} {value}"]
        return "\n".join(lines) + "\n"

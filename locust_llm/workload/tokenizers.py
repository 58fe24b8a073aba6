"""Token counters: a local Hugging Face tokenizer, or a crude estimate; the server's own ``/tokenize`` is
``client.tokenizer`` (HTTP stays in ``client``, which imports this package, not the other way round).

Used at set-up only (never on a request's path).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from .items import WorkloadError

__all__ = ["ApproxCounter", "BatchCounter", "LocalTokenizer", "TokenCounter", "count_each"]


@runtime_checkable
class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...


@runtime_checkable
class BatchCounter(Protocol):
    """A counter that counts many independent texts faster together than one by one (a server across a network:
    the calls overlap)."""

    def count_each(self, texts: list[str]) -> list[int]: ...


def count_each(counter: TokenCounter, texts: list[str]) -> list[int]:
    """Each text's count, in order: together where the counter can, else one by one."""
    if isinstance(counter, BatchCounter):
        return counter.count_each(texts)
    return [counter.count(text) for text in texts]


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
                raise WorkloadError(
                    f"local tokenizer {self.name!r} needs the 'tokenizers' package (for a "
                    "tokenizer.json) or 'transformers'; pip install one of them"
                ) from None
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

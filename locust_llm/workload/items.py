"""What a request gets from the workload (``PromptItem``), the workload's error, and its counter-based hashing."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ..scenario.images import Image

__all__ = ["PromptItem", "WorkloadError", "hash64", "prompt_hash", "unit"]


class WorkloadError(ValueError):
    """A workload that cannot be built; the message names the file, line or bucket and the fix."""


@dataclass(frozen=True)
class PromptItem:
    bucket: str
    prompt: str
    prompt_tokens: int
    max_tokens: int
    exact: bool  # prompt_tokens was verified by a real tokenizer (not an estimate)
    prompt_id: str = ""  # "<bucket>/<pool slot>" (generated) or "<file>:<line>" (dataset)
    # Images sent with the text (a bucket with ``images``); () for its text-only twins, None in other buckets.
    images: tuple[Image, ...] | None = None


def hash64(*parts: Any) -> int:
    """A 64-bit value from the parts: the counter-based RNG behind every per-request choice."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def prompt_hash(prompt: str) -> int:
    """A 63-bit fingerprint of a prompt's text (an int64 column): equal prompts, equal fingerprints."""
    return hash64(prompt) >> 1


def unit(*parts: Any) -> float:
    return hash64(*parts) / 2.0**64

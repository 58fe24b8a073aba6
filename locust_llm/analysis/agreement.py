"""Token-level agreement of each variant with the baseline on the fixed greedy prompts. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .errors import clip

__all__ = ["agreement", "first_divergence"]

TEXT_MAX = 240


def first_divergence(reference: list | str, other: list | str) -> int | None:
    """Index of the first differing element (token or character); None when identical."""
    if reference == other:
        return None
    for i, (a, b) in enumerate(zip(reference, other, strict=False)):
        if a != b:
            return i
    return min(len(reference), len(other))


class Answered(Protocol):
    """A greedy answer of a run file (``rundir.consistency.ConsistencyAnswer``, ``rundir.quality.QualityAnswer``)."""

    @property
    def text(self) -> str | None: ...
    @property
    def tokens(self) -> list[int] | None: ...
    @property
    def error(self) -> str | None: ...


def agreement(prompt_ids: Sequence[str], baseline: Sequence[Answered], variant: Sequence[Answered]) -> dict:
    """Per prompt: the first divergence position, in tokens when both sides gave ids, else characters. Answers pair
    up by position; ``prompt_ids`` names the baseline's."""
    prompts: list[dict] = []
    for prompt_id, ref, out in zip(prompt_ids, baseline, variant, strict=False):
        if ref.error or out.error or ref.text is None or out.text is None:
            prompts.append({"prompt_id": prompt_id, "status": "error", "error": clip(ref.error or out.error, TEXT_MAX)})
            continue
        a: list[int] | str
        b: list[int] | str
        if ref.tokens is not None and out.tokens is not None:
            unit, a, b = "token", ref.tokens, out.tokens
        else:
            unit, a, b = "char", ref.text, out.text
        position = first_divergence(a, b)
        prompts.append(
            {
                "prompt_id": prompt_id,
                "unit": unit,
                "length": len(a),
                "first_divergence": position,
                "status": "identical" if position is None else "diverged",
                "baseline_text": clip(ref.text, TEXT_MAX),
                "variant_text": clip(out.text, TEXT_MAX),
            }
        )
    compared = [p for p in prompts if p["status"] != "error"]
    identical = sum(p["status"] == "identical" for p in compared)
    return {
        "prompts": prompts,
        "compared": len(compared),
        "identical": identical,
        "agreement": identical / len(compared) if compared else None,
        "defect": any(p["status"] == "diverged" for p in compared),
    }

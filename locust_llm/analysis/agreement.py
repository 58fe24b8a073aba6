"""Token-level agreement of each variant with the baseline on the fixed greedy prompts. Pure."""

from __future__ import annotations

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


def agreement(baseline: list[dict], variant: list[dict]) -> dict:
    """Per prompt: the first divergence position, in tokens when both sides gave ids, else characters."""
    prompts = []
    for ref, out in zip(baseline, variant, strict=False):
        if ref.get("error") or out.get("error") or ref.get("text") is None or out.get("text") is None:
            prompts.append(
                {
                    "prompt_id": ref.get("prompt_id"),
                    "status": "error",
                    "error": clip(ref.get("error") or out.get("error"), TEXT_MAX),
                }
            )
            continue
        use_tokens = ref.get("tokens") is not None and out.get("tokens") is not None
        a, b = (ref["tokens"], out["tokens"]) if use_tokens else (ref["text"], out["text"])
        position = first_divergence(a, b)
        prompts.append(
            {
                "prompt_id": ref.get("prompt_id"),
                "unit": "token" if use_tokens else "char",
                "length": len(a),
                "first_divergence": position,
                "status": "identical" if position is None else "diverged",
                "baseline_text": clip(ref["text"], TEXT_MAX),
                "variant_text": clip(out["text"], TEXT_MAX),
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

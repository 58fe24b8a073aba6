"""Greedy consistency as one check. Pure.

Under greedy decoding, lossless speculation must not change a single token. Each variant's greedy answers are
compared with the baseline's twice over: on the fixed consistency prompts (``consistency.json``) and on the quality
tasks (``quality.json``, when the scenario has them). Both count in one figure, and every divergence is named with
the token where it begins. The baseline answers the consistency prompts twice; whether it repeated itself tells
what a divergence means: a server that is deterministic alone but not with speculation has a speculative-decoding
defect (kernels that batch the drafts round differently count: the output changed); a server that is not
deterministic even alone explains the divergence without speculation.
"""

from __future__ import annotations

from .documents.quality import Agreement, GreedyCheck, GreedyDivergence

__all__ = ["greedy_check"]

SPECULATION, NONDETERMINISM, UNKNOWN = "speculative decoding", "engine nondeterminism", "unknown"


def _diverged(agreement: Agreement | None, source: str) -> list[GreedyDivergence]:
    if agreement is None:
        return []
    return [
        GreedyDivergence(
            source=source,
            prompt_id=p.prompt_id,
            unit=p.unit,
            first_divergence=p.first_divergence,
            length=p.length,
        )
        for p in agreement.prompts
        if p.status == "diverged"
    ]


def _where(d: GreedyDivergence) -> str:
    return f"{d.source} {d.prompt_id} from {d.unit or 'token'} {d.first_divergence} of {d.length}"


def greedy_check(consistency: Agreement | None, quality: Agreement | None, repeat: Agreement | None) -> GreedyCheck:
    """One variant's greedy answers against the baseline's (``consistency``: the consistency prompts; ``quality``: the
    quality tasks' greedy answers; either None when not asked) and the baseline against its own repeat."""
    parts = [a for a in (consistency, quality) if a is not None]
    compared = sum(a.compared for a in parts)
    identical = sum(a.identical for a in parts)
    diverged = _diverged(consistency, "consistency prompt") + _diverged(quality, "quality task")
    if repeat is None or not repeat.compared:
        state, repeat_text = "not asked", "the baseline was not asked twice, so the cause is unknown"
    elif repeat.defect:
        state = "diverged"
        repeat_text = (
            f"the baseline did not repeat itself ({repeat.compared - repeat.identical} of {repeat.compared} prompts "
            "differ when asked again): the server is not deterministic even alone"
        )
    else:
        state = "identical"
        repeat_text = f"the baseline repeated itself on {repeat.identical}/{repeat.compared}"
    counted = f"{identical}/{compared} greedy answers identical to the baseline's"
    if not diverged:
        cause = None
        text = f"{counted}; {repeat_text}" if compared else "no greedy answer compared"
    else:
        cause = {"identical": SPECULATION, "diverged": NONDETERMINISM}.get(state, UNKNOWN)
        meaning = {
            SPECULATION: "speculative decoding changed the output (a defect: lossless speculation must not)",
            NONDETERMINISM: "the divergence cannot be blamed on speculative decoding",
            UNKNOWN: "a divergence to look into",
        }[cause]
        named = "; ".join(_where(d) for d in diverged)
        text = f"{counted}, DIVERGED on {named}; {repeat_text}: {meaning}"
    return GreedyCheck(
        compared=compared,
        identical=identical,
        diverged=diverged,
        baseline_repeat=state,
        cause=cause,
        text=text,
    )

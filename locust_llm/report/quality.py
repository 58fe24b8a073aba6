"""The report's quality section, from the ``RunView`` alone: per variant the pass rates with their intervals, the
difference from the baseline, greedy agreement task by task, eligibility, and the failing answers."""

from __future__ import annotations

from ..fmt import pct, pct_ci, points, points_ci
from .view import RunView

__all__ = ["quality"]


def _rate(rate) -> dict | None:
    if rate is None:
        return None
    return {
        "rate": pct(rate.rate),
        "passed": rate.passed,
        "answers": rate.answers,
        "errors": rate.errors,
        "ci": pct_ci(rate.rate_ci95) or "no CI",
        "pairs": rate.pairs,
        "difference": f"{points(rate.difference)} points" if rate.difference is not None else None,
        "difference_ci": points_ci(rate.difference_ci95),
        "beyond": rate.beyond_limit,
    }


def quality(view: RunView) -> dict | None:
    """None without a quality check."""
    doc = view.summary.quality
    if doc is None:
        return None
    variants = []
    for name, figures in doc.variants.items():
        agreement = figures.agreement
        variants.append(
            {
                "variant": name,
                "color": view.color(name),
                "baseline": name == view.baseline,
                "answered": figures.answered,
                "eligible": figures.eligible,
                "reason": figures.reason,
                "text": figures.text,
                "greedy": _rate(figures.greedy),
                "sampled": _rate(figures.sampled),
                "agreement": f"{agreement.identical}/{agreement.compared}" if agreement else None,
                "defect": bool(agreement and agreement.defect),
                "tasks": [p.model_dump() for p in agreement.prompts] if agreement else [],
                "failing": [f.model_dump() for f in figures.failing],
                "failing_total": figures.failing_total,
            }
        )
    seeds = ", ".join(map(str, doc.seeds))
    sampling = (
        f"{len(doc.seeds)} sampled answers per task at temperature {doc.temperature:g} (seeds {seeds})"
        if doc.seeds
        else "no sampled answers (temperature 0: every seed would repeat the greedy answer)"
    )
    return {
        "tasks": doc.tasks,
        "count": doc.items,
        "sampling": sampling,
        "limit": f"{doc.max_drop_pct:g}",
        "method": doc.method,
        "text": doc.text,
        "unscored": doc.unscored,
        "variants": variants,
        "conditions": view.conditions_line(),
    }

"""The quality check (``quality.json``) -> ``Summary.quality``: each variant's answers scored against the task set,
pass rates with intervals, the difference from the baseline, the gate, and the one set of variants that may be
recommended. Pure.

A throughput number counts only for a configuration whose output quality passed: a variant is **eligible** when
it is the baseline, or when its answers were compared with the baseline's and no pass rate (greedy, sampled)
dropped beyond ``max_drop_pct`` with its whole 95% interval. ``not_eligible`` is what every recommendation
consults (comparisons, the sweep schedule, cost); a variant that is not eligible is still measured and shown.

* ``@baseline`` references are the baseline's greedy answers, so the baseline passes those tasks by definition and
  a lossless variant must too; under sampling a variant must pass them as often as the baseline does.
* Answers are paired with the baseline's: greedy by task, sampled by task and seed. Failures to answer count as
  failed answers, never as left out.
"""

from __future__ import annotations

from ..fmt import NOT_MEASURED, pct, pct_ci, points, points_ci
from ..rundir.quality import QualityAnswer, QualityFile, QualityTask
from ..scenario.quality import BASELINE_REFERENCE
from .agreement import agreement
from .documents.quality import QualitySummary
from .errors import clip
from .proportions import paired_difference_interval, wilson_interval
from .scoring import expectation, passes

__all__ = ["METHOD", "mark_not_eligible", "not_eligible", "quality_state", "quality_summary"]

FAILING_LISTED = 40  # per variant; the total is given
NOT_JUDGED = "not judged: the run measured no baseline ({baseline}) to compare with"
TEXT_MAX = 240
METHOD = (
    "Pass rates with Wilson score 95% intervals. The difference from the baseline pairs each answer with the "
    "baseline's (greedy: same task; sampled: same task and seed) and takes Newcombe's hybrid score 95% "
    "interval for paired proportions. A variant fails the gate, and is not eligible for any recommendation, "
    "when the interval of its drop in pass rate lies entirely beyond max_drop_pct (in percentage points), "
    "for greedy or for sampled answers. An answer the server failed to give counts as failed."
)

Scores = dict[tuple, tuple[bool, QualityAnswer]]  # (task index, seed or None) -> (passed, the answer)


def score(items: list[QualityTask], references: list, answers: list[QualityAnswer], sampled: bool) -> Scores:
    """Every answer of one kind scored; tasks whose reference is unknown are left out."""
    out: Scores = {}
    for answer in answers:
        index = answer.item
        reference = references[index]
        if reference is None:
            continue
        text = answer.text
        ok = not answer.error and text is not None and passes(items[index].match, reference, text)
        out[(index, answer.seed if sampled else None)] = (ok, answer)
    return out


def pass_rate(own: Scores, base: Scores | None, limit_pct: float) -> dict:
    """One variant's rate over ``own``, and (``base`` given) its difference from the baseline over the pairs."""
    passed = sum(ok for ok, _ in own.values())
    n = len(own)
    out: dict[str, object] = {
        "answers": n,
        "passed": passed,
        "errors": sum(bool(a.error) for _, a in own.values()),
        "rate": passed / n if n else None,
        "rate_ci95": wilson_interval(passed, n),
    }
    if base is None:
        return out
    pairs = [(own[key][0], base[key][0]) for key in own if key in base]
    counts = {
        "both": sum(v and b for v, b in pairs),
        "variant_only": sum(v and not b for v, b in pairs),
        "baseline_only": sum(b and not v for v, b in pairs),
        "neither": sum(not (v or b) for v, b in pairs),
    }
    ci = paired_difference_interval(counts["both"], counts["variant_only"], counts["baseline_only"], counts["neither"])
    out.update(
        {
            "pairs": len(pairs),
            "pair_counts": counts,
            "baseline_rate": (counts["both"] + counts["baseline_only"]) / len(pairs) if pairs else None,
            "difference": (counts["variant_only"] - counts["baseline_only"]) / len(pairs) if pairs else None,
            "difference_ci95": ci,
            # The drop is -difference: its whole interval beyond the limit means its upper bound is below -limit.
            "beyond_limit": ci is not None and -100 * ci[1] > limit_pct,
        }
    )
    return out


def failing(items: list[QualityTask], references: list, scores: dict[str, Scores]) -> list[dict]:
    out = []
    for kind, scored in scores.items():
        for (index, seed), (ok, answer) in scored.items():
            if ok:
                continue
            item = items[index]
            expected = expectation(item.match, references[index])
            if item.reference == BASELINE_REFERENCE:
                expected = f"the baseline's greedy answer: {expected!r}"
            out.append(
                {
                    "item": item.id,
                    "kind": kind,
                    "seed": seed,
                    "prompt": clip(item.prompt, TEXT_MAX),
                    "expected": clip(expected, TEXT_MAX),
                    "got": clip(answer.text, TEXT_MAX),
                    "error": clip(answer.error, TEXT_MAX),
                }
            )
    return out


def greedy_of(doc: QualityFile, name: str | None) -> list[QualityAnswer]:
    """``name``'s greedy answers; none when it gave none (or is no variant)."""
    answers = doc.variants.get(name) if name is not None else None
    return answers.greedy if answers is not None else []


def _rate_text(kind: str, rate: dict) -> str:
    text = (
        f"{kind} {rate['passed']}/{rate['answers']} passed ({pct(rate['rate']) or NOT_MEASURED}, 95% CI "
        f"{pct_ci(rate['rate_ci95']) or 'no CI'})"
    )
    if rate.get("pairs"):
        text += (
            f", {points(rate['difference']) or NOT_MEASURED} points vs the baseline's "
            f"{pct(rate['baseline_rate']) or NOT_MEASURED} "
            f"(95% CI {points_ci(rate['difference_ci95']) or 'no CI'})"
        )
    return text


def quality_state(
    name: str, baseline: str | None, rates: dict[str, dict], compared: bool, limit_pct: float
) -> str | None:
    """Why ``name`` is not eligible; None when it is."""
    if name == baseline:
        return None
    if not compared:
        return "quality not compared: no answer of it could be paired with a scored answer of the baseline"
    for kind, rate in rates.items():
        if rate.get("beyond_limit"):
            low, high = rate["difference_ci95"]
            return (
                f"quality gate failed: {kind} pass rate {pct(rate['rate'])} vs the baseline's "
                f"{pct(rate['baseline_rate'])}, a drop of {-100 * rate['difference']:.1f} points (95% CI "
                f"{-100 * high:.1f} to {-100 * low:.1f}) entirely beyond max_drop_pct {limit_pct:g}"
            )
    return None


def variant_quality(
    name: str,
    baseline: str | None,
    doc: QualityFile,
    references: list,
    scores: dict[str, dict[str, Scores]],
    judged: bool = True,
) -> dict:
    limit = doc.max_drop_pct
    if name not in scores:
        return {
            "variant": name,
            "answered": False,
            "eligible": name == baseline,
            "reason": None if name == baseline else "quality not measured: its server gave no answers",
            "text": "quality not measured: no answers from its server",
        }
    items = doc.items
    own, base = scores[name], scores.get(baseline) if baseline is not None and name != baseline else None
    rates = {
        kind: pass_rate(own[kind], base[kind] if base else None, limit)
        for kind in ("greedy", "sampled")
        if own[kind] or kind == "greedy"
    }
    greedy_agreement = None
    if base is not None:
        base_greedy = greedy_of(doc, baseline)
        greedy_agreement = agreement([items[a.item].id for a in base_greedy], base_greedy, greedy_of(doc, name))
    reason = quality_state(name, baseline, rates, rates["greedy"].get("pairs", 0) > 0, limit) if judged else None
    failed = failing(items, references, own)
    parts = [_rate_text(kind, rate) for kind, rate in rates.items()]
    if greedy_agreement is not None:
        parts.append(
            f"greedy output identical to the baseline's on {greedy_agreement['identical']}/"
            f"{greedy_agreement['compared']} tasks"
        )
    verdict_text = "the baseline" if name == baseline else (f"NOT ELIGIBLE: {reason}" if reason else "eligible")
    if not judged:
        verdict_text = NOT_JUDGED.format(baseline=baseline)
    return {
        "variant": name,
        "answered": True,
        "agreement": greedy_agreement,
        **rates,
        "failing": failed[:FAILING_LISTED],
        "failing_total": len(failed),
        "eligible": reason is None,
        "reason": reason,
        "text": "; ".join(parts) + f": {verdict_text}",
    }


def references_of(doc: QualityFile, baseline: str | None) -> tuple[list, list[str]]:
    """Each task's reference (``@baseline``: the baseline's greedy answer), and the tasks left unscored because the
    baseline gave no such answer."""
    base_greedy = {a.item: a for a in greedy_of(doc, baseline)}
    references: list = []
    unscored = []
    for index, item in enumerate(doc.items):
        if item.reference != BASELINE_REFERENCE:
            references.append(item.reference)
            continue
        answer = base_greedy.get(index)
        known = answer is not None and not answer.error and answer.text is not None
        references.append(answer.text if answer is not None and known else None)
        if not known:
            unscored.append(item.id)
    return references, unscored


def quality_summary(doc: QualityFile | None, baseline: str | None, measured: list[str]) -> QualitySummary | None:
    """``doc``: ``quality.json``; ``measured``: the variants the ladder measured (a variant among them whose server
    gave no answers is not eligible). None when the run had no quality check."""
    if doc is None or not doc.items:
        return None
    references, unscored = references_of(doc, baseline)
    scores = {
        name: {
            "greedy": score(doc.items, references, answers.greedy, sampled=False),
            "sampled": score(doc.items, references, answers.sampled, sampled=True),
        }
        for name, answers in doc.variants.items()
    }
    names = [n for n in [baseline] if n is not None and (n in scores or n in measured)]
    names += [n for n in list(scores) + list(measured) if n not in names]
    # Without the baseline there is nothing to compare with (a one-variant run against --host): shown, not judged.
    judged = baseline in names
    variants = {name: variant_quality(name, baseline, doc, references, scores, judged) for name in dict.fromkeys(names)}
    limit = doc.max_drop_pct
    if not judged:
        text = f"quality gate {NOT_JUDGED.format(baseline=baseline)}; pass rates shown"
    else:
        verdicts = [
            f"{name} eligible" if v["eligible"] else f"{name} NOT ELIGIBLE"
            for name, v in variants.items()
            if name != baseline
        ]
        text = (
            f"quality gate (no pass-rate drop beyond {limit:g} points): " + "; ".join(verdicts)
            if verdicts
            else f"quality of the baseline only ({len(doc.items)} tasks): nothing to compare"
        )
    return QualitySummary.model_validate(
        {
            "tasks": doc.tasks,
            "items": len(doc.items),
            "seeds": doc.seeds,
            "temperature": doc.temperature,
            "max_drop_pct": limit,
            "method": METHOD,
            "unscored": unscored,
            "variants": variants,
            "judged": judged,
            "text": text,
        }
    )


def not_eligible(quality: QualitySummary | None) -> dict[str, str]:
    """The variants no recommendation may choose, with the reason: the one eligibility set of a summary."""
    if quality is None:
        return {}
    return {name: v.reason or "not eligible" for name, v in quality.variants.items() if not v.eligible}


def mark_not_eligible(comparisons: list[dict], blocked: dict[str, str]) -> None:
    """A comparison of a variant that is not eligible keeps its speed figures (shown, marked) but recommends
    nothing: its sentence says why, whatever the speed."""
    for comp in comparisons:
        reason = blocked.get(comp["variant"])
        if reason is not None:
            comp["recommendation"] = f"do not enable {comp['variant']}, whatever its speed: not eligible ({reason})"

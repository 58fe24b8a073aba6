"""What speculative decoding gains per content category (a workload's buckets, or a dataset's ``bucket`` labels),
per level: the paired speed-up of per-request decode tok/s and TPOT P50 with 95% intervals, acceptance, and the
category's share of the output tokens; beside them both sides' mean decode tok/s as the client measured it and as
the server's own per-request timings say it (llama.cpp ``predicted_per_second``: an independent check); a
recommendation per category, and whether any category's gain clearly differs from another's. Pure.

Request ``k`` of a worker in a step had the same prompt in every variant, so a category's requests pair up with the
baseline's exactly as the whole level's do (``samples.paired``): the split needs no run of its own. Aggregate
output tok/s has no per-category form in a mixed run (the categories share the server's time), so a category is
judged on its requests' decode tok/s. Acceptance comes from the responses (``acceptance.request_acceptance``:
llama.cpp's or vLLM's per-request draft counts, else tokens per chunk); a server's counters are not per category.
Two categories' gains clearly differ at a level when their 95% intervals do not overlap (a conservative test: two
independent intervals that just touch already differ at about the 0.6% level).
"""

from __future__ import annotations

import numpy as np

from ..fmt import ci_text, lvl, speedup
from .acceptance import request_acceptance
from .comparison import request_speedup
from .samples import LevelSamples
from .speedup import crossover_level, recommendation
from .stats import percentile_stat

__all__ = ["category_comparisons", "category_names"]


def category_names(samples: dict[str, dict[float, LevelSamples]]) -> list[str]:
    """The categories the clean requests carry, sorted; fewer than two means there is nothing to split."""
    names: set[str] = set()
    for by_level in samples.values():
        for level in by_level.values():
            if "bucket" in level.requests:
                names.update(level.requests["bucket"].dropna().astype(str))
    return sorted(names)


def _of(samples: LevelSamples, category: str) -> LevelSamples:
    return LevelSamples(requests=samples.requests[samples.requests["bucket"] == category].reset_index(drop=True))


def _mean(samples: LevelSamples, column: str) -> float | None:
    values = samples.values(column)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else None


def _share(samples: LevelSamples, category: str) -> float | None:
    tokens = samples.requests["output_tokens"]
    total = tokens.sum()
    return float(tokens[samples.requests["bucket"] == category].sum() / total) if total > 0 else None


def category_level(level: float, b: LevelSamples, v: LevelSamples, category: str, seed: int) -> dict:
    """One category at one level, from both sides' clean requests."""
    vc, bc = _of(v, category), _of(b, category)
    decode = request_speedup(vc, bc, "decode_tps", np.mean, True, seed)
    server = request_speedup(vc, bc, "server_decode_tps", np.mean, True, seed)
    return {
        "level": level,
        "category": category,
        "requests": int(len(vc.requests)),
        "pairs": decode.get("pairs", 0),
        "decode_tps_speedup": decode,
        "tpot_p50_speedup": request_speedup(vc, bc, "tpot_ms", percentile_stat(50), False, seed),
        "decode_tps": _mean(vc, "decode_tps"),
        "decode_tps_baseline": _mean(bc, "decode_tps"),
        "server_decode_tps": _mean(vc, "server_decode_tps"),
        "server_decode_tps_baseline": _mean(bc, "server_decode_tps"),
        "server_decode_tps_speedup": server if server.get("value") is not None else None,
        "acceptance": request_acceptance(vc) if len(vc.requests) else None,
        "output_share": _share(v, category),
        "output_share_baseline": _share(b, category),
    }


def _apart(a: dict, b: dict) -> bool:
    """``a``'s decode speed-up interval lies wholly above ``b``'s."""
    ci_a, ci_b = a["decode_tps_speedup"].get("ci95"), b["decode_tps_speedup"].get("ci95")
    return bool(ci_a and ci_b and ci_a[0] > ci_b[1])


def _ratio(entry: dict) -> str:
    ratio = entry["decode_tps_speedup"]
    ci = ci_text(ratio.get("ci95"), lambda x: speedup(x, ""))
    return f"{entry['category']} {speedup(ratio.get('value'))}" + (f" (CI {ci})" if ci else " (no CI)")


def differences(entries: list[dict], unit: str) -> tuple[list[dict], str]:
    """Per level, the category with the highest and the lowest decode speed-up and whether they clearly differ;
    and one sentence over all levels."""
    rows, apart = [], []
    for level in sorted({e["level"] for e in entries}):
        ranked = sorted(
            (e for e in entries if e["level"] == level and e["decode_tps_speedup"].get("value") is not None),
            key=lambda e: e["decode_tps_speedup"]["value"],
        )
        if len(ranked) < 2:
            continue
        low, high = ranked[0], ranked[-1]
        differ = _apart(high, low)
        rows.append({"level": level, "highest": high["category"], "lowest": low["category"], "differ": differ})
        if differ:
            apart.append(f"at {lvl(level)} {unit} {_ratio(high)} against {_ratio(low)}")
    if not rows:
        return rows, "too few categories measured on both sides to compare"
    if apart:
        return rows, "categories gain differently (95% intervals apart): " + "; ".join(apart)
    spread = "; ".join(
        f"at {lvl(r['level'])} {unit} {r['lowest']} to {r['highest']}" for r in rows
    )  # the extremes, whose intervals still overlap
    return rows, f"no category's gain clearly differs from another's: every pair of 95% intervals overlaps ({spread})"


def category_comparisons(
    comparisons: list[dict], samples: dict[str, dict[float, LevelSamples]], modes: dict[str, str]
) -> list[dict]:
    """Per variant compared with the baseline: every category at every level clean on both sides (or
    inconclusive: its requests are still clean), a recommendation per category, and the differences."""
    categories = category_names(samples)
    if len(categories) < 2:
        return []
    out = []
    for comp in comparisons:
        base, other = samples.get(comp["baseline"], {}), samples.get(comp["variant"], {})
        unit = "req/s" if modes.get(comp["variant"]) == "open" else "concurrent streams"
        levels = [s["level"] for s in comp["steps"] if s["status"] in ("clean", "inconclusive")]
        entries = [
            category_level(level, base[level], other[level], category, seed)
            for seed, level in enumerate(levels)
            for category in categories
            if level in base and level in other
        ]
        advice = {}
        for category in categories:
            steps = [
                {"level": e["level"], "speedup": e["decode_tps_speedup"]} for e in entries if e["category"] == category
            ]
            advice[category] = recommendation(
                f"{comp['variant']} for {category}", comp["baseline"], steps, crossover_level(steps), unit
            )
        rows, text = differences(entries, unit)
        out.append(
            {
                "baseline": comp["baseline"],
                "variant": comp["variant"],
                "basis": "paired mean decode tok/s per request (variant / baseline)",
                "categories": categories,
                "levels": entries,
                "recommendations": advice,
                "differences": rows,
                "text": text,
            }
        )
    return out

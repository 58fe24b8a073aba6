"""A sweep of one speculative setting (draft length k, or draft models) -> the best choice per level and the
schedule that follows from it: "concurrency <= 2: k = 6; 4-8: k = 2; >= 16: off". Pure.

The rule, per level: among the settings measured cleanly whose 95% speed-up interval lies wholly above 1
("clearly faster"), the one with the highest point speed-up (not the highest k); a clearly faster runner-up
whose interval reaches the chosen one's lower bound is named as within noise. "off" when no setting is clearly
faster (an inconclusive level never picks one); "not judged" when no setting was measured cleanly, which splits
the schedule; a setting that failed the quality gate is shown, never chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet

from ..fmt import lvl
from ..rundir.events import Event, SweepStopped
from .speedup import speedup_state

__all__ = ["NOT_ELIGIBLE", "OFF", "UNJUDGED", "choose", "schedule", "sweep_schedule", "sweep_stops", "vllm_schedule"]

OFF = "off"
UNJUDGED = "not judged"
NOT_ELIGIBLE = "not-eligible"  # the setting failed the quality gate: shown, never chosen
JUDGED = ("clean", "inconclusive")


def _clearly(candidate: dict, faster: bool) -> bool:
    """Clearly faster (slower) than the baseline: the level's own verdict where the comparison gave one (an open
    loop judges latency and goodput, not the speed-up shown), otherwise the speed-up's interval."""
    return speedup_state(candidate) == ("better" if faster else "worse")


def choose(candidates: list[dict]) -> dict:
    """One level: ``candidates`` are ``{"value": setting, "status", "speedup": Ratio}`` per setting. Returns the
    choice (a setting, ``OFF`` or ``UNJUDGED``), its speed-up, and whether every judged setting was clearly
    slower than the baseline (the sweep can stop there)."""
    judged = [c for c in candidates if c["status"] in JUDGED and c["speedup"].get("value") is not None]
    if candidates and all(c["status"] == NOT_ELIGIBLE for c in candidates):
        return {"choice": OFF, "speedup": None, "all_slower": False, "why": "every setting failed the quality gate"}
    if not judged:
        return {"choice": UNJUDGED, "speedup": None, "all_slower": False, "why": "no setting measured cleanly"}
    faster = [c for c in judged if c["status"] == "clean" and _clearly(c, True)]
    all_slower = len(judged) == len(candidates) and all(c["status"] == "clean" and _clearly(c, False) for c in judged)
    if not faster:
        why = (
            "every setting clearly slower than the baseline"
            if all_slower
            else "no setting clearly faster than the baseline"
        )
        return {"choice": OFF, "speedup": None, "all_slower": all_slower, "why": why}
    best = max(faster, key=lambda c: c["speedup"]["value"])
    # A runner-up whose interval overlaps the best one's is as good within the noise: say so, keep the best.
    lo = best["speedup"]["ci95"][0]
    ties = [c["value"] for c in faster if c is not best and c["speedup"]["ci95"][1] >= lo]
    why = f"highest speed-up among {len(faster)} clearly faster"
    if ties:
        why += f"; within noise of {', '.join(map(str, ties))}"
    return {"choice": best["value"], "speedup": best["speedup"], "all_slower": False, "why": why}


def schedule(levels: list[tuple[float, object]]) -> list[dict]:
    """Consecutive levels with the same choice merged into ranges ``{"low", "high", "choice"}`` (measured levels)."""
    ranges: list[dict] = []
    for level, choice in sorted(levels, key=lambda p: p[0]):
        if ranges and ranges[-1]["choice"] == choice:
            ranges[-1]["high"] = level
        else:
            ranges.append({"low": level, "high": level, "choice": choice})
    return ranges


def _label(choice: object, label: str) -> str:
    return str(choice) if choice in (OFF, UNJUDGED) else f"{label} = {choice}"


def schedule_text(ranges: list[dict], label: str) -> str:
    """ "concurrency <= 2: k = 6; 4-8: k = 2; >= 16: off" (the first range open below, the last open above)."""
    if not ranges:
        return ""
    if len(ranges) == 1:
        return (
            f"every level measured ({lvl(ranges[0]['low'])}-{lvl(ranges[0]['high'])}): "
            f"{_label(ranges[0]['choice'], label)}"
        )
    parts = []
    for i, r in enumerate(ranges):
        if i == 0:
            span = f"concurrency <= {lvl(r['high'])}"
        elif i == len(ranges) - 1:
            span = f">= {lvl(r['low'])}"
        else:
            span = lvl(r["low"]) if r["low"] == r["high"] else f"{lvl(r['low'])}-{lvl(r['high'])}"
        parts.append(f"{span}: {_label(r['choice'], label)}")
    return "; ".join(parts)


def vllm_schedule(ranges: list[dict]) -> dict | None:
    """The schedule as vLLM's Dynamic SD setting (``num_speculative_tokens_per_batch_size`` in
    ``--speculative-config``: ``[start_bs, end_bs, k]`` inclusive ranges, k = 0 off): batch sizes between two
    measured levels take the higher level's choice (the gain falls with load, so that is the cautious one).
    Levels not judged at the top are left out (the note says up to where it holds); None when a choice is not
    a draft length or a level inside the schedule was not judged."""
    judged = list(ranges)
    while judged and judged[-1]["choice"] == UNJUDGED:
        judged.pop()
    rows, previous = [], 0
    for r in judged:
        choice = 0 if r["choice"] == OFF else r["choice"]
        if not isinstance(choice, int) or isinstance(choice, bool) or not float(r["low"]).is_integer():
            return None
        start, end = previous + 1, int(r["high"])
        if end >= start:
            rows.append([start, end, choice])
        previous = end
    if not rows:
        return None
    return {
        "num_speculative_tokens": max(k for _, _, k in rows) or 1,
        "num_speculative_tokens_per_batch_size": rows,
        "note": (
            f"batch sizes above {rows[-1][1]} were not measured cleanly; extend the last range to your "
            "--max-num-seqs only after measuring there. Closed-loop concurrency is taken as the batch "
            "size (true while the server is not queueing). Dynamic SD is documented in vLLM 0.25.0 and "
            "later (tested with Eagle, Eagle-3 and DFlash); with --data-parallel-size > 1 vLLM ignores "
            "it and keeps num_speculative_tokens; full CUDA graphs need Model Runner V2."
        ),
    }


def sweep_stops(sweep: dict, events: list[Event]) -> list[dict]:
    """Where the sweep stopped climbing (the run's ``sweep_stopped`` events), in words: the level, the prompt
    length of a context-axis stop, and every setting's live speed-up there."""
    out = []
    for event in events:
        if not isinstance(event, SweepStopped) or event.sweep != sweep["name"]:
            continue
        speedups = list(event.speedups)
        pairs = (
            zip(sweep["values"], speedups, strict=False)
            if len(speedups) == len(sweep["values"])
            else ((None, v) for v in speedups)
        )
        each = ", ".join(
            (f"{_label(value, sweep['label'])}: " if value is not None else "")
            + (f"{v:.2f}x" if isinstance(v, (int, float)) else "n/m")
            for value, v in pairs
        )
        where = f"with {event.context}-token prompts, " if event.context else ""
        out.append(
            {
                "level": event.level,
                "context": event.context,
                "speedups": speedups,
                "text": f"{where}stopped after level {lvl(event.level)}: every setting was clearly "
                f"slower than the baseline there (95% interval of the live output tok/s ratio below 1; "
                f"{each}), so higher levels were not measured",
            }
        )
    return out


def sweep_schedule(
    sweep: dict,
    comparisons: list[dict],
    acceptance: dict[str, dict[float, dict | None]],
    blocked: AbstractSet[str] = frozenset(),
    events: Sequence[Event] = (),
) -> dict:
    """``sweep``: ``{"name", "setting", "label", "values": [...], "variants": [...]}`` (variants in value order);
    ``comparisons``: the summary's comparisons; ``acceptance``: per variant and level the server's pooled
    acceptance; ``blocked``: variants that failed the quality gate (shown as ``not-eligible``, never chosen). Per
    level every setting's speed-up and acceptance, the choice, the schedule as text, as ranges and (draft
    lengths) in vLLM's shape, and where the run stopped climbing (``events``: the run's events)."""
    by_variant = {c["variant"]: c for c in comparisons}
    levels: dict[float, list[dict]] = {}
    for value, variant in zip(sweep["values"], sweep["variants"], strict=False):
        comp = by_variant.get(variant) or {}
        # The comparison's headline: aggregate tok/s in a closed loop, E2E P95 from the intended send in an open
        # one (where the offered rate fixes tok/s), with the level's verdict deciding "clearly faster".
        metric = comp.get("metric") or "output_tps"
        for step in comp.get("steps", []):
            levels.setdefault(step["level"], []).append(
                {
                    "value": value,
                    "variant": variant,
                    "status": NOT_ELIGIBLE if variant in blocked else step["status"],
                    "speedup": step.get(f"{metric}_speedup") or step["output_tps_speedup"],
                    "state": step.get("verdict"),
                    "acceptance": acceptance.get(variant, {}).get(step["level"]),
                }
            )
    rows = []
    for level in sorted(levels):
        picked = choose(levels[level])
        rows.append({"level": level, **picked, "candidates": levels[level]})
    ranges = schedule([(r["level"], r["choice"]) for r in rows])
    return {
        "name": sweep["name"],
        "setting": sweep["setting"],
        "label": sweep["label"],
        "values": sweep["values"],
        "variants": sweep["variants"],
        "levels": rows,
        "ranges": ranges,
        "text": schedule_text(ranges, sweep["label"]),
        "vllm": vllm_schedule(ranges) if sweep["label"] == "k" else None,
        "stopped": sweep_stops(sweep, list(events)),
    }

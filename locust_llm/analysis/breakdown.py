"""Where the time of a request goes, per level and variant, and what the variant changed. Pure.

Two sources, by what the engine exports:

* per request (llama.cpp's ``timings``: ``prompt_ms``, ``predicted_ms``): medians of prefill, decode and
  ``outside`` (client E2E minus the server's two, i.e. waiting for a slot, network and client) over the
  level's clean requests; llama.cpp reports no queue time, so waiting for a slot is part of ``outside``;
* per step from the server's histograms (vLLM's queue/prefill/decode/e2e time; SGLang's queue, e2e, TTFT and
  the ``prefill_forward`` stage of its per-stage histogram): the mean of each phase over the window (sum delta /
  count delta), with ``outside`` the client's mean E2E minus the server's mean E2E. A phase the server does not
  export is estimated from its TTFT histogram and said so (SGLang's decode = E2E - TTFT; without the per-stage
  histogram, prefill = TTFT - queue).

Beside them, the tokens one target forward pass yields under speculation (1 + accepted per draft, the
server's mean acceptance length) against the speed-up measured: the gap is verification overhead and
scheduling loss.
"""

from __future__ import annotations

from .samples import LevelSamples
from .stats import finite, mean_of, percentile_of

__all__ = ["PHASES", "add_breakdowns", "estimate_phases", "level_acceptance", "level_breakdown", "phase_words"]

PHASES = ("queue_ms", "prefill_ms", "decode_ms", "outside_ms")
LLAMACPP_NOTE = "llama.cpp reports no queue time: waiting for a slot is counted in outside_ms"


def level_breakdown(samples: LevelSamples, steps: list[dict]) -> dict | None:
    """The phases of the level's clean requests (``samples``) or clean steps' server histograms (``steps``)."""
    prefill = finite(samples.values("server_prefill_ms"))
    if prefill.size:
        return {
            "source": "server per-request timings",
            "statistic": "median",
            "queue_ms": None,
            "prefill_ms": percentile_of(prefill, 50),
            "decode_ms": percentile_of(samples.values("server_decode_ms"), 50),
            "outside_ms": percentile_of(samples.values("outside_ms"), 50),
            "e2e_ms": percentile_of(samples.values("e2e_ms"), 50),
            "n": int(prefill.size),
            "note": LLAMACPP_NOTE,
        }
    latency = [(s.get("server") or {}).get("server_latency") or {} for s in steps if s.get("status") == "clean"]
    phases = {}
    for name in ("queue_ms", "prefill_ms", "decode_ms", "e2e_ms", "ttft_ms"):
        parts = [(h[name]["mean"], h[name]["n"]) for h in latency if h.get(name) and h[name].get("n")]
        total = sum(n for _, n in parts)
        phases[name] = sum(m * n for m, n in parts) / total if total else None
    if all(phases[p] is None for p in ("queue_ms", "prefill_ms", "decode_ms")):
        return None
    notes = estimate_phases(phases)
    client = finite(samples.values("e2e_ms"))
    client_mean = mean_of(client)
    server = phases["e2e_ms"]
    queue_ms, prefill_ms, decode_ms = phases["queue_ms"], phases["prefill_ms"], phases["decode_ms"]
    if server is None and queue_ms is not None and prefill_ms is not None and decode_ms is not None:
        server = queue_ms + prefill_ms + decode_ms
    outside = client_mean - server if client_mean is not None and server is not None else None
    if outside is None:
        notes.append("the server exports no E2E time: outside_ms unknown")
    return {
        "source": "server histograms",
        "statistic": "mean",
        "queue_ms": phases["queue_ms"],
        "prefill_ms": phases["prefill_ms"],
        "decode_ms": phases["decode_ms"],
        "outside_ms": outside,
        "e2e_ms": client_mean,
        "n": int(client.size),
        "note": "; ".join(notes) or None,
    }


def estimate_phases(phases: dict) -> list[str]:
    """Fill a phase the server does not export from its TTFT histogram (SGLang has no decode histogram, and
    older SGLang no per-stage prefill), in place; returns what was estimated, in words. Means over the window
    of histograms observed at different moments (first token, finish), so an estimate, not a measurement."""
    notes = []
    ttft, queue, e2e = phases["ttft_ms"], phases["queue_ms"], phases["e2e_ms"]
    if phases["prefill_ms"] is None and ttft is not None and queue is not None:
        phases["prefill_ms"] = ttft - queue
        notes.append("prefill_ms estimated as the server's mean TTFT minus its mean queue time")
    if phases["decode_ms"] is None and e2e is not None and ttft is not None:
        phases["decode_ms"] = e2e - ttft
        notes.append("decode_ms estimated as the server's mean E2E minus its mean TTFT")
    return notes


def _change(ratio: dict | None, name: str) -> tuple[str, int]:
    """ "TPOT -45%" (or "unchanged" when the interval holds 1) and the direction: -1 faster, 1 slower, 0 unclear.
    ``ratio`` is a speed-up (baseline / variant, > 1 favours the variant)."""
    if not ratio or ratio.get("value") is None:
        return f"{name} not measured", 0
    value, ci = ratio["value"], ratio.get("ci95")
    pct = 1.0 / value - 1.0
    if not ci or ci[0] is None or ci[0] <= 1 <= ci[1]:
        return f"{name} unchanged ({pct:+.0%}, within noise)", 0
    return f"{name} {pct:+.0%}", -1 if value > 1 else 1


def phase_words(step: dict, base: dict | None, variant: dict | None) -> str:
    """In words, which phase the variant changed and who gains, from the level's TPOT and TTFT speed-ups and
    the phase medians."""
    tpot_text, tpot = _change(step.get("tpot_p50_speedup"), "TPOT")
    ttft_text, ttft = _change(step.get("ttft_p50_speedup"), "TTFT")
    if tpot < 0 and ttft == 0:
        gist = "gains go to long outputs; long-input, short-output work gains little"
    elif tpot < 0 and ttft < 0:
        gist = "both the first token and decoding got faster: every workload gains"
    elif tpot < 0:
        gist = "decode gains but prefill costs more: long outputs gain, short outputs may lose"
    elif tpot > 0:
        gist = "decode got slower: verifying the drafts costs more than they save at this level"
    else:
        gist = "decode did not measurably change"
    words = f"{tpot_text}, {ttft_text}: {gist}"
    if base and variant:
        moved = []
        for phase in PHASES:
            b, v = base.get(phase), variant.get(phase)
            if b and v is not None and b > 0 and abs(v / b - 1) >= 0.1:
                moved.append(f"{phase.removesuffix('_ms')} {v / b - 1:+.0%}")
        if moved:
            words += f" (phases by {base['statistic']}: {', '.join(moved)})"
    return words


def level_acceptance(steps: list[dict]) -> dict | None:
    """The server's acceptance over a level's clean steps, pooled by drafts: rate (accepted / drafted), mean
    acceptance length (1 + accepted / drafts: the tokens one target forward pass yields) and per position."""
    accepted = drafted = drafts = 0.0
    positions: list[float] = []
    for s in steps:
        acc = (s.get("server") or {}).get("acceptance") or {}
        if s.get("status") != "clean" or not acc.get("drafts") or acc.get("accepted_tokens") is None:
            continue
        accepted += acc["accepted_tokens"]
        drafted += acc.get("draft_tokens") or 0.0
        drafts += acc["drafts"]
        for i, p in enumerate(acc.get("per_position") or []):
            if i == len(positions):
                positions.append(0.0)
            positions[i] += p * acc["drafts"]
    if not drafts:
        return None
    return {
        "rate": accepted / drafted if drafted else None,
        "mean_length": 1.0 + accepted / drafts,
        "per_position": [p / drafts for p in positions],
        "drafts": int(drafts),
    }


def tokens_per_pass(steps: list[dict]) -> float | None:
    """Tokens one target pass of a request yields over a level's clean steps, the passes without a draft included:
    generated / (generated - accepted), since each pass yields its accepted drafts plus one token of its own. The
    mean acceptance length, 1 + accepted / drafts, counts only the passes that drafted (vLLM's counters; an n-gram
    method drafts only where the text repeats), so it is the fallback only where no generated-token counter exists."""
    pooled = level_acceptance(steps)
    if pooled is None:
        return None
    accepted = total = 0.0
    for s in steps:  # the steps level_acceptance pooled
        acc = (s.get("server") or {}).get("acceptance") or {}
        if s.get("status") != "clean" or not acc.get("drafts") or acc.get("accepted_tokens") is None:
            continue
        if s["server"].get("generation_tokens") is None:
            return pooled["mean_length"]
        accepted += acc["accepted_tokens"]
        total += s["server"]["generation_tokens"]
    return total / (total - accepted) if total > accepted else pooled["mean_length"]


def add_breakdowns(
    comparisons: list[dict], variants: dict[str, dict], samples: dict[str, dict[float, LevelSamples]]
) -> None:
    """Fill each compared level with both sides' phases, the words, and tokens per forward pass."""
    for comp in comparisons:
        base_name, var_name = comp["baseline"], comp["variant"]
        for step in comp["steps"]:
            level = step["level"]
            sides = {}
            for side, name in (("baseline", base_name), ("variant", var_name)):
                steps = [s for s in variants[name]["steps"] if s["level"] == level and s.get("context") is None]
                level_samples = samples.get(name, {}).get(level)
                sides[side] = level_breakdown(level_samples, steps) if level_samples is not None else None
                if side == "variant":
                    step["tokens_per_pass"] = tokens_per_pass(steps)
            if step["status"] not in ("clean", "inconclusive"):
                continue
            step["breakdown"] = {**sides, "words": phase_words(step, sides["baseline"], sides["variant"])}
            speedup, per_pass = step["output_tps_speedup"].get("value"), step.get("tokens_per_pass")
            if speedup is not None and per_pass:
                # Each forward pass of the target yields per_pass tokens; the rest is what verification,
                # drafting and scheduling cost.
                step["pass_efficiency"] = speedup / per_pass
                step["pass_gap"] = (
                    f"{per_pass:.2f} tokens per target pass would allow {per_pass:.2f}x; "
                    f"measured {speedup:.2f}x: {1 - speedup / per_pass:.0%} lost to drafting, "
                    "verification and scheduling"
                    if speedup <= per_pass
                    else f"measured {speedup:.2f}x exceeds {per_pass:.2f} tokens per target pass"
                )

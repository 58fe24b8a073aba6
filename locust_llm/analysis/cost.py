"""Cost per million tokens, and how many servers an offered load needs, from the scenario's prices. Pure.

No price is built in: the scenario's ``cost:`` section (or ``--gpu-hour-usd``) gives it, and without one nothing
about cost is computed. One server of the measured configuration costs, per hour,

    hourly = gpu_hour_usd x gpus + other_hour_usd        (or cpu_hour_usd + other_hour_usd without a GPU price)

and at an aggregate output rate of ``tps`` tok/s a million output tokens cost

    usd_per_mtok = hourly / (tps x 3600) x 1e6.

The function falls as ``tps`` rises, so the interval of the cost is the throughput interval's bounds through the
same function, swapped. Effective tokens are the output tokens of requests that succeeded and met every
per-request SLO: the output rate x the share of the output tokens that such requests carried (a subset of the
output tokens, so never more), its interval the output rate's scaled by that share.

Like every other verdict, cost rests on clean steps only: per level the clean steps are pooled (their throughput
batches, ``analysis.cycles``, as saturation pools them); a level without one is listed with its status and no
figures. The cheapest level over all variants is named only when its cost interval lies wholly below the runner-up's;
otherwise the two are a tie, and the sentence says so.
A level may be recommended when it is clean, every SLO gate held at each judged step of it and its variant passed
the quality gate (``analysis.quality``: a failing variant is priced and shown, never chosen); the
recommendation is the one with the lowest cost per million effective tokens (a level where most requests miss the
per-request SLOs is cheap per output token and useless, and failures must not make a level look cheap). The capacity
answer ``ceil(target_rps / goodput per server)`` takes the eligible level with the most goodput per server and
assumes that servers scale linearly; a run with a scale-out measurement (``analysis.scale_out``) answers again with
the measured efficiency (``ceil(target / (goodput x efficiency))``, efficiency capped at 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..fmt import ci_text, is_number, lvl, num, text
from ..scenario import CostSpec, GatesSpec
from .cycles import batch_ratio
from .documents.cost import CostSummary
from .documents.scale_out import ScaleOutVariant
from .documents.summary import StepFigures, Summary
from .gates import SLO_GATES, slo_checks
from .quality import not_eligible
from .rates import series_mean_ci
from .samples import LevelSamples, not_judged
from .status import CLEAN

__all__ = ["LevelRates", "cost_summary", "level_cost", "servers_needed", "usd_per_mtok", "usd_per_mtok_ci"]

HOUR_S = 3600.0
MILLION = 1e6
ASSUMPTION = (
    "linear scaling: n servers, each run at the chosen level, serve n times one server's goodput (no "
    "shared bottleneck such as a load balancer, the network or a shared cache)"
)


@dataclass(frozen=True)
class LevelRates:
    """What a level's cost rests on: its clean steps pooled (figures None when no step was clean)."""

    level: float
    status: str
    excluded: list[str] = field(default_factory=list)
    output_tps: float | None = None
    output_tps_ci95: list[float] | None = None
    goodput_rps: float | None = None
    goodput_rps_ci95: list[float] | None = None
    tokens_per_request: float | None = None
    gate_failures: list[str] = field(default_factory=list)
    good_token_share: float | None = None  # output tokens of good requests / all output tokens


def usd_per_mtok(hourly_usd: float, tps: float | None) -> float | None:
    """USD per million tokens at ``tps`` tokens/s; None without a positive rate."""
    if not is_number(tps) or tps <= 0:
        return None
    return _usd(hourly_usd, tps)


def _usd(hourly_usd: float, tps: float) -> float:
    return hourly_usd / (tps * HOUR_S) * MILLION


def usd_per_mtok_ci(hourly_usd: float, tps_ci95: list[float] | None) -> list[float] | None:
    """The cost interval of a throughput interval: the high rate gives the low cost. None when the rate's low end
    is not above 0 (the cost is then unbounded)."""
    if not tps_ci95 or not is_number(tps_ci95[0]) or tps_ci95[0] <= 0:
        return None
    return [_usd(hourly_usd, tps_ci95[1]), _usd(hourly_usd, tps_ci95[0])]


def servers_needed(target_rps: float, goodput_rps: float | None) -> int | None:
    """ceil(target / goodput per server); None without a positive goodput."""
    if not is_number(goodput_rps) or goodput_rps <= 0:
        return None
    return _servers(target_rps, goodput_rps)


def _servers(target_rps: float, goodput_rps: float) -> int:
    # Rounded first: 1.1 / 0.1 is 11.000000000000002 in floating point, and 11 servers are enough.
    return math.ceil(round(target_rps / goodput_rps, 9))


def _scaled(ci: Sequence[float] | None, factor: float) -> list[float] | None:
    return [bound * factor for bound in ci] if ci else None


def level_rates(
    level: float, samples: LevelSamples, steps: list[StepFigures], gate_failures: list[str], variant: str
) -> LevelRates:
    """A level's clean steps pooled: output tok/s over their throughput batches and goodput over their per-second
    bins, with the intervals the rest of the analysis uses, the mean output tokens of a successful request sent in
    their windows and the share of output tokens that good requests carried."""
    worst, excluded = not_judged((variant, samples))
    if not samples.clean:  # every step of the level was left out: the most serious status
        assert worst is not None  # a level's samples hold its clean steps or say why each one was left out
        return LevelRates(level, worst, excluded, gate_failures=gate_failures)
    clean = [s for s in steps if s.status == CLEAN]
    completed = sum(s.requests - s.errors for s in clean)
    tokens = sum(s.output_tokens for s in clean)
    good = samples.good_rates
    throughput = batch_ratio(samples.throughput_batches)
    return LevelRates(
        level,
        CLEAN,
        excluded,
        throughput.value,
        throughput.ci95,
        float(good.mean()) if good.size else None,
        series_mean_ci(good),
        tokens / completed if completed else None,
        gate_failures,
        sum(s.good_output_tokens for s in clean) / tokens if tokens else None,
    )


def level_cost(rates: LevelRates, price: CostSpec) -> dict:
    """A level's cost figures (``LevelCost``) at ``price``."""
    hourly = price.hourly_usd
    gpus = price.priced_gpus
    effective = effective_ci = None
    if is_number(rates.output_tps) and is_number(rates.good_token_share):
        effective = rates.output_tps * rates.good_token_share
        effective_ci = _scaled(rates.output_tps_ci95, rates.good_token_share)
    effective_cost = usd_per_mtok(hourly, effective)
    return {
        "level": rates.level,
        "status": rates.status,
        "excluded": rates.excluded,
        "output_tps": rates.output_tps,
        "output_tps_ci95": rates.output_tps_ci95,
        "usd_per_mtok": usd_per_mtok(hourly, rates.output_tps),
        "usd_per_mtok_ci95": usd_per_mtok_ci(hourly, rates.output_tps_ci95),
        "tps_per_gpu": rates.output_tps / gpus if gpus and is_number(rates.output_tps) else None,
        "tps_per_gpu_ci95": _scaled(rates.output_tps_ci95, 1.0 / gpus) if gpus else None,
        "goodput_rps": rates.goodput_rps,
        "goodput_rps_ci95": rates.goodput_rps_ci95,
        "tokens_per_request": rates.tokens_per_request,
        "effective_tps": effective,
        "effective_tps_ci95": effective_ci,
        "usd_per_effective_mtok": effective_cost,
        "usd_per_effective_mtok_ci95": usd_per_mtok_ci(hourly, effective_ci),
        "gate_failures": rates.gate_failures,
        "eligible": rates.status == CLEAN and not rates.gate_failures and effective_cost is not None,
    }


def measured_servers(
    target_rps: float, goodput_rps: float, goodput_ci: list[float] | None, scaling: ScaleOutVariant
) -> dict:
    """The capacity answer again with the scale-out's measured efficiency instead of 1: ceil(target / (goodput x
    efficiency)), efficiency capped at 1 (a measurement above linear is noise, never fewer servers than linear).
    The interval takes both bounds together (the high goodput with the high efficiency)."""
    eff_ci = scaling.efficiency_ci95
    assert scaling.efficiency is not None  # capacity() asks only with a measured efficiency
    capped = min(scaling.efficiency, 1.0)
    servers = servers_needed(target_rps, goodput_rps * capped)
    servers_ci = (
        [
            servers_needed(target_rps, goodput_ci[1] * min(eff_ci[1], 1.0)),
            servers_needed(target_rps, goodput_ci[0] * min(eff_ci[0], 1.0)),
        ]
        if goodput_ci and eff_ci and is_number(goodput_ci[0]) and goodput_ci[0] > 0 and eff_ci[0] > 0
        else None
    )
    return {
        "measured_efficiency": scaling.efficiency,
        "measured_efficiency_ci95": eff_ci,
        "servers_measured": servers,
        "servers_measured_ci95": servers_ci,
        "scaling_text": f"measured with {scaling.servers} servers at {lvl(scaling.server_level)} each: efficiency "
        f"{num(scaling.efficiency)} (95% CI {ci_text(eff_ci) or 'none'}, {scaling.scaling}), so "
        f"{servers} server(s) (95% CI {ci_text(servers_ci, str) or 'unbounded'})",
    }


def capacity(
    target_rps: float,
    variant: str,
    levels: list[dict],
    gpus: int | None,
    unit: str,
    scaling: ScaleOutVariant | None = None,
) -> dict:
    """How many servers ``target_rps`` needs: from the eligible level with the most goodput per server, assuming
    linear scaling, and (with a judged scale-out of the variant) again with the measured efficiency."""
    candidates = [row for row in levels if row["eligible"] and is_number(row["goodput_rps"]) and row["goodput_rps"] > 0]
    if not candidates:
        return {
            "target_rps": target_rps,
            "text": f"{num(target_rps)} req/s: no level of {variant} was measured "
            "cleanly with good requests and every gate holding",
        }
    best = max(candidates, key=lambda row: row["goodput_rps"])
    ci = best["goodput_rps_ci95"]
    servers = _servers(target_rps, best["goodput_rps"])  # a candidate's goodput is above 0
    servers_ci = (
        # A goodput interval is symmetric about a finite mean: its high end is finite when its low end is.
        [_servers(target_rps, ci[1]), _servers(target_rps, ci[0])] if ci and is_number(ci[0]) and ci[0] > 0 else None
    )
    gpu_text = f", {servers * gpus} GPUs" if gpus else ""
    measured = (
        measured_servers(target_rps, best["goodput_rps"], ci, scaling)
        if scaling is not None and scaling.efficiency is not None
        else {}
    )
    return {
        **measured,
        "target_rps": target_rps,
        "level": best["level"],
        "goodput_rps": best["goodput_rps"],
        "goodput_rps_ci95": ci,
        "servers": servers,
        "servers_ci95": servers_ci,
        "gpus": servers * gpus if gpus else None,
        "gpus_ci95": _scaled(servers_ci, gpus) if gpus else None,
        "text": f"{num(target_rps)} req/s at the SLO needs {servers} server(s){gpu_text} "
        f"(95% CI {ci_text(servers_ci, str) or 'unbounded'}) of {variant} at {lvl(best['level'])} {unit}, "
        f"{num(best['goodput_rps'])} good req/s each, assuming linear scaling"
        + (f"; {measured['scaling_text']}" if measured else ""),
    }


def _cost_text(row: dict) -> str:
    ci = ci_text(row["usd_per_effective_mtok_ci95"])
    return (
        f"{num(row['usd_per_effective_mtok'])} USD per million effective tokens"
        + (f" (95% CI {ci})" if ci else " (no CI)")
        + f", {num(row['usd_per_mtok'])} per million output tokens"
    )


def variant_cost(
    variant: str, rates: list[LevelRates], price: CostSpec, unit: str, scaling: ScaleOutVariant | None = None
) -> dict:
    """Every level's cost, the cheapest eligible level and (with a target) the capacity answer."""
    levels = [level_cost(r, price) for r in sorted(rates, key=lambda r: r.level)]
    eligible = [row for row in levels if row["eligible"]]
    best = min(eligible, key=lambda row: row["usd_per_effective_mtok"]) if eligible else None
    return {
        "variant": variant,
        "levels": levels,
        "best_level": best["level"] if best else None,
        "text": f"{variant} at {lvl(best['level'])} {unit}: {_cost_text(best)}"
        if best
        else f"{variant}: no level was measured cleanly with every gate (SLO, quality) holding",
        "capacity": capacity(price.target_rps, variant, levels, price.priced_gpus, unit, scaling)
        if price.target_rps
        else None,
    }


def _clears(cheapest: dict, runner_up: dict) -> bool:
    """The cheapest's cost interval lies wholly below the runner-up's (without both intervals: no)."""
    mine, theirs = cheapest["usd_per_effective_mtok_ci95"], runner_up["usd_per_effective_mtok_ci95"]
    return bool(mine and theirs and mine[1] < theirs[0])


def _price(spec: CostSpec) -> dict:
    if spec.priced_gpus:
        return {
            "basis": "gpu",
            "hourly_usd": spec.hourly_usd,
            "gpus": spec.gpus,
            "text": f"{spec.gpus} x {num(spec.gpu_hour_usd)} USD/h per GPU + {num(spec.other_hour_usd)} USD/h "
            f"other = {num(spec.hourly_usd)} USD/h per server",
        }
    return {
        "basis": "cpu",
        "hourly_usd": spec.hourly_usd,
        "text": f"CPU host {num(spec.cpu_hour_usd)} USD/h + {num(spec.other_hour_usd)} USD/h other = "
        f"{num(spec.hourly_usd)} USD/h per server",
    }


def _limits(named: dict, keys) -> str:
    return ", ".join(f"{key} <= {named[key]:g}" for key in keys if named.get(key) is not None)


def cost_summary(
    summary: Summary, samples: dict[str, dict[float, LevelSamples]], spec: CostSpec, gates: GatesSpec
) -> CostSummary:
    """Cost per variant and level of the ladder (context-axis steps are not priced), the cheapest eligible
    level over all variants, and the capacity answer when ``spec.target_rps`` is given."""
    failures: dict[tuple[str, float | None], list[str]] = {}
    for check in slo_checks(summary, gates):
        if check.context is None and not check.ok:
            failures.setdefault((check.variant, check.level), []).append(
                f"{check.gate} {text(check.value)} > {check.limit:g}"
            )
    blocked = not_eligible(summary.quality)  # a variant that failed the quality gate is priced, never chosen
    variants = []
    for name, entry in summary.variants.items():
        ladder = [s for s in entry.steps if s.context is None]
        if name not in samples or not ladder:
            continue
        unit = "req/s" if ladder[0].mode == "open" else "concurrent streams"
        quality = [f"not eligible: {blocked[name]}"] if name in blocked else []
        rates = [
            level_rates(
                level,
                level_samples,
                [s for s in ladder if s.level == level],
                failures.get((name, level), []) + quality,
                name,
            )
            for level, level_samples in samples[name].items()
        ]
        scaling = (
            next((v for v in summary.scale_out.variants if v.variant == name), None)
            if summary.scale_out is not None
            else None
        )
        variants.append(variant_cost(name, rates, spec, unit, scaling))
    best = sorted(
        ((v, row) for v in variants for row in v["levels"] if row["level"] == v["best_level"]),
        key=lambda pair: pair[1]["usd_per_effective_mtok"],
    )
    if best:
        cheapest = best[0]
        sentence = f"cheapest: {cheapest[0]['text']}" + (
            f"; {cheapest[0]['capacity']['text']}" if cheapest[0]["capacity"] else ""
        )
        if len(best) > 1 and not _clears(cheapest[1], best[1][1]):
            runner_up = best[1]
            sentence = (
                f"tie between {cheapest[0]['variant']} at {lvl(cheapest[1]['level'])} and {runner_up[0]['variant']} "
                f"at {lvl(runner_up[1]['level'])}: their cost intervals overlap ({cheapest[0]['text']}; "
                f"{runner_up[0]['text']})"
            )
    else:
        sentence = (
            "no level of any variant was measured cleanly with every gate (SLO, quality) holding: no cost to recommend"
        )
    gate_limits = _limits(gates.model_dump(), SLO_GATES)
    slo = _limits(summary.slo, ("ttft_ms", "tpot_ms", "e2e_ms"))
    return CostSummary.model_validate(
        {
            "price": _price(spec),
            "rule": "A level may be chosen when a step of it is clean (its clean steps pooled), every SLO gate held "
            "at each judged step of it (" + (gate_limits or "no SLO gate set") + ") and its variant passed the "
            "quality gate (when the scenario has one)",
            "effective": "Effective tokens: output tokens of requests that succeeded and met every per-request SLO ("
            + (slo or "none set: every successful request counts")
            + "), computed as the output rate x the share of output tokens that good requests carried; the "
            "interval is the output rate's scaled by that share",
            "assumption": ASSUMPTION
            + (
                "; the scale-out measured below replaces it where it was judged"
                if summary.scale_out is not None
                else ""
            ),
            "variants": variants,
            "text": sentence,
        }
    )

"""Locust's start form as the experiment's form: the scenarios it may run, the fields' values for a scenario
(its own, with the command line's overrides for the command line's scenario), and a submitted form checked
exactly as the command line is (same messages) before anything starts.
"""

from __future__ import annotations

import os
from argparse import Namespace
from collections.abc import Mapping
from pathlib import Path

from .. import places
from ..fmt import lvl
from ..rundir.lock import lock_holder
from ..scenario import ScenarioError, load_scenario
from .options import OPTIONS, parse_value
from .plan import DEFAULT_SCENARIO, check_baseline, check_dataset, chosen_variants, load_plan, plan_blocks, run_dir_free

__all__ = [
    "CHOICES",
    "PROJECT_SCENARIOS",
    "allowed_scenarios",
    "check_form",
    "check_web_scenario",
    "form_values",
    "options_for",
    "with_baseline",
]

PROJECT_SCENARIOS = places.SCENARIOS
# Fields the form offers as a list (the command line takes any text and says what is wrong with it).
CHOICES = {"mode": ["closed", "open"], "order": ["sequential", "interleaved"], "api": ["completions", "chat"]}


def allowed_scenarios(cli_scenario: str) -> list[str]:
    """The command line's scenario first, then the project's own (``scenarios/*.yaml``)."""
    first = cli_scenario or DEFAULT_SCENARIO
    out, seen = [first], {Path(first).resolve()}
    for path in sorted(PROJECT_SCENARIOS.glob("*.yaml")):
        if path.resolve() not in seen:
            seen.add(path.resolve())
            out.append(places.shown(path))
    return out


def check_web_scenario(chosen: str, cli_scenario: str) -> None:
    """Anyone who can reach the web UI can fill its form: it runs the command line's scenario or one of the
    project's own, never an arbitrary file."""
    allowed = {Path(p).resolve() for p in allowed_scenarios(cli_scenario)}
    if Path(chosen or DEFAULT_SCENARIO).resolve() not in allowed:
        raise ScenarioError(
            f"the web form runs the scenario given on the command line or one under "
            f"{PROJECT_SCENARIOS}/; {chosen!r} is neither"
        )


def options_for(scenario: str, current: Namespace, cli_scenario: str) -> Namespace:
    """The options a scenario is shown with: the current ones for the command line's scenario, else the
    scenario's own values (every form field back to "the scenario's")."""
    if Path(scenario).resolve() == Path(cli_scenario or DEFAULT_SCENARIO).resolve():
        return Namespace(**{**vars(current), "scenario": scenario})
    return Namespace(**{**vars(current), **{o.dest: o.default for o in OPTIONS if o.web}, "scenario": scenario})


def form_values(options: Namespace, host: str | None) -> dict:
    """What the form shows for ``options``: each field's value, the variants to tick, and the plan's size."""
    plan = load_plan(options, host)
    load, gates = plan.load, plan.gates
    fields = {
        "scenario": options.scenario,
        "variant": ",".join(plan.variants),
        "mode": load.mode,
        "ladder": ",".join(lvl(x) for x in load.ladder),
        "step_duration": load.step_duration_s,
        "warmup": load.warmup_s,
        "repeats": load.repeats,
        "order": "interleaved" if load.interleaved else "sequential",
        "min_requests": load.min_requests,
        "prompt_tokens": load.prompt_tokens,
        "max_tokens": load.max_tokens,
        "api": load.api,
        "model": plan.model,
        "run_id": options.run_id,
        "overwrite": options.overwrite,
        "slo_ttft_p99_ms": gates.ttft_p99_ms or 0.0,
        "slo_tpot_p99_ms": gates.tpot_p99_ms or 0.0,
        "slo_error_rate": -1.0 if gates.error_rate is None else gates.error_rate,
        "max_regression_pct": -1.0 if gates.max_regression_pct is None else gates.max_regression_pct,
        "baseline_run": gates.baseline_run or "",
        "gpu_hour_usd": (plan.scenario.cost.gpu_hour_usd if plan.scenario.cost else None) or 0.0,
        "scale_out": plan.scale_out.servers if plan.scale_out else 0,
    }
    available = chosen_variants(plan.scenario, "", plan.one_server)
    return {
        "fields": fields,
        "variants": available,
        "baseline": available[0],
        "engine": plan.engine,
        "external_url": plan.external_url,
        "description": plan.scenario.description,
        "steps_per_variant": len(plan_blocks(load)),
        "contexts": len(load.context_tokens),
        "context_levels": len(load.context_levels) if load.context_levels else None,
    }


def submitted_options(current: Namespace, form: Mapping[str, str]) -> Namespace:
    """The current options with the form's values, converted the way Locust converts them."""
    values = vars(current).copy()
    for option in OPTIONS:
        if option.web and option.dest in form:
            values[option.dest] = parse_value(option, form[option.dest])
    return Namespace(**values)


def with_baseline(options: Namespace, host: str | None) -> str:
    """``--variant`` as the web form runs it: the baseline always, as the page's checkboxes show it. A form
    posted without the page's script (or edited) gets it here, so no web run leaves out what the others are
    compared with. One server (``--host`` or an external scenario) runs the one variant named."""
    chosen = [name.strip() for name in str(options.variant or "").split(",") if name.strip()]
    if not chosen:
        return ""  # every variant, the baseline first
    if any("=" in name for name in chosen):
        return ",".join(chosen)  # each variant with its running server, the first the baseline
    scenario = load_scenario(options.scenario or DEFAULT_SCENARIO)
    if host or scenario.server.engine == "external" or scenario.baseline_variant in chosen:
        return ",".join(chosen)
    return ",".join([scenario.baseline_variant, *chosen])


def check_form(current: Namespace, form: Mapping[str, str], host: str | None, cli_scenario: str) -> str | None:
    """Why the submitted form cannot start (the command line's message for the same value), or None."""
    try:
        options = submitted_options(current, form)
        check_web_scenario(options.scenario, cli_scenario)
        host = (form.get("host", host)) or None
        options.variant = with_baseline(options, host)
        plan = load_plan(options, host)
        check_dataset(plan)
        check_baseline(plan)
        run_dir_free(plan, options.overwrite)
        holder = lock_holder(plan.report_dir / plan.run_id)
        if holder is not None and holder.get("pid") != os.getpid():  # this process's last run ends before the next
            return f"run directory {plan.report_dir / plan.run_id} is being written by process {holder.get('pid')}"
    except (ValueError, ScenarioError) as exc:
        return str(exc)
    return None

"""The scale-out's part of the report: per variant the slope of goodput from one server to N with its interval and
verdict, every step of it with how the requests were spread over the servers, and the lines the console and
``summary.md`` print. Presents ``summary.scale_out`` only."""

from __future__ import annotations

from ..analysis.documents.summary import Summary
from ..fmt import ci_text, lvl, num, pct
from .view import RunView

__all__ = ["scale_out_lines", "scale_out_section"]

VERDICT_CLASS = {"linear": "ok", "sub-linear": "warn", "no gain": "bad", "not judged": "nm"}


def servers_text(view: RunView, variant: str, servers: int) -> str:
    """Which servers the N-server steps used: launched replicas (their log files) or the external URLs."""
    replicas = view.server_of(variant).replicas or []
    if not replicas:
        return f"{servers} servers (the further ones never came up)"
    if replicas[0].launched:
        return (
            f"{len(replicas) + 1} {view.engine() or ''} servers of the same command on one host, each on its own "
            f"port (logs: {', '.join(str(r.log or '').rsplit('/', 1)[-1] for r in replicas)} beside the "
            "first)"
        )
    first = view.server_of(variant).url
    return f"{len(replicas) + 1} external servers: {', '.join([str(first)] + [str(r.url) for r in replicas])}"


def scale_out_section(view: RunView) -> dict | None:
    doc = view.summary.scale_out
    if doc is None:
        return None
    variants = []
    for entry in doc.variants:
        steps = [
            {
                "step": s.step,
                "pair": s.pair,
                "servers": s.servers,
                "level": lvl(s.level),
                "status": s.status,
                "why": "; ".join(s.status_reasons),
                "requests": s.requests,
                "errors": s.errors,
                "goodput": num(s.goodput_rps),
                "goodput_ci": ci_text(s.goodput_rps_ci95),
                "output": num(s.output_tps),
                "output_ci": ci_text(s.output_tps_ci95),
                "ttft": f"{num(s.ttft_p50_ms) or 'n/m'} / {num(s.ttft_p99_ms) or 'n/m'}",
                "cached": pct(s.cached_fraction),
                "tpot": num(s.tpot_p50_ms),
                "spread": ", ".join(f"server {p.server + 1}: {p.requests} ({pct(p.share)})" for p in s.per_server),
            }
            for s in entry.steps
        ]
        variants.append(
            {
                "variant": entry.variant,
                "text": entry.text,
                "scaling": entry.scaling,
                "cls": VERDICT_CLASS.get(entry.scaling, "nm"),
                "steps": steps,
                "one": num(entry.one_goodput_rps),
                "one_ci": ci_text(entry.one_goodput_rps_ci95),
                "many": num(entry.many_goodput_rps),
                "many_ci": ci_text(entry.many_goodput_rps_ci95),
                "slope": num(entry.slope),
                "slope_ci": ci_text(entry.slope_ci95),
                "efficiency": num(entry.efficiency),
                "efficiency_ci": ci_text(entry.efficiency_ci95),
                "tokens": num(entry.tokens_slope),
                "tokens_ci": ci_text(entry.tokens_slope_ci95),
                "pairs": entry.pairs,
                "excluded": entry.excluded,
                "servers": servers_text(view, entry.variant, entry.servers),
                "conditions": f"{view.conditions_line(entry.variant)}; {lvl(entry.server_level)} "
                f"{entry.unit} per server",
            }
        )
    gate = f"scale_out.min_efficiency {doc.min_efficiency:g}" if doc.min_efficiency is not None else None
    return {
        "servers": doc.servers,
        "level": lvl(doc.level),
        "pairs": doc.pairs,
        "method": doc.method,
        "variants": variants,
        "text": doc.text,
        "gate": gate,
    }


def scale_out_lines(summary: Summary) -> list[str]:
    """For the console and ``summary.md``: each variant's answer in one line."""
    doc = summary.scale_out
    return [f"scale-out: {entry.text}" for entry in doc.variants] if doc is not None else []

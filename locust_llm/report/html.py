"""``report.html``: the sections and charts of a ``RunView`` through the Jinja2 template.

Safety: Jinja2 autoescapes everything. The only markup that is not escaped is the SVG that :mod:`.charts`
draws (a :class:`markupsafe.Markup`, whose text labels are escaped there); no template uses ``|safe``. A
Content-Security-Policy meta tag forbids scripts and every network fetch as a second line.

Robustness: every figure may be missing (None); each section is built on its own, and a section that still
fails renders as a visible note instead of losing the whole report.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import jinja2

from ..fmt import md
from . import experiments, sections, tables, traffic
from .figures import ladder_charts, timeline_charts
from .headline import headline
from .probes import probes_section
from .prompt_cache import cache_section
from .quality import quality
from .scale_out import scale_out_section
from .side_by_side import side_by_side
from .soak import soak_section
from .splits import categories_section, positions_section, reasoning_section
from .texts import DEFINITIONS, RULES
from .view import RunView

log = logging.getLogger(__name__)

__all__ = ["build_context", "render_html", "render_verdict", "verdict_css"]


@functools.cache
def environment(autoescape: bool = True) -> jinja2.Environment:
    """The report's Jinja2 environment: package templates, autoescape on for every HTML template. ``summary.md.j2``
    is rendered without it (HTML escapes are not Markdown's): its untrusted text goes through the ``md`` filter."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("locust_llm.report", "templates"),
        autoescape=autoescape,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["md"] = md
    return env


def build_context(view: RunView) -> dict:
    failures: list[str] = []

    def guard(name: str, build: Callable[[], object]):
        try:
            return build()
        except Exception as exc:  # one odd figure must not cost the whole report
            log.exception("report: section %s failed", name)
            failures.append(f"{name}: {type(exc).__name__}: {exc}")
            return None

    return {
        "meta": guard("meta", lambda: sections.meta(view))
        or {
            "run_id": view.run_id,
            "title": "locust-llm report",
            "subtitle": "",
            "conditions": "",
            "unit": "",
            "level_name": "level",
            "mode": view.mode,
        },
        "headline": guard("verdict", lambda: headline(view)),
        "gates": guard("gates", lambda: sections.gates(view)),
        "soak": guard("soak", lambda: soak_section(view)),
        "probes": guard("probes", lambda: probes_section(view)),
        "scaleout": guard("scale-out", lambda: scale_out_section(view)),
        "regression": guard("regression", lambda: sections.regression(view)),
        "conditions": guard("conditions", lambda: sections.conditions(view)),
        "variants": guard("variants", lambda: tables.variant_tables(view)),
        "speedups": guard("speed-ups", lambda: tables.speedups(view)),
        "side_by_side": guard("variants side by side", lambda: side_by_side(view)),
        "cache": guard("prompt cache", lambda: cache_section(view)),
        "charts": guard("charts", lambda: ladder_charts(view, guard)) or {},
        "sweeps": guard("sweeps", lambda: experiments.sweeps(view)),
        "breakdowns": guard("time breakdown", lambda: experiments.breakdowns(view)),
        "contexts": guard("context length", lambda: experiments.contexts(view)),
        "context_charts": guard("context charts", lambda: experiments.context_charts(view)) or {},
        "categories": guard("categories", lambda: categories_section(view)),
        "reasoning": guard("reasoning", lambda: reasoning_section(view)),
        "positions": guard("positions", lambda: positions_section(view)),
        "cost": guard("cost", lambda: experiments.cost(view)),
        "images": guard("images", lambda: experiments.images(view)),
        "conversations": guard("conversations", lambda: traffic.conversations_section(view)),
        "trace": guard("trace", lambda: traffic.trace_section(view)),
        "consistency": guard("consistency", lambda: sections.consistency(view)),
        "quality": guard("quality", lambda: quality(view)),
        "validity": guard("client validity", lambda: sections.validity(view)),
        "events": guard("run events", lambda: sections.run_events(view)),
        "timeline": guard("telemetry", lambda: timeline_charts(view)),
        "definitions": DEFINITIONS,
        "rules": RULES,
        "failures": failures,
    }


def render_html(view: RunView) -> str:
    return environment().get_template("report.html.j2").render(**build_context(view))


def render_verdict(view: RunView) -> str:
    """The report's verdict cards and warnings alone (the web UI shows them where the run was started)."""
    return environment().get_template("verdict.html.j2").render(headline=headline(view))


def verdict_css() -> str:
    return environment().get_template("verdict.css").render()

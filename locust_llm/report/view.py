"""``RunView``: the report's one input (typed summary, env, verdict, run comparison, timeline) plus what every
section asks of it (variant order, colours, anchors, units, the conditions line). Built once per report.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from ..analysis.documents.regression import RunComparison
from ..analysis.documents.summary import StepFigures, Summary, Verdict
from ..analysis.timeline import Timeline
from ..fmt import is_number, lvl
from ..rundir.env import ClientEnv, HostEnv, RecordedLoad, RecordedServer, RunEnv, ServerEnv, WorkloadEnv
from .charts import variant_colors

__all__ = ["ReportInput", "RunView", "command_text", "flags_text", "level_name", "unit_of"]


@dataclass
class ReportInput:
    """Everything a report is made of; the pipeline computes it, the report only presents it."""

    summary: Summary
    env: RunEnv
    timeline: Timeline
    verdict: Verdict | None = None
    regression: RunComparison | None = None
    run_name: str = ""  # the run directory's name, for a run that recorded no id


def unit_of(mode: str, plural: bool = True) -> str:
    if mode == "open":
        return "req/s"
    return "concurrent streams" if plural else "concurrent stream"


def level_name(mode: str) -> str:
    return "offered req/s" if mode == "open" else "users (concurrent streams)"


def short_version(version) -> str | None:
    if not version:
        return None
    first = str(version).strip().splitlines()[0]
    return first.removeprefix("version:").strip() or None


def flags_text(spec) -> str:
    if not spec:
        return "none (no speculative decoding)"
    if isinstance(spec, dict):
        return ", ".join(f"{k}={v}" for k, v in spec.items() if v is not None) or "none"
    return str(spec)


def command_text(command) -> str | None:
    if not command:
        return None
    if isinstance(command, (list, tuple)):
        return shlex.join(str(c) for c in command)
    return str(command)


def _slug(text: str, index: int) -> str:
    return f"v{index}-" + (re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")[:40] or "x")


class RunView:
    def __init__(self, inp: ReportInput):
        self.inp = inp
        self.summary = inp.summary
        self.env = inp.env
        self.scenario = self.env.recorded_scenario
        self.load = self.env.recorded_load if self.env.load else (self.scenario.load or RecordedLoad())
        self.variants = self.summary.variants
        self.baseline = self.summary.baseline or self.env.baseline
        self.comparisons = self.summary.comparisons
        self.servers = {k: v for k, v in self.env.servers.items() if v is not None}
        # env.json's sections, empty (every field null) where a run lacks them
        self.host = self.env.host or HostEnv()
        self.client = self.env.client or ClientEnv()
        self.workload = self.env.workload or WorkloadEnv()
        self.options = self.env.options
        self.server_spec = self.scenario.server or RecordedServer()
        first_mode = next((s.mode for v in self.variants.values() for s in v.steps), "closed")
        self.mode = self.load.mode or first_mode
        self.names = self.variant_order(self.summary, self.env)
        self.colors = variant_colors(self.names, self.baseline)
        self.ids = {name: _slug(name, i) for i, name in enumerate(self.names)}
        self.run_id = self.summary.run_id or self.env.run_id or inp.run_name

    @staticmethod
    def variant_order(summary: Summary, env: RunEnv) -> list[str]:
        """The baseline first, then the variants in run order (planned ones that never ran included)."""
        names = list(summary.variants)
        for name in env.variants:
            if name not in names:
                names.append(name)
        baseline = summary.baseline or env.baseline
        if baseline in names:
            names.remove(baseline)
            names.insert(0, baseline)
        return names

    def color(self, name: str | None) -> str:
        return self.colors.get(name, "#333") if name is not None else "#333"

    def levels(self) -> list[float]:
        found = {s.level for v in self.variants.values() for s in v.steps if is_number(s.level)}
        if not found:
            found = {x for x in self.load.ladder or [] if is_number(x)}
        return sorted(found)

    def steps_of(self, name: str) -> list[StepFigures]:
        entry = self.variants.get(name)
        return (
            sorted((s for s in entry.steps if s.context is None), key=lambda s: (s.level, s.step))
            if entry is not None
            else []
        )

    def server_of(self, name: str) -> ServerEnv:
        return self.env.server(name)

    def speculative_of(self, name: str):
        spec = self.server_of(name).speculative
        if spec is None:
            planned = (self.scenario.variants or {}).get(name)
            spec = planned.speculative if planned else None
        return spec

    def model_name(self) -> str | None:
        for server in self.servers.values():
            if server.served_model or server.model:
                return server.served_model or server.model
        return self.server_spec.served_model_name or self.server_spec.model

    def engine(self) -> str | None:
        for server in self.servers.values():
            if server.engine:
                version = short_version(server.version)
                return server.engine + (f" {version}" if version else "")
        if self.env.external_url:
            return "external server"
        return self.server_spec.engine

    def host_text(self) -> str:
        host = self.host
        parts = []
        if host.cpu_count:
            parts.append(f"{host.cpu_count} CPUs")
        gpu = str(host.gpu or "not recorded")
        parts.append("GPU " + (re.sub(r"\s*\(.*\)$", "", gpu) or gpu))
        return f"{host.hostname or 'unknown host'} ({', '.join(parts)})"

    def lengths_text(self) -> str:
        load = self.load
        trace, conversation = load.trace, load.conversation
        if trace:
            text = f"{trace.format} trace {trace.path}"
        elif load.dataset:
            text = f"dataset {load.dataset}"
        elif load.buckets:
            text = "buckets " + ", ".join(map(str, load.buckets))
        else:
            prompt, output = ("?" if n is None else n for n in (load.prompt_tokens, load.max_tokens))
            text = f"{prompt}\u2192{output} tokens"
        if conversation:
            text += f", {conversation.turns}-turn conversations ({conversation.think_s or 0:g} s think time)"
        if self.workload.exact is False:
            text += " (prompt lengths approximate)"
        return text

    def conditions_line(self, variant: str | None = None) -> str:
        """One line of the conditions every figure was measured under (printed under each table/chart)."""
        load = self.load
        parts = []
        if variant is not None:
            spec = self.speculative_of(variant)
            parts.append(f"{variant}: {flags_text(spec) if spec else 'no speculative decoding'}")
        parts.append(f"model {self.model_name() or 'not recorded'}")
        engine = self.engine()
        parts.append(re.sub(r"\s*\(.*$", "", engine) if engine else "engine not recorded")
        parts.append(f"{self.mode} loop, {load.api or 'completions'} {self.lengths_text()}")
        warmup_s = load.warmup_s or 0
        if load.trace:
            parts.append(f"each level replays the trace window, its first {warmup_s:g} s warm-up")
        elif is_number(load.step_duration_s):
            parts.append(
                f"{self.windows_text(variant, load.step_duration_s)} steady + {warmup_s:g} s warm-up per level"
            )
        parts.append(f"host {self.host_text()}")
        parts.append(f"run {self.run_id}")
        return " \u00b7 ".join(parts)

    def windows_text(self, variant: str | None, planned_s: float) -> str:
        """The steady windows as measured (extensions and cut steps included), to the tenth of a second: one length,
        or the range; the planned length when no window was measured."""
        names = [variant] if variant is not None else self.names
        lengths = sorted({round(s.window_s, 1) for n in names for s in self.steps_of(n) if is_number(s.window_s)})
        if not lengths:
            return f"{planned_s:g} s"
        return f"{lengths[0]:g} s" if len(lengths) == 1 else f"{lengths[0]:g}-{lengths[-1]:g} s"

    def where(self, name: str, step: StepFigures) -> str:
        return f"{name} @ {lvl(step.level)}"

"""``report.html`` from a run directory: one self-contained file for a capacity planner.

Reads the run directory only (``summary.json``, ``env.json``, ``steps.json``, ``consistency.json``,
``telemetry.parquet`` / ``telemetry.json``, ``client.parquet``, the error columns of ``requests.parquet``) and
never imports Locust, so it runs at the end of a test, from ``locust-llm report`` and on old runs alike.

Safety: Jinja2 autoescapes everything. The only markup that is not escaped is the SVG that
:mod:`.charts` draws (a :class:`markupsafe.Markup`, whose text labels are escaped there); no template uses
``|safe``. A Content-Security-Policy meta tag forbids scripts and every network fetch as a second line.

Robustness: every figure may be missing (None), every file may be absent; each section is built on its own,
and a section that still fails renders as a visible note instead of losing the whole report.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path

import jinja2
import numpy as np
import pandas as pd

from . import charts
from .fmt import num, ok
from .charts import PALETTE, HLine, Series, Span, VLine

log = logging.getLogger(__name__)

REPORT_FILE = "report.html"
PERCENTILES = ("p50", "p95", "p99")
DASH = {"p50": "", "p95": "6 3", "p99": "2 3"}
TEXT_MAX = 240
MESSAGE_MAX = 400
LOG_TAIL_MAX = 3000

# The nightly exit codes (analysis.gates), in words.
EXIT_MEANINGS = {0: "all gates hold", 2: "bad input", 3: "an SLO gate failed", 4: "regression beyond the threshold",
                 5: "invalid run", 6: "a server failed"}

_env: jinja2.Environment | None = None


def environment() -> jinja2.Environment:
    """The report's Jinja2 environment: package templates, autoescape on for every template."""
    global _env
    if _env is None:
        _env = jinja2.Environment(loader=jinja2.PackageLoader("locust_llm.report", "templates"), autoescape=True,
                                  undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                                  keep_trailing_newline=True)
    return _env


# -- reading the run directory ------------------------------------------------------------------
def _json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError) as exc:
        log.warning("report: cannot read %s: %s", path, exc)
        return {}
    return value if isinstance(value, dict) else {}


def _parquet(path: Path, columns: list[str] | None = None) -> pd.DataFrame:
    if not path.exists():
        return pd.DataFrame()
    try:
        if columns is not None:
            import pyarrow.parquet as pq

            present = set(pq.read_schema(path).names)
            columns = [c for c in columns if c in present]
        return pd.read_parquet(path, columns=columns)
    except Exception as exc:  # noqa: BLE001  (a damaged file must not cost the report)
        log.warning("report: cannot read %s: %s", path, exc)
        return pd.DataFrame()


def load_summary(run_dir: Path) -> dict:
    """``summary.json``; computed from the run directory first when it is absent."""
    path = run_dir / "summary.json"
    if not path.exists() and (run_dir / "steps.json").exists():
        from ..analysis.summary import write_summary

        write_summary(run_dir)
    return _json(path)


# -- formatting ---------------------------------------------------------------------------------
def pct(v, digits: int = 1) -> str | None:
    return f"{100 * v:.{digits}f}%" if ok(v) else None


def times(v) -> str | None:
    return f"{v:.2f}\u00d7" if ok(v) else None


def lvl(v) -> str:
    return f"{float(v):g}" if ok(v) else str(v)


def ci_text(ci, fmt: Callable = num) -> str | None:
    if not ci or len(ci) != 2 or not ok(ci[0]) or not ok(ci[1]):
        return None
    return f"{fmt(ci[0])}\u2013{fmt(ci[1])}"


def clip(text, limit: int) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[:limit] + f"\u2026 (+{len(text) - limit} chars)"


def slug(text: str, index: int) -> str:
    return f"v{index}-" + (re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")[:40] or "x")


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


# -- the view model -----------------------------------------------------------------------------
class Report:
    """Everything the template needs, computed from the run directory and its summary."""

    def __init__(self, run_dir: Path, summary: dict, env: dict | None = None, steps_doc: dict | None = None):
        self.run_dir = Path(run_dir)
        self.summary = summary or {}
        self.env = env if env is not None else _json(self.run_dir / "env.json")
        steps_doc = steps_doc if steps_doc is not None else _json(self.run_dir / "steps.json")
        self.step_windows = [s for s in steps_doc.get("steps", []) if isinstance(s, dict)]
        events = self.summary.get("events")
        self.events = events if isinstance(events, list) else steps_doc.get("events", []) or []
        self.variants: dict = self.summary.get("variants") or {}
        self.baseline = self.summary.get("baseline") or self.env.get("baseline")
        self.comparisons: list = [c for c in self.summary.get("comparisons") or [] if isinstance(c, dict)]
        self.scenario = self.env.get("scenario") or {}
        self.load = self.env.get("load") or self.scenario.get("load") or {}
        self.mode = self.load.get("mode") or next(
            (s.get("mode") for v in self.variants.values() for s in v.get("steps", []) if s.get("mode")), "closed")
        self.servers = self.env.get("servers") or {}
        names = self._ordered_variants()
        others = [n for n in names if n != self.baseline]
        self.colors = {name: PALETTE[1 + i % (len(PALETTE) - 1)] for i, name in enumerate(others)}
        if self.baseline in names:
            self.colors[self.baseline] = PALETTE[0]
        self.ids = {name: slug(name, i) for i, name in enumerate(names)}
        self.t0 = self._run_start()
        self.failures: list[str] = []

    # helpers ---------------------------------------------------------------------------------
    def _ordered_variants(self) -> list[str]:
        names = list(self.variants)
        for s in self.step_windows:
            if s.get("variant") not in names:
                names.append(s.get("variant"))
        if self.baseline in names:
            names.remove(self.baseline)
            names.insert(0, self.baseline)
        return [n for n in names if n is not None]

    def _run_start(self) -> float | None:
        starts = [s.get("t_start") for s in self.step_windows if ok(s.get("t_start"))]
        return min(starts) if starts else None

    def levels(self) -> list[float]:
        found = {float(s["level"]) for v in self.variants.values() for s in v.get("steps", []) if ok(s.get("level"))}
        if not found:
            found = {float(x) for x in self.load.get("ladder") or [] if ok(x)}
        return sorted(found)

    def steps_of(self, name: str) -> list[dict]:
        entry = self.variants.get(name) or {}
        return sorted((s for s in entry.get("steps", []) if isinstance(s, dict)),
                      key=lambda s: (float(s["level"]) if ok(s.get("level")) else math.inf))

    def server_of(self, name: str) -> dict:
        server = self.servers.get(name)
        return server if isinstance(server, dict) else {}

    def model_name(self) -> str | None:
        for server in self.servers.values():
            if isinstance(server, dict) and (server.get("served_model") or server.get("model")):
                return server.get("served_model") or server.get("model")
        srv = self.scenario.get("server") or {}
        return srv.get("served_model_name") or srv.get("model")

    def engine(self) -> str | None:
        for server in self.servers.values():
            if isinstance(server, dict) and server.get("engine"):
                version = short_version(server.get("version"))
                return server["engine"] + (f" {version}" if version else "")
        return (self.scenario.get("server") or {}).get("engine")

    def host_text(self) -> str:
        host = self.env.get("host") or {}
        parts = []
        if host.get("cpu_count"):
            parts.append(f"{host['cpu_count']} CPUs")
        gpu = str(host.get("gpu") or "not recorded")
        parts.append("GPU " + (re.sub(r"\s*\(.*\)$", "", gpu) or gpu))
        return f"{host.get('hostname') or 'unknown host'} ({', '.join(parts)})"

    def conditions_line(self, variant: str | None = None) -> str:
        """One line of the conditions every figure was measured under (printed under each table/chart)."""
        load = self.load
        parts = []
        if variant is not None:
            spec = self.server_of(variant).get("speculative")
            if spec is None:
                spec = ((self.scenario.get("variants") or {}).get(variant) or {}).get("speculative")
            parts.append(f"{variant}: {flags_text(spec) if spec else 'no speculative decoding'}")
        parts.append(f"model {self.model_name() or 'not recorded'}")
        engine = self.engine()
        parts.append(re.sub(r"\s*\(.*$", "", engine) if engine else "engine not recorded")
        lengths = f"{load.get('prompt_tokens', '?')}\u2192{load.get('max_tokens', '?')} tokens"
        if load.get("buckets"):
            lengths = "buckets " + ", ".join(map(str, load["buckets"]))
        if load.get("dataset"):
            lengths = f"dataset {load['dataset']}"
        parts.append(f"{self.mode} loop, {load.get('api', 'completions')} {lengths}")
        if ok(load.get("step_duration_s")):
            parts.append(f"{load['step_duration_s']:g} s steady + {load.get('warmup_s', 0) or 0:g} s warm-up per level")
        parts.append(f"host {self.host_text()}")
        parts.append(f"run {self.summary.get('run_id') or self.env.get('run_id') or self.run_dir.name}")
        return " \u00b7 ".join(parts)

    # sections --------------------------------------------------------------------------------
    def section(self, name: str, build: Callable[[], object]):
        try:
            return build()
        except Exception as exc:  # one odd figure must not cost the whole report
            log.exception("report: section %s failed", name)
            self.failures.append(f"{name}: {type(exc).__name__}: {exc}")
            return None

    def meta(self) -> dict:
        run_id = self.summary.get("run_id") or self.env.get("run_id") or self.run_dir.name
        names = self._ordered_variants()
        start = None
        if ok(self.t0):
            start = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.t0))
        return {"run_id": run_id, "title": f"locust-llm report \u2014 {run_id}",
                "subtitle": " vs ".join(names) if names else "no variants recorded",
                "model": self.model_name(), "engine": self.engine(), "started": start,
                "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                "summary_generated": self.summary.get("generated_at"), "records": self.summary.get("records"),
                "scenario": self.scenario.get("name"), "mode": self.mode, "unit": unit_of(self.mode),
                "level_name": level_name(self.mode), "conditions": self.conditions_line()}

    def flagged_steps(self) -> dict:
        invalid, unsteady, failed = [], [], []
        for name in self._ordered_variants():
            for s in self.steps_of(name):
                where = f"{name} @ {lvl(s.get('level'))}"
                if s.get("client_valid") is False:
                    invalid.append(where)
                if s.get("steady") is False:
                    unsteady.append(where)
                if not s.get("requests") or (s.get("errors") and s.get("errors") == s.get("requests")):
                    failed.append(where)
        return {"invalid": invalid, "unsteady": unsteady, "failed": failed}

    def verdict(self) -> dict:
        items = []
        consistency = self.summary.get("consistency") or {}
        for comp in self.comparisons:
            variant = comp.get("variant")
            steps = sorted((s for s in comp.get("steps") or [] if ok(s.get("level"))), key=lambda s: s["level"])
            low = steps[0] if steps else {}
            speed = low.get("output_tps_speedup") or {}
            ci = speed.get("ci95")
            state = "unclear"
            if ci and ok(ci[0]) and ok(ci[1]):
                state = "better" if ci[0] > 1 else "worse" if ci[1] < 1 else "unclear"
            top = steps[-1]["level"] if steps else None
            crossover = comp.get("crossover_level")
            if ok(crossover):
                crossover_text = (f"crossover at {lvl(crossover)} {unit_of(self.mode, crossover != 1)}: from there "
                                  f"{variant} is "
                                  f"slower than {comp.get('baseline')} (speed-up CI entirely below 1)")
            elif steps:
                crossover_text = (f"no crossover up to {lvl(top)} {unit_of(self.mode)}: at no tested level is "
                                  f"{variant} clearly slower")
            else:
                crossover_text = "no crossover: no level was measured for both variants"
            cons = consistency.get(variant) or {}
            items.append({
                "variant": variant, "baseline": comp.get("baseline"), "state": state,
                "speedup": times(speed.get("value")), "ci": ci_text(ci, times),
                "level": lvl(low.get("level")) if low else None,
                "unit": unit_of(self.mode, plural=not (ok(low.get("level")) and low.get("level") == 1)),
                "crossover": crossover_text, "recommendation": comp.get("recommendation") or "no recommendation",
                "agreement": pct(cons.get("agreement"), 0) if cons else None,
                "identical": cons.get("identical"), "compared": cons.get("compared"),
                "defect": bool(cons.get("defect")), "color": self.colors.get(variant, PALETTE[1]),
                "anchor": self.ids.get(variant),
            })
        flags = self.flagged_steps()
        warnings = []
        if flags["invalid"]:
            warnings.append(f"{len(flags['invalid'])} step(s) where the load generator may have been the bottleneck "
                            f"(client-invalid): {', '.join(flags['invalid'])}")
        if flags["unsteady"]:
            warnings.append(f"{len(flags['unsteady'])} step(s) not steady within the window: "
                            f"{', '.join(flags['unsteady'])}")
        if flags["failed"]:
            warnings.append(f"{len(flags['failed'])} step(s) with no successful request: {', '.join(flags['failed'])}")
        if self.events:
            kinds = sorted({str(e.get("kind")) for e in self.events if isinstance(e, dict)})
            warnings.append(f"{len(self.events)} run event(s): {', '.join(kinds)}")
        errored = [f"{n} @ {lvl(s.get('level'))} ({pct(s.get('error_rate'))})" for n in self._ordered_variants()
                   for s in self.steps_of(n) if ok(s.get("error_rate")) and s["error_rate"] > 0]
        if errored:
            warnings.append("failed requests (counted against every figure): " + ", ".join(errored))
        for item in items:
            if item["defect"]:
                warnings.insert(0, f"consistency defect: {item['variant']}'s greedy output differs from "
                                   f"{item['baseline']}'s; lossless speculative decoding must not change it")
        note = None
        if not items:
            note = ("single variant: no baseline-vs-variant comparison was measured" if len(self.variants) <= 1
                    else "no comparison in summary.json (is the baseline variant present?)")
        return {"items": items, "warnings": warnings, "note": note}

    def gates(self) -> dict | None:
        """The nightly verdict (``verdict.json``) when the run wrote one: exit code, reasons, failed SLO checks."""
        doc = _json(self.run_dir / "verdict.json")
        if not doc or "exit_code" not in doc:
            return None
        code = doc.get("exit_code")
        reasons = [f"[{k}] {r}" for k, items in (doc.get("reasons") or {}).items() if isinstance(items, list)
                   for r in items]
        checks = [c for c in doc.get("checks") or [] if isinstance(c, dict)]
        failed = [{"gate": c.get("gate"), "variant": c.get("variant"), "level": lvl(c.get("level")),
                   "value": num(c.get("value")), "limit": num(c.get("limit"))} for c in checks if not c.get("ok")]
        return {"code": code, "meaning": EXIT_MEANINGS.get(code, "see the README"), "ok": code == 0,
                "reasons": reasons, "failed": failed, "checked": len(checks)}

    def regression(self) -> dict | None:
        """The comparison with an earlier run (``compare.json``), written by ``compare`` or a nightly baseline."""
        doc = _json(self.run_dir / "compare.json")
        if not doc or "rows" not in doc:
            return None
        flagged = {(r.get("variant"), r.get("level"), r.get("metric")) for r in doc.get("regressions") or []}
        rows = [{"variant": r.get("variant"), "level": lvl(r.get("level")), "metric": r.get("metric"),
                 "ratio": times(r.get("ratio")), "ci": ci_text(r.get("ci95")), "change": r.get("change"),
                 "regression": (r.get("variant"), r.get("level"), r.get("metric")) in flagged}
                for r in doc["rows"] if isinstance(r, dict)]
        return {"old": doc.get("old"), "new": doc.get("new"), "threshold": num(doc.get("max_regression_pct")),
                "rows": rows, "regressions": len(flagged)}

    def conditions(self) -> dict:
        load, host, srv = self.load, self.env.get("host") or {}, self.scenario.get("server") or {}
        ladder = load.get("ladder")
        run_rows = [
            ("run id", self.summary.get("run_id") or self.env.get("run_id")),
            ("scenario", (self.scenario.get("name") or "") + (f" ({self.env['scenario_file']})"
                                                               if self.env.get("scenario_file") else "")),
            ("started", self.meta()["started"]),
            ("variants (in order)", ", ".join(self._ordered_variants()) or None),
            ("baseline", self.baseline),
            ("requests recorded", self.summary.get("records")),
            ("seed", self.env.get("seed", load.get("seed"))),
        ]
        load_rows = [
            ("mode", f"{self.mode} loop" + (f", {load.get('arrival')} arrivals (burstiness {load.get('burstiness')})"
                                            if self.mode == "open" else "")),
            ("ladder", (", ".join(lvl(x) for x in ladder) + f" {unit_of(self.mode)}") if ladder else None),
            ("step duration (steady window)", f"{load['step_duration_s']:g} s" if ok(load.get("step_duration_s"))
             else None),
            ("warm-up per step (excluded)", f"{load['warmup_s']:g} s" if ok(load.get("warmup_s")) else None),
            ("API", load.get("api")),
            ("prompt length", f"{load['prompt_tokens']} tokens" if load.get("prompt_tokens") else None),
            ("output length (max_tokens)", f"{load['max_tokens']} tokens" if load.get("max_tokens") else None),
            ("ignore EOS", load.get("ignore_eos")),
            ("temperature", load.get("temperature")),
            ("length buckets", json.dumps(load["buckets"]) if load.get("buckets") else None),
            ("dataset", load.get("dataset")),
            ("unique prefix", load.get("unique_prefix")),
            ("max in flight (open loop)", load.get("max_inflight") if self.mode == "open" else None),
            ("think time", f"{load['think_time_s']:g} s" if ok(load.get("think_time_s")) and load["think_time_s"]
             else None),
            ("timeouts", ", ".join(f"{k} {v:g} s" for k, v in (load.get("timeouts") or {}).items() if ok(v)) or None),
            ("SLOs (goodput)", ", ".join(f"{k} \u2264 {v:g}" for k, v in (self.summary.get("slo") or {}).items()
                                         if ok(v)) or "none set (goodput = successful requests/s)"),
        ]
        host_rows = [
            ("server host", host.get("hostname")), ("platform", host.get("platform")),
            ("CPU", " ".join(str(x) for x in (host.get("processor"), host.get("machine")) if x) or None),
            ("CPU cores", host.get("cpu_count")),
            ("memory", f"{host['memory_total_gib']:g} GiB" if ok(host.get("memory_total_gib")) else None),
            ("GPU", host.get("gpu")), ("GPU driver", host.get("gpu_driver") or host.get("driver")),
            ("CUDA", host.get("cuda")),
        ]
        client = self.env.get("client") or {}
        packages = client.get("packages") or {}
        client_rows = [
            ("client host", client.get("hostname") or host.get("hostname")),
            ("Python", host.get("python") or client.get("python")),
            ("load processes", (self.env.get("options") or {}).get("processes") or 1),
        ] + [(name, version) for name, version in packages.items()]
        servers = []
        for name in self._ordered_variants():
            server = self.server_of(name)
            spec = server.get("speculative")
            if spec is None:
                spec = ((self.scenario.get("variants") or {}).get(name) or {}).get("speculative")
            servers.append({
                "variant": name, "color": self.colors.get(name), "baseline": name == self.baseline,
                "engine": server.get("engine") or srv.get("engine"),
                "version": str(server.get("version")).strip() if server.get("version") else None,
                "model": server.get("model") or srv.get("model"),
                "served_model": server.get("served_model") or srv.get("served_model_name"),
                "speculative": flags_text(spec), "command": command_text(server.get("command")),
                "url": server.get("url"), "launched": server.get("launched"),
                "notes": json.dumps(server["notes"]) if server.get("notes") else None,
            })
        clean = lambda rows: [(k, v if v not in ("", None) else None) for k, v in rows]
        optional = {"length buckets", "dataset", "max in flight (open loop)", "think time", "GPU driver", "CUDA"}
        load_rows = [(k, v) for k, v in load_rows if v not in ("", None) or k not in optional]
        host_rows = [(k, v) for k, v in host_rows if v not in ("", None) or k not in optional]
        return {"groups": [("Run", clean(run_rows)), ("Load", clean(load_rows)), ("Server host", clean(host_rows)),
                           ("Load generator and tool versions", clean(client_rows))],
                "servers": servers}

    def variant_tables(self) -> list[dict]:
        out = []
        speed_by = {c.get("variant"): {float(s["level"]): s for s in c.get("steps") or [] if ok(s.get("level"))}
                    for c in self.comparisons}
        open_loop = self.mode == "open"
        latency_metrics = [("ttft_ms", "TTFT")]
        if open_loop:
            latency_metrics.append(("ttft_sched_ms", "TTFT_sched"))
        latency_metrics += [("tpot_ms", "TPOT"), ("itl_ms", "ITL"), ("e2e_ms", "E2E")]
        if open_loop:
            latency_metrics.append(("e2e_sched_ms", "E2E_sched"))
        for name in self._ordered_variants():
            entry = self.variants.get(name) or {}
            sat, knee = entry.get("saturation_level"), entry.get("knee_level")
            rows = []
            for s in self.steps_of(name):
                level = s.get("level")
                marks = []
                if ok(sat) and ok(level) and float(level) == float(sat):
                    marks.append(("saturation", "mark-sat", "throughput stops growing beyond this level"))
                if ok(knee) and ok(level) and float(level) == float(knee):
                    marks.append(("knee", "mark-knee", "latency grows faster than load beyond this level"))
                if s.get("steady") is False:
                    marks.append(("unsteady", "mark-warn", "metric drifted within the steady window"))
                if s.get("client_valid") is False:
                    reasons = "; ".join((s.get("client_validity") or {}).get("reasons") or [])
                    marks.append(("client-invalid", "mark-bad", reasons or "client was a bottleneck"))
                if not s.get("requests"):
                    marks.append(("no requests", "mark-bad", "no request was sent in the steady window"))
                elif s.get("errors") and s.get("errors") == s.get("requests"):
                    marks.append(("all failed", "mark-bad", "every request of this step failed"))
                lat = {}
                for key, _label in latency_metrics:
                    fig = s.get(key) or {}
                    lat[key] = [num(fig.get(p)) for p in PERCENTILES]
                acc = s.get("acceptance") or {}
                server_acc = acc.get("server") or ((s.get("server") or {}).get("acceptance")) or {}
                client_acc = acc.get("client") or s.get("acceptance_client") or {}
                tpc = acc.get("tokens_per_chunk") or s.get("tokens_per_chunk") or {}
                missing = {m.get("figure"): m.get("reason") for m in (s.get("server") or {}).get("missing") or []
                           if isinstance(m, dict)}
                speed = (speed_by.get(name) or {}).get(float(level)) if ok(level) else None
                out_speed = (speed or {}).get("output_tps_speedup") or {}
                decode = s.get("decode_tps") or {}
                rows.append({
                    "level": lvl(level), "marks": marks, "requests": s.get("requests"),
                    "errors": s.get("errors"), "error_rate": pct(s.get("error_rate")),
                    "errors_by_class": ", ".join(f"{k}: {v}" for k, v in (s.get("errors_by_class") or {}).items()),
                    "lat": lat,
                    "decode_p50": num(decode.get("p50")), "decode_mean": num(decode.get("mean")),
                    "output_tps": num(s.get("output_tps")), "output_tps_ci": ci_text(s.get("output_tps_ci95")),
                    "request_rate": num(s.get("request_rate")), "goodput": num(s.get("goodput_rps")),
                    "achieved": num(s.get("achieved_rate")) if open_loop else None,
                    "acc_server": pct(server_acc.get("rate")),
                    "acc_server_why": missing.get("acceptance.rate") or ("no telemetry" if not s.get("server")
                                                                         else "not measured"),
                    "acc_len": num(server_acc.get("mean_length")),
                    "acc_client": pct(client_acc.get("rate")),
                    "tokens_per_chunk": num(tpc.get("value")),
                    "speedup": times(out_speed.get("value")), "speedup_ci": ci_text(out_speed.get("ci95"), times),
                    "tokens": s.get("output_tokens"),
                    "sources": ", ".join(f"{k} ({v})" for k, v in (s.get("token_sources") or {}).items()),
                })
            trend = entry.get("memory_trend") or {}
            trend_text = None
            if trend and ok(trend.get("slope")):
                trend_text = (f"{trend.get('metric')}: {trend.get('start_mib', 0):.0f} \u2192 "
                              f"{trend.get('end_mib', 0):.0f} MiB (peak {trend.get('peak_mib', 0):.0f}), slope "
                              f"{num(trend['slope'])} MiB/min (95% CI {ci_text(trend.get('ci95'))})"
                              + (" \u2014 growing" if trend.get("growing") else ""))
            rules = entry.get("rules") or {}
            out.append({
                "name": name, "anchor": self.ids.get(name), "color": self.colors.get(name),
                "baseline": name == self.baseline, "rows": rows, "latency_metrics": latency_metrics,
                "saturation": lvl(sat) if ok(sat) else None, "knee": lvl(knee) if ok(knee) else None,
                "knee_by_metric": ", ".join(f"{k}: {lvl(v)}" for k, v in (entry.get("knee_by_metric") or {}).items()
                                            if ok(v)),
                "rules": rules, "memory_trend": trend_text,
                "telemetry_missing": (entry.get("telemetry") or {}).get("missing"),
                "conditions": self.conditions_line(name), "has_speedup": name in speed_by,
                "open_loop": open_loop,
            })
        return out

    def speedups(self) -> list[dict]:
        metrics = [("output_tps_speedup", "aggregate output tok/s"), ("decode_tps_speedup", "decode tok/s (mean)"),
                   ("tpot_p50_speedup", "TPOT P50"), ("tpot_p95_speedup", "TPOT P95"),
                   ("ttft_p95_speedup", "TTFT P95")]
        out = []
        for comp in self.comparisons:
            rows = []
            for s in sorted((s for s in comp.get("steps") or [] if ok(s.get("level"))), key=lambda s: s["level"]):
                cells = []
                for key, _label in metrics:
                    fig = s.get(key) or {}
                    ci = fig.get("ci95")
                    state = "unclear"
                    if ci and ok(ci[0]) and ok(ci[1]):
                        state = "better" if ci[0] > 1 else "worse" if ci[1] < 1 else "unclear"
                    cells.append({"value": times(fig.get("value")), "ci": ci_text(ci, times), "state": state})
                rows.append({"level": lvl(s["level"]), "cells": cells,
                             "crossover": ok(comp.get("crossover_level")) and s["level"] == comp["crossover_level"]})
            out.append({"variant": comp.get("variant"), "baseline": comp.get("baseline"), "rows": rows,
                        "metrics": [m[1] for m in metrics], "recommendation": comp.get("recommendation"),
                        "crossover": lvl(comp["crossover_level"]) if ok(comp.get("crossover_level")) else None,
                        "conditions": self.conditions_line(comp.get("variant"))})
        return out

    def consistency(self) -> dict:
        summary = self.summary.get("consistency") or {}
        raw = _json(self.run_dir / "consistency.json")
        base_out = {o.get("prompt_id"): o for o in raw.get(self.baseline) or [] if isinstance(o, dict)}
        variants = []
        for name, figures in summary.items():
            if not isinstance(figures, dict):
                continue
            outputs = {o.get("prompt_id"): o for o in raw.get(name) or [] if isinstance(o, dict)}
            prompts = []
            for p in figures.get("prompts") or []:
                pid = p.get("prompt_id")
                b, v = base_out.get(pid) or {}, outputs.get(pid) or {}
                prompts.append({
                    "prompt_id": pid, "status": p.get("status"), "unit": p.get("unit"), "length": p.get("length"),
                    "first_divergence": p.get("first_divergence"), "error": clip(p.get("error"), MESSAGE_MAX) or None,
                    "baseline_text": clip(b.get("text"), TEXT_MAX) if b.get("text") is not None else None,
                    "variant_text": clip(v.get("text"), TEXT_MAX) if v.get("text") is not None else None,
                })
            variants.append({"variant": name, "agreement": pct(figures.get("agreement"), 0),
                             "compared": figures.get("compared"), "identical": figures.get("identical"),
                             "defect": bool(figures.get("defect")), "prompts": prompts})
        skipped = [e for e in self.events if isinstance(e, dict) and e.get("kind") == "consistency_skipped"]
        return {"variants": variants, "skipped": [f"{e.get('variant')}: {clip(e.get('error'), MESSAGE_MAX)}"
                                                  for e in skipped],
                "conditions": self.conditions_line()}

    def validity(self) -> dict:
        rows, steadiness = [], []
        for name in self._ordered_variants():
            for s in self.steps_of(name):
                cv = s.get("client_validity") or {}
                rows.append({"variant": name, "level": lvl(s.get("level")), "valid": s.get("client_valid"),
                             "cpu": num(cv.get("cpu_percent_max")), "loop_lag": num(cv.get("loop_lag_ms_p95")),
                             "sched_lag": num(cv.get("schedule_lag_ms_p99")),
                             "achieved": num(s.get("achieved_rate")), "scheduled": num(s.get("scheduled_rate")),
                             "reasons": "; ".join(map(str, cv.get("reasons") or []))})
                check = s.get("steady_check") or {}
                thr, tpot = check.get("throughput") or {}, check.get("tpot") or {}
                steadiness.append({
                    "variant": name, "level": lvl(s.get("level")), "steady": s.get("steady"),
                    "thr_drift": pct(thr.get("drift_fraction")), "thr_slope": pct(thr.get("relative_slope_per_min")),
                    "thr_ok": thr.get("steady"),
                    "tpot_drift": pct(tpot.get("drift_fraction")),
                    "tpot_slope": pct(tpot.get("relative_slope_per_min")), "tpot_ok": tpot.get("steady"),
                })
        return {"rows": rows, "steadiness": steadiness, "open_loop": self.mode == "open",
                "conditions": self.conditions_line()}

    def run_events(self) -> dict:
        rows = []
        for e in self.events:
            if not isinstance(e, dict):
                continue
            t = e.get("t")
            details = {k: v for k, v in e.items() if k not in ("kind", "t", "variant", "log_tail")}
            rows.append({"t": f"+{t - self.t0:.1f} s" if ok(t) and ok(self.t0) else (num(t) or "\u2014"),
                         "kind": e.get("kind"), "variant": e.get("variant"),
                         "details": clip("; ".join(f"{k}: {json.dumps(v) if not isinstance(v, str) else v}"
                                                   for k, v in details.items()), MESSAGE_MAX * 2),
                         "log_tail": clip(e.get("log_tail"), LOG_TAIL_MAX) if e.get("log_tail") else None})
        gaps, missing = [], {}
        meta = _json(self.run_dir / "telemetry.json")
        for name in self._ordered_variants():
            entry = self.variants.get(name) or {}
            tel = entry.get("telemetry") or {}
            for g in tel.get("gaps") or []:
                if isinstance(g, dict):
                    start, end = g.get("start"), g.get("end")
                    gaps.append({"variant": name, "source": g.get("source"),
                                 "start": f"+{start - self.t0:.1f} s" if ok(start) and ok(self.t0) else num(start),
                                 "length": f"{end - start:.1f} s" if ok(start) and ok(end) else "open",
                                 "recovered": g.get("recovered"), "error": clip(g.get("error"), MESSAGE_MAX)})
            if tel.get("missing"):
                missing.setdefault(("all server figures", tel["missing"]), {}).setdefault(name, []).append("all")
            for s in self.steps_of(name):
                for m in (s.get("server") or {}).get("missing") or []:
                    if isinstance(m, dict):
                        missing.setdefault((m.get("figure"), m.get("reason")), {}).setdefault(name, []).append(
                            lvl(s.get("level")))
        grouped: dict = {}
        for (figure, reason), where in missing.items():
            scope = "; ".join(f"{n} @ {', '.join(levels)}" for n, levels in where.items())
            grouped.setdefault((reason, scope), []).append(str(figure))
        missing_rows = [{"figures": ", ".join(figures), "reason": reason, "where": scope}
                        for (reason, scope), figures in grouped.items()]
        notes = [clip(n.get("message"), MESSAGE_MAX) for n in meta.get("notes") or [] if isinstance(n, dict)]
        for a in meta.get("attachments") or []:
            for err in (a.get("errors") or [])[:5] if isinstance(a, dict) else []:
                notes.append(f"{a.get('variant')}: {clip(err, MESSAGE_MAX)}")
        return {"events": rows, "gaps": gaps,
                "missing": missing_rows,
                "notes": notes, "telemetry_file": (self.run_dir / "telemetry.parquet").exists(),
                "errors": self.error_samples()}

    def error_samples(self) -> list[dict]:
        frame = _parquet(self.run_dir / "requests.parquet",
                         ["variant", "level", "phase", "error_class", "error_message", "http_status"])
        if not len(frame) or "error_class" not in frame:
            return []
        failed = frame[frame["error_class"].notna()]
        out = []
        for (variant, error_class), group in failed.groupby(["variant", "error_class"], sort=False):
            messages = group["error_message"].dropna() if "error_message" in group else pd.Series(dtype=str)
            status = group["http_status"].dropna() if "http_status" in group else pd.Series(dtype=float)
            out.append({"variant": variant, "class": error_class, "count": len(group),
                        "steady": int((group["phase"] == "steady").sum()) if "phase" in group else None,
                        "levels": ", ".join(lvl(x) for x in sorted(group["level"].dropna().unique())),
                        "status": ", ".join(str(int(x)) for x in sorted(status.unique())[:5]) or None,
                        "message": clip(messages.iloc[0], MESSAGE_MAX) if len(messages) else None})
        return out

    # charts ------------------------------------------------------------------------------------
    def _vlines(self, include_crossover: bool = True, variants: list[str] | None = None) -> list[VLine]:
        lines = []
        for name in variants if variants is not None else self._ordered_variants():
            entry = self.variants.get(name) or {}
            color = self.colors.get(name, "#333")
            if ok(entry.get("saturation_level")):
                lines.append(VLine(float(entry["saturation_level"]), f"saturation {name}", color, "5 3"))
            if ok(entry.get("knee_level")):
                lines.append(VLine(float(entry["knee_level"]), f"knee {name}", color, "1 3"))
        if include_crossover:
            for comp in self.comparisons:
                if ok(comp.get("crossover_level")):
                    lines.append(VLine(float(comp["crossover_level"]), f"crossover {comp.get('variant')}", "#b00020",
                                       "6 2"))
        return lines

    def _series(self, name: str, key: str, stat: str | None = None, **kwargs) -> Series:
        steps = [s for s in self.steps_of(name) if ok(s.get("level"))]
        xs = [float(s["level"]) for s in steps]
        if stat is None:
            ys = [s.get(key) for s in steps]
        else:
            ys = [(s.get(key) or {}).get(stat) for s in steps]
        return Series(name=kwargs.pop("label", name), x=xs, y=ys, color=self.colors.get(name, "#333"), **kwargs)

    def charts(self) -> dict:
        names = self._ordered_variants()
        levels = self.levels()
        x_label = level_name(self.mode)
        result: dict[str, dict] = {}

        def add(key, title, caption, build):
            svg = self.section(f"chart {key}", build)
            result[key] = {"title": title, "caption": caption,
                           "svg": svg if svg is not None else charts.not_measured(title, "chart failed to render")}

        def throughput():
            series = []
            for name in names:
                steps = [s for s in self.steps_of(name) if ok(s.get("level"))]
                cis = [s.get("output_tps_ci95") or [None, None] for s in steps]
                series.append(Series(name, [float(s["level"]) for s in steps], [s.get("output_tps") for s in steps],
                                     lo=[c[0] for c in cis], hi=[c[1] for c in cis],
                                     color=self.colors.get(name, "#333")))
            return charts.line_chart(series, title="Aggregate output tok/s", x_label=x_label,
                                     y_label="output tok/s", log2_x=True, x_ticks=levels, vlines=self._vlines())

        add("throughput", "Throughput vs load",
            "Aggregate output tokens/s of each step's steady window, bars = bootstrap 95% CI; dashed markers: "
            "saturation, dotted: knee, red: crossover.", throughput)

        def latency(keys: tuple[str, ...], label: str):
            def build():
                series = []
                key = next((k for k in keys if any(s.get(k) for n in names for s in self.steps_of(n))), keys[-1])
                for name in names:
                    for p in PERCENTILES:
                        series.append(self._series(name, key, p, label=f"{name} {p.upper()}", dash=DASH[p]))
                return charts.line_chart(series, title=label, x_label=x_label, y_label=f"{label} (ms)",
                                         log2_x=True, x_ticks=levels,
                                         vlines=[v for v in self._vlines(False) if v.label.startswith("knee")])
            return build

        ttft_keys = ("ttft_sched_ms", "ttft_ms") if self.mode == "open" else ("ttft_ms",)
        ttft_label = "TTFT_sched" if self.mode == "open" else "TTFT"
        add("ttft", f"{ttft_label} percentiles vs load",
            "P50 solid, P95 dashed, P99 dotted" + (" (open loop: from the intended send time)"
                                                   if self.mode == "open" else "") + "; knee marked.",
            latency(ttft_keys, ttft_label))
        add("tpot", "TPOT percentiles vs load", "Time per output token after the first; P50 solid, P95 dashed, "
            "P99 dotted; knee marked.", latency(("tpot_ms",), "TPOT"))
        add("e2e", "End-to-end latency percentiles vs load", "Whole request, send to last token; P50 solid, P95 "
            "dashed, P99 dotted.", latency(("e2e_sched_ms", "e2e_ms") if self.mode == "open" else ("e2e_ms",), "E2E"))

        def tradeoff():
            series = []
            for name in names:
                steps = [s for s in self.steps_of(name) if ok(s.get("level"))]
                series.append(Series(name, [(s.get("tpot_ms") or {}).get("p50") for s in steps],
                                     [s.get("output_tps") for s in steps], color=self.colors.get(name, "#333"),
                                     labels=[lvl(s["level"]) for s in steps]))
            return charts.line_chart(series, title="Throughput vs TPOT", x_label="TPOT P50 (ms per token, per user)",
                                     y_label="aggregate output tok/s", y_from_zero=True)

        add("tradeoff", "Trade-off: throughput vs per-user speed",
            "Each point is one load level (labelled); up and to the left is better. A variant whose curve lies "
            "above another gives more throughput at the same per-token latency.", tradeoff)

        def speedup():
            series = []
            for comp in self.comparisons:
                steps = sorted((s for s in comp.get("steps") or [] if ok(s.get("level"))), key=lambda s: s["level"])
                figs = [s.get("output_tps_speedup") or {} for s in steps]
                cis = [f.get("ci95") or [None, None] for f in figs]
                series.append(Series(f"{comp.get('variant')} / {comp.get('baseline')}", [s["level"] for s in steps],
                                     [f.get("value") for f in figs], lo=[c[0] for c in cis], hi=[c[1] for c in cis],
                                     color=self.colors.get(comp.get("variant"), PALETTE[1])))
            crossovers = [VLine(float(c["crossover_level"]), f"crossover {c.get('variant')}", "#b00020", "6 2")
                          for c in self.comparisons if ok(c.get("crossover_level"))]
            return charts.line_chart(series, title="Speed-up vs load", x_label=x_label,
                                     y_label="speed-up (aggregate tok/s)", log2_x=True, x_ticks=levels,
                                     hlines=[HLine(1.0, "1\u00d7 = no gain")], vlines=crossovers, y_from_zero=False,
                                     empty_note="needs a baseline and a variant")

        add("speedup", "Speed-up over the baseline vs load",
            "Variant / baseline aggregate output tok/s per level, bars = bootstrap 95% CI. Above 1 the variant is "
            "faster; the crossover is the first level whose CI lies entirely below 1.", speedup)

        def acceptance():
            series = []
            for name in names:
                if name == self.baseline:
                    continue
                steps = [s for s in self.steps_of(name) if ok(s.get("level"))]
                xs = [float(s["level"]) for s in steps]
                srv = [((s.get("acceptance") or {}).get("server") or (s.get("server") or {}).get("acceptance") or {})
                       .get("rate") for s in steps]
                cli = [((s.get("acceptance") or {}).get("client") or s.get("acceptance_client") or {}).get("rate")
                       for s in steps]
                color = self.colors.get(name, "#333")
                series.append(Series(f"{name} (server counters)", xs, srv, color=color))
                series.append(Series(f"{name} (client, per request)", xs, cli, color=color, dash="5 3"))
            return charts.line_chart(series, title="Draft acceptance rate", x_label=x_label,
                                     y_label="accepted / drafted tokens", log2_x=True, x_ticks=levels, y_max=1.0,
                                     empty_note="no speculative variant, or no acceptance figures")

        add("acceptance", "Acceptance vs load",
            "Accepted / drafted tokens in each step's steady window: from the server's counters (solid) and from "
            "the per-request timings the client received (dashed).", acceptance)
        return result

    def timeline(self) -> dict:
        """Telemetry over time with the ladder steps shaded (warm-up lighter)."""
        frame = _parquet(self.run_dir / "telemetry.parquet")
        client = _parquet(self.run_dir / "client.parquet")
        spans = []
        t0 = self.t0
        times_all = []
        if len(frame) and "t" in frame:
            times_all.append(float(frame["t"].min()))
        if len(client) and "t" in client:
            times_all.append(float(client["t"].min()))
        if t0 is None and times_all:
            t0 = min(times_all)
        for s in self.step_windows:
            if ok(s.get("t_start")) and ok(s.get("t_end")) and t0 is not None:
                spans.append(Span(s["t_start"] - t0, s["t_end"] - t0, lvl(s.get("level")), str(s.get("variant")),
                                  steady=(s["t_steady"] - t0) if ok(s.get("t_steady")) else None))
        out = []
        notes = []
        x_label = "seconds since the run started"

        def chart(title, unit, series, caption, y_max=None):
            svg = charts.line_chart(series, title=title, x_label=x_label, y_label=unit, spans=spans, y_max=y_max,
                                    width=1100, height=230)
            out.append({"title": title, "caption": caption, "svg": svg})

        if t0 is not None and len(frame) and {"t", "variant", "metric", "value"} <= set(frame.columns):
            frame = frame[np.isfinite(frame["value"].astype(float))]
            present = set(frame["metric"].unique())

            def gauge(metric: str) -> list[Series]:
                result = []
                sub = frame[frame["metric"] == metric]
                combine = "sum" if metric in ("gpu_mem_used_mib", "gpu_power_w") else "mean"
                for name in self._ordered_variants():
                    part = sub[sub["variant"] == name]
                    if not len(part):
                        continue
                    g = part.groupby("t")["value"].agg(combine).sort_index()
                    x, y = charts.downsample((g.index.to_numpy() - t0).tolist(), g.to_numpy().tolist())
                    result.append(Series(name, x, y, color=self.colors.get(name, "#333"), points=False, width=1.4))
                return result

            def counter_rate(metric: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
                sub = frame[frame["metric"] == metric]
                if "labels" in sub:
                    sub = sub[sub["labels"].isin(["{}", "", None]) | sub["labels"].isna()]
                result = {}
                for name in self._ordered_variants():
                    g = sub[sub["variant"] == name].groupby("t")["value"].sum().sort_index()
                    if len(g) < 2:
                        continue
                    t = g.index.to_numpy(dtype=float)
                    dv = np.diff(g.to_numpy(dtype=float))
                    dv[dv < 0] = np.nan  # a counter reset (server restart) is a gap, not a negative rate
                    result[name] = ((t[1:] + t[:-1]) / 2, dv, np.diff(t))
                return result

            if "requests_running" in present:
                series = gauge("requests_running")
                if "requests_waiting" in present:
                    for s in gauge("requests_waiting"):
                        s.name, s.dash = f"{s.name} waiting", "4 3"
                        series.append(s)
                chart("Requests on the server", "requests", series,
                      "Requests running (solid) and waiting (dashed) as the server reports them; shaded bands are "
                      "the ladder steps (lighter part = warm-up), labelled with their level.")
            if "generation_tokens" in present:
                series = []
                for name, (t, dv, dt) in counter_rate("generation_tokens").items():
                    x, y = charts.downsample((t - t0).tolist(), (dv / dt).tolist())
                    series.append(Series(name, x, y, color=self.colors.get(name, "#333"), points=False, width=1.4))
                chart("Server generation rate", "tokens/s", series,
                      "Generated tokens per second from the server's own counter, per polling interval.")
            if {"spec_accepted_tokens", "spec_draft_tokens"} <= present:
                acc, dra = counter_rate("spec_accepted_tokens"), counter_rate("spec_draft_tokens")
                series = []
                for name in acc:
                    if name not in dra or len(acc[name][1]) != len(dra[name][1]):
                        continue
                    with np.errstate(divide="ignore", invalid="ignore"):
                        rate = np.where(dra[name][1] > 0, acc[name][1] / dra[name][1], np.nan)
                    if not np.isfinite(rate).any():
                        continue
                    x, y = charts.downsample((acc[name][0] - t0).tolist(), rate.tolist())
                    series.append(Series(name, x, y, color=self.colors.get(name, "#333"), points=False, width=1.4))
                if series:
                    chart("Acceptance rate over time", "accepted / drafted", series,
                          "Draft acceptance per polling interval from the server's counters.", y_max=1.0)
                else:
                    notes.append("acceptance over time: not measured (no draft tokens in any interval)")
            gpu = [("gpu_util", "GPU utilisation", "ratio (0\u20131)", 1.0), ("gpu_mem_used_mib", "GPU memory used",
                                                                             "MiB", None),
                   ("gpu_power_w", "GPU power", "W", None), ("kv_cache_usage", "KV-cache usage", "ratio (0\u20131)",
                                                             1.0)]
            for metric, title, unit, ymax in gpu:
                if metric in present:
                    chart(title, unit, gauge(metric), f"{title} ({metric}) as polled, summed or averaged over GPUs.",
                          y_max=ymax)
            if "process_cpu_cores" in present:
                chart("Server process CPU", "cores", gauge("process_cpu_cores"),
                      "CPU time of the server process per second of wall time (1.0 = one core busy).")
            if "process_rss_mib" in present:
                chart("Server process memory", "RSS (MiB)", gauge("process_rss_mib"),
                      "Resident memory of the server process.")
            if not any(m in present for m in ("gpu_util", "gpu_mem_used_mib")):
                meta = _json(self.run_dir / "telemetry.json")
                why = meta.get("gpu") if isinstance(meta.get("gpu"), str) else "no GPU source"
                notes.append(f"GPU utilisation and memory: not measured ({why})")
        else:
            notes.append("server telemetry over time: not measured (no telemetry.parquet in the run directory)")
        if t0 is not None and len(client) and {"t", "cpu_percent"} <= set(client.columns):
            series = []
            for i, (worker, part) in enumerate(client.sort_values("t").groupby("worker" if "worker" in client
                                                                                  else lambda _: 0)):
                x, y = charts.downsample((part["t"].to_numpy() - t0).tolist(), part["cpu_percent"].tolist())
                series.append(Series(f"worker {worker}", x, y, color=PALETTE[(i + 1) % len(PALETTE)], points=False,
                                     width=1.4))
            chart("Load generator CPU", "% of one core", series,
                  "CPU of each Locust process (gevent runs on one core: above 90% it stamps tokens late).")
        else:
            notes.append("load generator CPU over time: not measured (no client.parquet)")
        return {"charts": out, "notes": notes, "conditions": self.conditions_line()}

    def definitions(self) -> list[tuple[str, str]]:
        return DEFINITIONS

    def context(self) -> dict:
        ctx = {
            "meta": self.section("meta", self.meta) or {"run_id": self.run_dir.name, "title": "locust-llm report",
                                                        "subtitle": "", "conditions": "", "unit": "",
                                                        "level_name": "level", "mode": self.mode},
            "verdict": self.section("verdict", self.verdict),
            "gates": self.section("gates", self.gates),
            "regression": self.section("regression", self.regression),
            "conditions": self.section("conditions", self.conditions),
            "variants": self.section("variants", self.variant_tables),
            "speedups": self.section("speed-ups", self.speedups),
            "charts": self.section("charts", self.charts) or {},
            "consistency": self.section("consistency", self.consistency),
            "validity": self.section("client validity", self.validity),
            "events": self.section("run events", self.run_events),
            "timeline": self.section("telemetry", self.timeline),
            "definitions": DEFINITIONS, "rules": RULES,
        }
        ctx["failures"] = list(self.failures)
        return ctx


DEFINITIONS: list[tuple[str, str]] = [
    ("clock", ("All times are the client's perf_counter, anchored once per process to the epoch, so every "
              "process and the telemetry share one clock. Per request: t_intended (open loop: the scheduled "
              "arrival), t_send, t_first (first chunk carrying a token), t_end (last token).")),
    ("TTFT", "Time to first token: t_first \u2212 t_send."),
    ("TTFT_sched", ("Open loop only: t_first \u2212 t_intended. The headline latency there, because a request "
                   "sent late by a busy client has waited too, and that wait must not disappear.")),
    ("TPOT", "Time per output token after the first: (t_end \u2212 t_first) / (tokens \u2212 1), per request."),
    ("ITL", ("Inter-token latency, per token: each gap between chunks is divided evenly over the tokens of the "
            "later chunk (speculative decoding delivers several per chunk); first-chunk tokens have no gap.")),
    ("ICL", "Inter-chunk latency: the gaps between chunks themselves, reported separately from ITL."),
    ("E2E", "End to end: t_end \u2212 t_send (open loop also from t_intended)."),
    ("decode tok/s", ("Per request: (tokens \u2212 1) / (t_end \u2212 t_first); the speed one user sees while "
                     "tokens stream.")),
    ("aggregate output tok/s", ("Per step: every token whose arrival time falls inside the step's steady window, "
                               "divided by the window's length (not tokens of the requests that happened to "
                               "finish in it). The 95% CI is a bootstrap over one-second bins.")),
    ("goodput", ("Requests per second, sent in the steady window, that succeeded and met every SLO that is set. "
                "Failed and timed-out requests count against it.")),
    ("error rate", ("Failed requests / requests sent in the steady window. Failures are never dropped from any "
                   "denominator.")),
    ("token counts", ("Exact, from the server's usage deltas, token ids or per-token events (the source is "
                     "recorded per request); SSE events are never counted as tokens.")),
    ("acceptance (server)", ("From the server's counters over the steady window: accepted / drafted tokens; mean "
                            "acceptance length = 1 + accepted / drafts; per position i: accepted at i / drafts.")),
    ("acceptance (client)", ("Cross-check from what the client received: accepted / drafted tokens from each "
                            "response's timings, and tokens per token-carrying chunk.")),
    ("speed-up", ("metric(variant, level) / metric(baseline, level), oriented so that > 1 favours the variant "
                 "(baseline / variant for latencies), with a percentile-bootstrap 95% CI resampling both sides.")),
    ("crossover", "The first level whose speed-up CI upper bound is below 1: from there the variant is slower."),
    ("percentiles", ("P50/P95/P99 as numpy's linear percentile over the requests (or tokens) of the step's steady "
                    "window; requests belong to a step by their send time.")),
]

RULES: list[tuple[str, str]] = [
    ("warm-up", "Each step's first seconds are recorded but excluded from every figure."),
    ("saturation", ("The first level that no higher level beats by more than 5% with non-overlapping 95% CIs; "
                   "the top level is never the answer (nothing above it to show the plateau).")),
    ("knee", ("The last level before P95 TPOT or TTFT grows faster than load on a log-log scale (slope > 0.5 in a "
             "closed loop, where past saturation latency grows in proportion to users; > 1 in an open loop).")),
    ("steady", ("A step is unsteady when throughput (1 s bins) or TPOT drifts within the steady window: the "
               "trend's 95% CI excludes 0 and it moves the metric by 5% or more of its mean over the window.")),
    ("client validity", ("A step is invalid when a load process averaged more than 90% of a core, the P95 of "
                        "the event-loop lag exceeded 20 ms, or (open loop) the P99 schedule lag exceeded 20 ms, "
                        "arrivals were dropped at the in-flight cap, or fewer than 95% of scheduled arrivals "
                        "were sent.")),
    ("consistency", ("Under greedy decoding lossless speculative decoding must reproduce the baseline's output "
                    "token for token on fixed prompts; the first divergence per prompt is shown, and any "
                    "divergence is a defect.")),
]


def build_context(run_dir: Path, summary: dict | None = None) -> dict:
    run_dir = Path(run_dir)
    return Report(run_dir, summary if summary is not None else load_summary(run_dir)).context()


def render_html(run_dir: Path, summary: dict | None = None) -> str:
    return environment().get_template("report.html.j2").render(**build_context(run_dir, summary))


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def render_report(run_dir: Path, summary: dict | None = None) -> Path:
    """Write ``run_dir/report.html`` (and ``steps.csv``, ``summary.md``); return the report's path.

    ``summary`` is the parsed ``summary.json``; when None it is read from the run directory (and computed
    there first if the file is absent).
    """
    from .exports import write_exports

    run_dir = Path(run_dir)
    if summary is None:
        summary = load_summary(run_dir)
    path = run_dir / REPORT_FILE
    _write(path, render_html(run_dir, summary))
    write_exports(run_dir, summary)
    return path

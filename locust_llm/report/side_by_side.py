"""Variants side by side: what each server loaded (model file, KV cache types, speculation), its peak memory, its
speed-up per level and its quality, one row each, so that a quantization or KV-precision variant reads like a
speculative one: what it gains, what it holds, what it answers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..fmt import ci_text, is_number, lvl, pct, pct_ci, times
from .view import RunView, flags_text

__all__ = ["SideBySideRow", "kv_cache_types", "side_by_side"]

# llama-server's flags for the KV cache's element types, and its default for both.
KV_FLAGS = {"-ctk": "K", "--cache-type-k": "K", "-ctv": "V", "--cache-type-v": "V"}
KV_DEFAULT = "f16"


@dataclass(frozen=True)
class SideBySideRow:
    variant: str
    baseline: bool
    model: str | None  # the target file: name, size, checksum prefix
    model_source: str | None
    kv_cache: str | None
    speculative: str
    peak_memory: str | None
    speedups: list[str]  # per level: the headline speed-up with its interval, or why there is none
    quality: str | None


def kv_cache_types(command: list[str] | None) -> str | None:
    """The KV cache types a llama-server command line sets (llama.cpp's default, f16, for a type it leaves out)."""
    if not command:
        return None
    types = {"K": KV_DEFAULT, "V": KV_DEFAULT}
    for flag, value in zip(command, command[1:], strict=False):
        if flag in KV_FLAGS:
            types[KV_FLAGS[flag]] = value
    return f"K {types['K']}, V {types['V']}"


def _model(view: RunView, name: str) -> tuple[str | None, str | None]:
    server = view.server_of(name)
    target = next((f for f in server.model_files or [] if f.role == "target"), None)
    if target is None:
        return (Path(server.model).name if server.model else None), None
    size = f", {target.size_bytes / 2**20:.1f} MiB" if target.size_bytes else ""
    return f"{Path(target.path).name}{size}, sha256 {target.sha256[:12]}", target.source


def _peak_memory(view: RunView, name: str) -> str | None:
    entry = view.variants.get(name)
    trend = entry.memory_trend if entry else None
    if trend is None:
        return None
    what = "GPU memory used" if trend.metric.startswith("gpu") else "server RSS"
    return f"{trend.peak_mib:,.0f} MiB ({what}, {trend.n} samples)"


def _speedups(view: RunView, name: str) -> list[str]:
    comp = next((c for c in view.comparisons if c.variant == name), None)
    if comp is None:
        return []
    out = []
    for step in sorted(comp.steps, key=lambda s: s.level):
        ratio = step.output_tps_speedup
        if step.status != "clean" or not is_number(ratio.value):
            out.append(f"{lvl(step.level)}: {step.status}")
            continue
        interval = ci_text(ratio.ci95, times)
        out.append(f"{lvl(step.level)}: {times(ratio.value)}" + (f" [{interval}]" if interval else ""))
    return out


def _quality(view: RunView, name: str) -> str | None:
    quality = view.summary.quality
    entry = quality.variants.get(name) if quality else None
    if entry is None or not entry.answered:
        return None
    parts = []
    for kind, rate in (("greedy", entry.greedy), ("sampled", entry.sampled)):
        if rate is not None and rate.answers:
            interval = pct_ci(rate.rate_ci95)
            parts.append(
                f"{kind} {rate.passed}/{rate.answers} ({pct(rate.rate, 0)}"
                + (f", {interval}" if interval else "")
                + ")"
            )
    text = "; ".join(parts) or None
    if text and not entry.eligible:
        text += f"; not eligible: {entry.reason}"
    return text


def side_by_side(view: RunView) -> list[SideBySideRow]:
    """A row per variant, in run order (empty for a run of one variant)."""
    if len(view.names) < 2:
        return []
    rows = []
    for name in view.names:
        server = view.server_of(name)
        engine = server.engine or view.server_spec.engine
        model, source = _model(view, name)
        rows.append(
            SideBySideRow(
                variant=name,
                baseline=name == view.baseline,
                model=model,
                model_source=source,
                kv_cache=kv_cache_types(server.command) if engine == "llamacpp" else None,
                speculative=flags_text(view.speculative_of(name)),
                peak_memory=_peak_memory(view, name),
                speedups=_speedups(view, name),
                quality=_quality(view, name),
            )
        )
    return rows

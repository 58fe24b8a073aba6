"""The soak's settings: the scenario's ``soak:`` section, ``--soak DURATION`` and ``--soak-level``, resolved into
a ``SoakPlan`` (which variant, which level, how many windows of what length). Pure: no Locust.

A soak holds one level of one variant for the whole duration, measured as consecutive windows; each window is a
step of ``steps.json`` (with a ``window`` index), so every per-step figure exists per window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import ConfigDict, Field

from .base import Strict

__all__ = ["MIN_WINDOWS", "SoakPlan", "SoakSpec", "parse_duration", "soak_plan"]

WEEK_S = 7 * 86_400.0
MIN_WINDOWS = 3  # a trend with a confidence interval needs at least three points
UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*$")


class SoakSpec(Strict):
    """The scenario's ``soak:`` section: window length and the gates (null turns a gate off)."""

    window_s: float = Field(default=120.0, gt=0, le=86_400.0)
    # A figure drifting by more than this (percent of its first window's level per hour), with the trend's whole
    # 95% CI beyond it in the bad direction (latency up, throughput down), fails the soak (exit 3).
    max_drift_pct_per_hour: float | None = Field(default=10.0, gt=0)
    max_error_rate: float | None = Field(default=0.01, ge=0, le=1)  # over the whole soak
    # Server memory (resident, or GPU memory) growing faster than this, CI wholly above it, fails the soak.
    max_memory_growth_mib_per_hour: float | None = Field(default=100.0, gt=0)


@dataclass(frozen=True)
class SoakPlan:
    """What a soak run does; written to env.json as ``soak`` (the analysis reads it from there)."""

    # env.json's schema (``rundir.env``) takes each field's description from its docstring
    __pydantic_config__ = ConfigDict(use_attribute_docstrings=True)

    variant: str
    """The one variant the soak holds."""
    level: float
    """The level held: concurrent streams (closed loop) or requests/s (open loop)."""
    duration_s: float
    """The soak's planned length (s)."""
    windows: int
    """Windows the duration is split into."""
    window_s: float
    """Each window's length (s): the duration split into equal windows of about the scenario's ``window_s``."""
    max_drift_pct_per_hour: float | None
    """A figure drifting by more than this (percent of its first window's level per hour), the trend's whole 95% CI
    beyond it in the bad direction, fails the soak (exit 3); null: no gate."""
    max_error_rate: float | None
    """An error rate over the whole soak above this fails it; null: no gate."""
    max_memory_growth_mib_per_hour: float | None
    """Server memory (resident, or GPU memory) growing faster than this (MiB/hour, CI wholly above it) fails the
    soak; null: no gate."""


def parse_duration(text: str) -> float:
    """``90s``, ``10m``, ``2h`` or plain seconds -> seconds; ``ValueError`` with the accepted forms otherwise."""
    match = DURATION.match(str(text))
    seconds = float(match.group(1)) * UNITS[match.group(2)] if match else 0.0
    if not 0 < seconds <= WEEK_S:
        raise ValueError(f"--soak must be a duration such as 90s, 10m or 2h (at most a week), found {text!r}")
    return seconds


def soak_plan(
    duration: str, level: float, spec: SoakSpec, ladder: list[float], variants: list[str], chosen: str
) -> SoakPlan | None:
    """``--soak`` and ``--soak-level`` -> the plan (None without ``--soak``). The level is ``--soak-level``, else
    the ladder's highest; the variant is the one run (the baseline unless ``--variant`` names another): a soak
    asks whether one deployment holds up over time, and switching variants would confound time with variant."""
    if not 0 <= level <= 100_000:  # written so that NaN fails too; checked with or without --soak
        raise ValueError(f"--soak-level must be a level from 0 (the ladder's highest) to 100000, found {level:g}")
    if not str(duration or "").strip():
        return None
    seconds = parse_duration(duration)
    if len([name for name in chosen.split(",") if name.strip()]) > 1:
        raise ValueError(f"--soak holds one variant: give --variant one name, found {chosen!r}")
    windows = max(MIN_WINDOWS, round(seconds / spec.window_s))
    return SoakPlan(
        variant=variants[0],
        level=float(level or max(ladder)),
        duration_s=seconds,
        windows=windows,
        window_s=seconds / windows,
        max_drift_pct_per_hour=spec.max_drift_pct_per_hour,
        max_error_rate=spec.max_error_rate,
        max_memory_growth_mib_per_hour=spec.max_memory_growth_mib_per_hour,
    )

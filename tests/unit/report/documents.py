"""Typed summaries built by hand for the report's unit tests: every figure is set here, so a test knows what the
report must say without running the analysis."""

from __future__ import annotations

from locust_llm.analysis.documents.speedup import Ratio
from locust_llm.analysis.documents.summary import (
    Comparison,
    StepComparison,
    StepFigures,
    Summary,
    VariantFigures,
    Verdict,
)
from locust_llm.analysis.timeline import Timeline
from locust_llm.report import ReportInput, RunView
from locust_llm.rundir.env import RunEnv


def step(level: float, number: int = 0, **figures) -> StepFigures:
    """A clean closed-loop step with 50 requests unless ``figures`` say otherwise."""
    return StepFigures.model_validate({"step": number, "level": level, "mode": "closed", "requests": 50, **figures})


def ratio(value: float, lo: float | None, hi: float | None) -> Ratio:
    return Ratio(value=value, ci95=None if lo is None else [lo, hi])


def compared(level: float, speedup: Ratio, **fields) -> StepComparison:
    """A compared level whose every speed-up is ``speedup``."""
    keys = ("output_tps_speedup", "decode_tps_speedup", "tpot_p50_speedup", "tpot_p95_speedup", "ttft_p95_speedup")
    return StepComparison.model_validate({"level": level, **dict.fromkeys(keys, speedup), **fields})


def comparison(steps: list[StepComparison], variant: str = "spec", baseline: str = "base", **fields) -> Comparison:
    return Comparison.model_validate(
        {
            "baseline": baseline,
            "variant": variant,
            "metric": "output_tps",
            "recommendation": "enable it",
            "steps": steps,
            **fields,
        }
    )


def summary(variants: dict[str, list[StepFigures]], comparisons: list[Comparison] = (), **fields) -> Summary:
    """Baseline ``base`` unless ``fields`` say otherwise."""
    return Summary.model_validate(
        {
            "generated_at": "2026-01-01T00:00:00+0000",
            "records": 100,
            "baseline": "base",
            "variants": {name: VariantFigures(steps=steps) for name, steps in variants.items()},
            "comparisons": list(comparisons),
            **fields,
        }
    )


def view(doc: Summary, env: dict | None = None, verdict: Verdict | None = None) -> RunView:
    return RunView(ReportInput(doc, RunEnv.model_validate(env or {}), Timeline(None), verdict))

"""The quality section (``report.quality``) from a hand-built quality summary: pass rates with their intervals,
the difference from the baseline in points, agreement, and the sampling sentence."""

from locust_llm.analysis.documents.quality import Agreement, PassRate, QualitySummary, VariantQuality
from locust_llm.fmt import DASH
from locust_llm.report.quality import quality
from tests.unit.report.documents import step, summary, view


def doc(seeds: list[int]) -> QualitySummary:
    greedy = PassRate(answers=40, passed=30, rate=0.75, rate_ci95=[0.6, 0.86], difference=-0.05)
    greedy.difference_ci95 = [-0.12, 0.02]
    variants = {
        "base": VariantQuality(variant="base", greedy=PassRate(answers=40, passed=32, rate=0.8)),
        "spec": VariantQuality(
            variant="spec", greedy=greedy, agreement=Agreement(compared=8, identical=8, agreement=1.0), eligible=True
        ),
    }
    return QualitySummary(
        tasks="arith", items=40, seeds=seeds, temperature=0.7, max_drop_pct=5.0, method="m", variants=variants, text="t"
    )


def test_pass_rates_and_the_difference_in_points():
    section = quality(view(summary({"base": [step(1.0)]}, quality=doc([1, 2]))))
    base, spec = section["variants"]
    assert base["baseline"] and not spec["baseline"]
    assert (spec["greedy"]["rate"], spec["greedy"]["ci"]) == ("75.0%", f"60.0{DASH}86.0%")
    assert spec["greedy"]["difference"] == "-5.0 points"
    assert spec["greedy"]["difference_ci"] == "-12.0 to +2.0"
    assert base["greedy"]["ci"] == "no CI" and spec["agreement"] == "8/8" and spec["sampled"] is None
    assert section["sampling"] == "2 sampled answers per task at temperature 0.7 (seeds 1, 2)"


def test_without_seeds_the_section_says_no_sampled_answers_and_no_quality_no_section():
    assert quality(view(summary({"base": [step(1.0)]}, quality=doc([]))))["sampling"].startswith("no sampled answers")
    assert quality(view(summary({"base": [step(1.0)]}))) is None

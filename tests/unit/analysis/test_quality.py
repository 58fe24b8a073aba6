"""The quality gate: match types, the intervals (published values), the gate's exit code, and effective throughput:
a variant that fails the gate is shown, marked not eligible, and never recommended however fast it is.

Expected figures come from the literature or are worked out by hand in the comments, never from the code.
"""

import json

import numpy as np
import pytest

from locust_llm.analysis.documents.summary import StepFigures, Summary, VariantFigures
from locust_llm.analysis.gates import EXIT_OK, EXIT_SLO, evaluate
from locust_llm.analysis.proportions import paired_difference_interval, wilson_interval
from locust_llm.analysis.quality import mark_not_eligible, not_eligible, quality_summary
from locust_llm.analysis.scoring import first_json_object, first_number, passes
from locust_llm.pipeline import finish_run
from locust_llm.rundir.quality import QualityFile
from locust_llm.scenario import GatesSpec
from tests.browser import assert_inert
from tests.synthetic import back_to_back, patch_env, window, write_run

EVIL = "<script>alert(1)</script>"


# -- match types ------------------------------------------------------------------------------------------------
def test_exact_ignores_surrounding_whitespace_only():
    assert passes("exact", "Paris", "  Paris\n")
    assert not passes("exact", "Paris", "Paris.") and not passes("exact", "Paris", "paris")


def test_regex_searches_anywhere_unless_anchored():
    assert passes("regex", r"\bParis\b", "It is Paris, of course")
    assert not passes("regex", r"^Paris", "It is Paris")
    assert passes("regex", r"^\s*(?i:yes|no)\b", " Yes, it is")


def test_number_is_the_first_number_of_the_answer():
    assert first_number("It costs 1,234.5 dollars, not 7") == 1234.5
    assert first_number("x = -3 and y = 4") == -3.0 and first_number("6.02e23 atoms") == 6.02e23
    assert first_number("1,2") == 1.0  # not a thousands group: two numbers
    assert first_number("no digits here") is None
    assert passes("number", 42.0, "A: 42.") and passes("number", "42", "42.000 exactly")
    assert not passes("number", 42.0, "A: 41 or 42")  # the first number counts
    assert not passes("number", 42.0, "forty-two")


def test_json_keys_finds_the_first_object_among_prose_and_fences():
    answer = 'Sure {not json} here:\n```json\n{"name": "Ada", "age": 30, "extra": [1]}\n```'
    assert first_json_object(answer) == {"name": "Ada", "age": 30, "extra": [1]}
    assert passes("json_keys", ["name", "age"], answer)
    assert not passes("json_keys", ["name", "email"], answer)
    assert not passes("json_keys", ["name"], '["name"]')  # a list is not an object
    assert not passes("json_keys", ["name"], "name: Ada")


# -- intervals --------------------------------------------------------------------------------------------------
def test_wilson_interval_matches_published_values():
    # Newcombe (1998), Stat. Med. 17: 857-872, Table II, method 3 (Wilson score without continuity correction).
    for (k, n), expected in {
        (81, 263): [0.2553, 0.3662],
        (15, 148): [0.0624, 0.1605],
        (0, 20): [0.0, 0.1611],
        (1, 29): [0.0061, 0.1718],
    }.items():
        assert wilson_interval(k, n) == pytest.approx(expected, abs=5e-5)
    assert wilson_interval(10, 10)[1] == 1.0 and wilson_interval(0, 0) is None


def test_paired_difference_matches_published_and_hand_values():
    # Complete response before / after consolidation (Cavo et al. 2012) in Fagerland, Lydersen and Laake,
    # "Statistical Analysis of Contingency Tables" (2017), ch. 8: Newcombe square-and-add -0.0621 (-0.1186 to -0.0046).
    assert paired_difference_interval(59, 6, 16, 80) == pytest.approx([-0.1186, -0.0046], abs=5e-5)
    # By hand, 9 pairs both pass, 1 only the second: p1 = 0.9, p2 = 1.0, Wilson 9/10 = [0.5958, 0.9821],
    # 10/10 = [0.7225, 1]; a margin is 0 so phi = 0: low = -0.1 - sqrt(0.3042^2 + 0) = -0.4042,
    # high = -0.1 + sqrt(0.0821^2 + 0.2775^2) = 0.1894.
    assert paired_difference_interval(9, 0, 1, 0) == pytest.approx([-0.4042, 0.1894], abs=5e-4)
    # All pairs concordant: no difference, and an interval around 0 that is not zero wide.
    low, high = paired_difference_interval(8, 0, 0, 4)
    assert low == pytest.approx(-high) and high > 0.1
    assert paired_difference_interval(0, 0, 0, 0) is None


# -- the gate ---------------------------------------------------------------------------------------------------
def answers(texts, seeds=()):
    """Greedy answers (``None``: the server failed) and, per seed, the same texts as sampled answers."""
    greedy = [
        {
            "item": i,
            "text": t,
            "tokens": list(t.encode()) if t is not None else None,
            "error": None if t is not None else "HTTP 500: boom",
        }
        for i, t in enumerate(texts)
    ]
    sampled = [{"item": i, "seed": s, "text": t, "error": None} for s in seeds for i, t in enumerate(texts)]
    return {"greedy": greedy, "sampled": sampled}


def quality_doc(variants: dict, items: int = 10, limit: float = 5.0, seeds=()) -> QualityFile:
    tasks = [
        {"id": f"t{i}", "prompt": f"prompt {i}", "reference": "@baseline", "match": "exact", "max_tokens": 8}
        for i in range(items)
    ]
    return QualityFile.model_validate(
        {
            "tasks": "tasks.jsonl",
            "temperature": 0.5 if seeds else 0.0,
            "seeds": list(seeds),
            "max_drop_pct": limit,
            "items": tasks,
            "variants": variants,
        }
    )


def summary_with(quality) -> Summary:
    step = StepFigures(step=0, level=1.0, mode="closed", requests=10, errors=0, error_rate=0.0)
    figures = {name: VariantFigures(steps=[step]) for name in quality.variants}
    summary = Summary(generated_at="now", records=10 * len(figures), baseline="baseline", variants=figures)
    summary.quality = quality
    return summary


def test_a_drop_whose_interval_lies_beyond_the_gate_fails_with_exit_3():
    base = [f"a{i}" for i in range(10)]
    doc = quality_doc({"baseline": answers(base), "broken": answers([f"b{i}" for i in range(10)])})
    quality = quality_summary(doc, "baseline", ["baseline", "broken"])
    broken = quality.variants["broken"]
    # 10 pairs where only the baseline passes: p1 = 0, p2 = 1; Wilson 0/10 = [0, 0.2775], 10/10 = [0.7225, 1]:
    # low = -1 - 0 = -1, high = -1 + sqrt(0.2775^2 + 0.2775^2) = -0.6075 -> a drop of 60.8 to 100 points.
    assert broken.greedy.rate == 0.0 and broken.greedy.baseline_rate == 1.0 and broken.greedy.difference == -1.0
    assert broken.greedy.difference_ci95 == pytest.approx([-1.0, -0.6075], abs=5e-4)
    assert broken.greedy.pair_counts.baseline_only == 10 and broken.greedy.beyond_limit
    assert not broken.eligible and "drop of 100.0 points" in broken.reason and "beyond max_drop_pct 5" in broken.reason
    assert broken.agreement.identical == 0 and broken.agreement.prompts[0].first_divergence == 0
    assert {f.item for f in broken.failing} == {f"t{i}" for i in range(10)}
    assert broken.failing[0].expected == "the baseline's greedy answer: 'a0'" and broken.failing[0].got == "b0"
    verdict = evaluate(summary_with(quality), GatesSpec(error_rate=None))
    assert verdict.exit_code == EXIT_SLO
    assert any(r.startswith("broken: quality gate failed") for r in verdict.reasons[str(EXIT_SLO)])
    assert not_eligible(quality) == {"broken": broken.reason}


def test_a_drop_whose_interval_reaches_inside_the_gate_passes():
    base = [f"a{i}" for i in range(10)]
    # One greedy answer of ten differs: 10 points lower, interval -40.4 to +18.9 points (hand value above), so the
    # drop's interval (-18.9 to 40.4) does not lie entirely beyond 5 points.
    doc = quality_doc({"baseline": answers(base), "close": answers(base[:9] + ["zz"])})
    quality = quality_summary(doc, "baseline", ["baseline", "close"])
    close = quality.variants["close"]
    assert close.greedy.difference == pytest.approx(-0.1)
    assert close.greedy.difference_ci95 == pytest.approx([-0.4042, 0.1894], abs=5e-4)
    assert close.eligible and not close.greedy.beyond_limit and close.agreement.defect
    assert evaluate(summary_with(quality), GatesSpec(error_rate=None)).exit_code == EXIT_OK


def test_sampled_answers_are_paired_by_task_and_seed_and_gated_too():
    base = [f"a{i}" for i in range(20)]
    # Greedy identical; sampled: the baseline's seeds 0 and 1 pass every task, the variant's never.
    doc = quality_doc(
        {
            "baseline": answers(base, seeds=(0, 1)),
            "lossy": {
                "greedy": answers(base)["greedy"],
                "sampled": [{"item": i, "seed": s, "text": "zz", "error": None} for s in (0, 1) for i in range(20)],
            },
        },
        items=20,
        seeds=(0, 1),
    )
    lossy = quality_summary(doc, "baseline", ["baseline", "lossy"]).variants["lossy"]
    assert lossy.greedy.difference == 0.0 and not lossy.greedy.beyond_limit
    assert lossy.sampled.pairs == 40 and lossy.sampled.pair_counts.baseline_only == 40
    assert lossy.sampled.beyond_limit and not lossy.eligible and lossy.reason.startswith("quality gate failed: sampled")


def test_unanswered_tasks_fail_and_unknown_references_are_left_out():
    base = [f"a{i}" for i in range(10)]
    doc = quality_doc({"baseline": answers(base[:9] + [None]), "spec": answers(base[:8] + [None, "a9"])})
    quality = quality_summary(doc, "baseline", ["baseline", "spec", "ghost"])
    assert quality.unscored == ["t9"]  # its reference is the baseline's answer, and there is none
    spec = quality.variants["spec"]
    assert spec.greedy.answers == 9 and spec.greedy.passed == 8 and spec.greedy.errors == 1
    assert spec.failing[0].error == "HTTP 500: boom"
    ghost = quality.variants["ghost"]  # measured on the ladder, no answers: never eligible
    assert not ghost.answered and not ghost.eligible and "not measured" in ghost.reason
    assert quality.variants["baseline"].eligible and quality_summary(None, "baseline", []) is None
    # A baseline that answered nothing leaves nothing to compare with: no evidence, no eligibility.
    silent = quality_summary(
        quality_doc({"baseline": answers([None] * 10), "spec": answers(base)}), "baseline", ["baseline", "spec"]
    )
    assert len(silent.unscored) == 10 and not silent.variants["spec"].eligible
    assert silent.variants["spec"].reason.startswith("quality not compared")


def test_a_comparison_of_a_variant_that_is_not_eligible_recommends_nothing():
    comparisons = [
        {"variant": "fast", "recommendation": "enable fast at every level judged, up to 8 streams"},
        {"variant": "ok", "recommendation": "enable ok up to 4 concurrent streams"},
    ]
    mark_not_eligible(comparisons, {"fast": "quality gate failed: greedy drop"})
    assert comparisons[0]["recommendation"] == (
        "do not enable fast, whatever its speed: not eligible (quality gate failed: greedy drop)"
    )
    assert comparisons[1]["recommendation"] == "enable ok up to 4 concurrent streams"


# -- effective throughput through the pipeline ------------------------------------------------------------------
def quality_run(path):
    """Baseline, spec-ok (TPOT 8 ms) and spec-fast (4 ms, twice as fast as spec-ok, with answers that differ) at
    one stream for 30 s each, priced, with spec-ok and spec-fast as a draft-length sweep."""
    path.mkdir()
    rng = np.random.default_rng(3)
    rows, steps, t = [], [], 1_700_000_000.0
    for variant, tpot in (("baseline", 0.010), ("spec-ok", 0.008), ("spec-fast", 0.004)):
        steps.append(window(variant, 0, 1, t, 30.0))
        rows += back_to_back(path.name, variant, 1, 0, t, 30.0, 0.02, tpot, 20, rng)
        t += 35.0
    write_run(path, rows, steps)
    patch_env(
        path,
        "scenario",
        cost={"cpu_hour_usd": 0.1},
        sweeps={"spec": {"setting": "n_max", "label": "k", "values": [2, 8], "variants": ["spec-ok", "spec-fast"]}},
    )
    base = [f"answer {i}" for i in range(12)]
    doc = quality_doc(
        {"baseline": answers(base), "spec-ok": answers(base), "spec-fast": answers([EVIL] * 12)}, items=12
    )
    (path / "quality.json").write_text(doc.model_dump_json())
    return path


def test_a_faster_variant_that_fails_the_gate_is_never_recommended(tmp_path):
    outcome = finish_run(quality_run(tmp_path / "run"))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    comps = {c["variant"]: c for c in summary["comparisons"]}
    fast, ok = comps["spec-fast"], comps["spec-ok"]
    # Still measured and shown: the failing variant is the faster one.
    assert fast["steps"][0]["output_tps_speedup"]["value"] > ok["steps"][0]["output_tps_speedup"]["value"] > 1
    assert fast["recommendation"].startswith("do not enable spec-fast, whatever its speed: not eligible")
    assert ok["recommendation"].startswith("enable spec-ok")
    quality = summary["quality"]
    assert not quality["variants"]["spec-fast"]["eligible"] and quality["variants"]["spec-ok"]["eligible"]
    # The sweep's choice skips the failing setting: k = 2 (spec-ok), never k = 8.
    (sweep,) = summary["schedules"]
    (level,) = sweep["levels"]
    assert level["choice"] == 2
    assert {c["variant"]: c["status"] for c in level["candidates"]}["spec-fast"] == "not-eligible"
    # Cost: spec-fast is the cheapest per token and not eligible; the cheapest eligible variant is spec-ok.
    cost = {v["variant"]: v for v in summary["cost"]["variants"]}
    assert cost["spec-fast"]["best_level"] is None and not cost["spec-fast"]["levels"][0]["eligible"]
    assert cost["spec-fast"]["levels"][0]["gate_failures"][0].startswith("not eligible: quality gate failed")
    assert cost["spec-fast"]["levels"][0]["usd_per_mtok"] < cost["spec-ok"]["levels"][0]["usd_per_mtok"]
    assert summary["cost"]["text"].startswith("cheapest: spec-ok at 1")
    verdict = json.loads((tmp_path / "run" / "verdict.json").read_text())
    assert verdict["exit_code"] == EXIT_SLO and outcome.verdict.exit_code == EXIT_SLO
    assert any(r.startswith("spec-fast: quality gate failed") for r in verdict["reasons"][str(EXIT_SLO)])
    assert "quality of spec-fast:" in outcome.text and "NOT ELIGIBLE" in outcome.text
    markdown = (tmp_path / "run" / "summary.md").read_text()
    assert "- Quality (12 tasks):" in markdown and "spec-fast NOT ELIGIBLE" in markdown


def test_report_marks_the_variant_and_escapes_its_answers(tmp_path):
    finish_run(quality_run(tmp_path / "run"))
    html = (tmp_path / "run" / "report.html").read_text()
    assert_inert(html)
    assert EVIL not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    section = html[html.index('<section id="quality">') :]
    section = section[: section.index("</section>")]
    assert section.count('<span class="bad">NOT ELIGIBLE</span>: quality gate failed') == 1
    assert section.count('<span class="ok">eligible</span>') == 1 and "12/12" in section and "0.0% (0/12)" in section
    assert "none asked" in section  # temperature 0: no sampled answers
    card = html[html.index('class="card') : html.index('<section id="conditions">')]
    assert 'not-eligible">' in card and "NOT ELIGIBLE: quality gate failed" in card
    assert "spec-fast is not eligible for any recommendation" in card

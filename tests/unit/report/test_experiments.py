"""The speculative-decoding experiments in the report (``report.experiments``) from hand-built documents: a
context length's rows by level with the variant's speed-up and state, and no section for a run without them."""

from locust_llm.analysis.documents.speedup import ContextLevel
from locust_llm.analysis.documents.summary import ContextComparison
from locust_llm.fmt import DASH
from locust_llm.report.experiments import context_charts, contexts, cost, images, sweeps
from tests.unit.report.documents import compared, comparison, ratio, step, summary, view


def context() -> ContextComparison:
    variants = {
        name: [ContextLevel(level=level, clean=True, output_tps=100.0) for level in (4.0, 1.0)]
        for name in ("spec", "base")
    }
    levels = [compared(1.0, ratio(1.3, 1.2, 1.4)), compared(4.0, ratio(0.97, 0.9, 1.05), status="inconclusive")]
    return ContextComparison(context_tokens=8192, variants=variants, comparisons=[comparison(levels)])


def test_a_context_lengths_rows_go_by_level_with_the_variants_speedup_and_state():
    (section,) = contexts(view(summary({"base": [step(1.0)], "spec": [step(1.0)]}, contexts=[context()])))
    assert section["context"] == 8192
    assert [(r["level"], r["variant"]) for r in section["rows"]] == [
        ("1", "base"),
        ("1", "spec"),
        ("4", "base"),
        ("4", "spec"),
    ]
    spec_1, spec_4 = section["rows"][1], section["rows"][3]
    assert spec_1["speedup"] == {"value": "1.30x", "ci": f"1.20x{DASH}1.40x", "state": "better"}
    assert (spec_4["speedup"]["state"], spec_4["status"]) == ("unclear", "inconclusive")
    assert section["rows"][0]["speedup"] is None  # the baseline is not compared with itself


def test_a_run_without_the_experiments_has_none_of_their_sections():
    v = view(summary({"base": [step(1.0)]}))
    assert (contexts(v), sweeps(v), cost(v), images(v)) == ([], [], None, None)
    assert context_charts(v) == {}

"""The ladder and speed-up tables (``report.tables``) from hand-built summaries: badges on the levels that earned
them, a speed-up cell's state from its interval, the crossover row, and the prompt-cache flag on latency only."""

from locust_llm.analysis.documents.prompt_cache import LevelCache
from locust_llm.analysis.documents.summary import VariantFigures
from locust_llm.report.tables import SPEEDUP_METRICS, speedups, variant_tables
from tests.unit.report.documents import compared, comparison, ratio, step, summary, view


def test_badges_mark_saturation_knee_and_a_step_where_every_request_failed():
    steps = [step(1.0, 0), step(2.0, 1), step(4.0, 2, errors=50, error_rate=1.0)]
    doc = summary({"base": steps})
    doc.variants["base"] = VariantFigures(steps=steps, saturation_level=2.0, knee_level=1.0)
    (table,) = variant_tables(view(doc))
    marks = {row.level: [label for label, _cls, _why in row.marks] for row in table["rows"]}
    assert marks == {"1": ["knee"], "2": ["saturation"], "4": ["all failed"]}
    assert (table["saturation"], table["knee"]) == ("2", "1")


def test_a_speedup_cell_is_judged_by_its_interval_and_the_crossover_row_is_marked():
    levels = [
        compared(1.0, ratio(1.4, 1.2, 1.6)),
        compared(2.0, ratio(1.0, 0.9, 1.1)),
        compared(4.0, ratio(0.7, 0.6, 0.8)),
    ]
    doc = summary({"base": [], "spec": []}, [comparison(levels, crossover_level=4.0)])
    (table,) = speedups(view(doc))
    headline = [label for _key, label in SPEEDUP_METRICS].index("aggregate output tok/s")
    assert [row.cells[headline].state for row in table["rows"]] == ["better", "unclear", "worse"]
    assert [row.crossover for row in table["rows"]] == [False, False, True]
    assert all(row.cells[headline].headline for row in table["rows"])


def test_a_prompt_cache_flag_marks_the_latency_speedups_not_the_throughput():
    cache = LevelCache(baseline=0.0, variant=0.6, flag="the variant's prompts hit the cache")
    doc = summary({"base": [], "spec": []}, [comparison([compared(1.0, ratio(1.2, 1.1, 1.3), prompt_cache=cache)])])
    (row,) = speedups(view(doc))[0]["rows"]
    flags = {label: cell.flag for (key, label), cell in zip(SPEEDUP_METRICS, row.cells, strict=False)}
    assert flags["aggregate output tok/s"] is None and flags["decode tok/s (mean)"] is None
    assert flags["TTFT P95"] == flags["TPOT P50"] == cache.flag
    assert row.cache == "0.0% / 60.0%"

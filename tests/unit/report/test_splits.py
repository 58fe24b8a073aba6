"""Categories, reasoning and output positions in the report (``report.splits``) from hand-built documents: one
cell per category and level (empty where that pair was not measured), and the summary.md lines."""

from locust_llm.analysis.documents.splits import CategoryComparison, CategoryLevel
from locust_llm.report.splits import categories_section, split_lines
from tests.unit.report.documents import ratio, step, summary, view


def comparison() -> CategoryComparison:
    faster, slower = ratio(1.4, 1.3, 1.5), ratio(0.9, 0.8, 0.95)
    levels = [
        CategoryLevel(level=1.0, category="code", decode_tps_speedup=faster, tpot_p50_speedup=faster, output_share=0.5),
        CategoryLevel(level=1.0, category="chat", decode_tps_speedup=slower, tpot_p50_speedup=slower),
        CategoryLevel(level=4.0, category="code", decode_tps_speedup=slower, tpot_p50_speedup=faster),
    ]
    return CategoryComparison(
        baseline="base",
        variant="spec",
        basis="decode tok/s",
        categories=["code", "chat"],
        levels=levels,
        recommendations={"code": "enable up to 1", "chat": "leave off"},
        text="code gains, chat does not",
    )


def test_one_cell_per_category_and_level_empty_where_not_measured():
    doc = summary({"base": [step(1.0)], "spec": [step(1.0)]}, categories=[comparison()])
    (section,) = categories_section(view(doc))
    assert section["levels"] == ["1", "4"]
    code, chat = section["rows"]
    assert [c["decode"]["state"] for c in code["cells"]] == ["better", "worse"]
    assert code["cells"][0]["share"] == "50%" and code["advice"] == "enable up to 1"
    assert chat["cells"][1] is None  # chat was not measured at level 4


def test_the_lines_give_the_answer_then_each_categorys_advice_and_answerless_reasoning():
    reasoned = step(1.0, 3, reasoning={"requests": 20, "no_answer": 3})
    doc = summary({"base": [step(1.0)], "spec": [reasoned]}, categories=[comparison()])
    assert split_lines(doc) == [
        "categories (spec vs base): code gains, chat does not",
        "category code: enable up to 1",
        "category chat: leave off",
        "reasoning: spec at 1 (step 3): 3 of 20 requests gave no answer after reasoning",
    ]
    assert categories_section(view(summary({"base": [step(1.0)]}))) is None

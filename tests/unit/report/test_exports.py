"""``summary.md`` and ``steps.csv`` (``report.exports``) from hand-built summaries: what a contended step's line
says, that untrusted text cannot break the Markdown, and where the speed-ups land in the CSV rows."""

from locust_llm.analysis.documents.summary import Verdict
from locust_llm.fmt import DASH
from locust_llm.report.exports import markdown_table, step_rows, summary_markdown
from tests.synthetic import PAYLOAD
from tests.unit.report.documents import compared, comparison, ratio, step, summary, view

CONTENDED = "contended: foreign processes used 1.5 cores | 2 GPU processes"


def doc():
    base = [step(1.0, 0, output_tps=100.0), step(2.0, 1, output_tps=180.0)]
    spec = [
        step(1.0, 0, output_tps=150.0, output_tps_ci95=[140.0, 160.0]),
        step(2.0, 1, output_tps=170.0, status="contended", status_reasons=[CONTENDED], errors=5, error_rate=0.1),
    ]
    levels = [compared(1.0, ratio(1.5, 1.4, 1.6)), compared(2.0, ratio(0.94, 0.8, 1.1), status="contended")]
    return summary({"base": base, "spec": spec}, [comparison(levels)])


def table_lines(markdown: str, heading: str) -> list[str]:
    lines = markdown.splitlines()
    start = lines.index(heading)
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("|") and i > start + 2)
    return lines[start + 2 : end]


def cells(line: str) -> list[str]:
    """A table line's cells, split at the pipes Markdown reads as cell breaks (not the escaped ones)."""
    parts, cell, escaped = [], "", False
    for ch in line.strip()[1:-1]:
        if ch == "|" and not escaped:
            parts.append(cell.strip())
            cell = ""
        else:
            cell += ch
        escaped = ch == "\\" and not escaped
    return [*parts, cell.strip()]


def test_a_contended_step_says_so_with_its_reason_and_its_speedup():
    md = summary_markdown(view(doc()))
    header, rule, first, contended = table_lines(md, "### spec")
    names = cells(header)
    assert len(cells(rule)) == len(names)
    row = dict(zip(names, cells(contended), strict=True))  # as many cells as columns: the reason's | is escaped
    assert row["users"] == "2" and row["status"] == "contended"
    assert row["err"] == "5 (10.0%)"
    assert row["speed-up (95% CI)"] == f"0.94x (0.80{DASH}1.10)"
    assert row["notes"] == CONTENDED.replace("|", "\\|")
    assert dict(zip(names, cells(first), strict=True))["out tok/s (95% CI)"] == f"150 (140{DASH}160)"


def test_the_baseline_table_has_no_speedup_column():
    table = markdown_table(view(doc()), "base")
    assert table.baseline and "speed-up (95% CI)" not in table.header
    assert [r.speedup for r in table.rows] == [None, None]
    assert [r.level for r in table.rows] == ["1", "2"]


def test_untrusted_text_cannot_break_the_markdown():
    evil = f"{PAYLOAD} **bold** [link](http://x) | # | `code`"
    d = doc()
    d.variants[evil] = d.variants.pop("spec")
    d.comparisons[0].variant = evil
    d.comparisons[0].recommendation = evil
    md = summary_markdown(view(d, env={"run_id": evil}))
    assert "<script>" not in md and "**bold**" not in md and "[link](http" not in md and "`code`" not in md
    assert md.splitlines()[0].startswith("## LLM load test ")  # the heading is still one line
    assert f"### {evil}" not in md


def test_the_exit_code_line_says_when_every_gate_holds():
    assert "- Exit code 0 (every gate holds)" in summary_markdown(view(doc(), verdict=Verdict(exit_code=0)))
    md = summary_markdown(view(doc(), verdict=Verdict(exit_code=3)))
    assert "- Exit code 3" in md.splitlines() and "every gate holds" not in md


def test_csv_rows_carry_the_speedup_of_their_own_level():
    rows = step_rows(doc())
    assert [(r["variant"], r["level"]) for r in rows] == [("base", 1.0), ("base", 2.0), ("spec", 1.0), ("spec", 2.0)]
    base, spec = rows[:2], rows[2:]
    assert all("speedup_output_tps" not in r and "speedup_vs" not in r for r in base)
    assert [r["speedup_output_tps"] for r in spec] == [1.5, 0.94]
    assert (spec[1]["speedup_output_tps_ci95_lo"], spec[1]["speedup_output_tps_ci95_hi"]) == (0.8, 1.1)
    assert spec[1]["speedup_vs"] == "base"
    assert (spec[0]["output_tps_ci95_lo"], spec[0]["output_tps_ci95_hi"]) == (140.0, 160.0)

"""What a headless run and ``locust-llm compare`` print (``report.console``), from hand-built documents."""

from locust_llm.analysis.documents.regression import RegressionRow, RunComparison
from locust_llm.analysis.documents.summary import Verdict
from locust_llm.report.console import comparison_table, verdict_table
from tests.unit.report.documents import compared, comparison, ratio, step, summary


def test_the_verdict_table_has_a_line_per_step_then_the_comparison_and_the_reasons():
    doc = summary(
        {
            "base": [step(1.0, 0, output_tps=100.04, error_rate=0.0)],
            "spec": [step(1.0, 0, output_tps=150.0, status="contended", anomaly="throughput fell")],
        },
        [comparison([compared(1.0, ratio(1.5, 1.4, 1.6), status="contended")], crossover_level=None)],
        run_id="r1",
    )
    verdict = Verdict(exit_code=5, reasons={"5": ["no step clean"]})
    lines = verdict_table(doc, verdict).splitlines()
    assert lines[0] == "locust-llm verdict for run r1: exit code 5"
    base, spec = (next(line for line in lines if line.startswith(name + " ")) for name in ("base", "spec"))
    assert base.split()[-2:] == ["100.0", "clean"]  # output tok/s to one decimal, then the status
    assert base.split()[4] == "0.0"  # err%
    assert spec.endswith("contended (anomaly)")
    assert "spec vs base (levels: 1 contended): crossover none; enable it" in lines
    assert lines[-1] == "[exit 5] no step clean"


def test_the_comparison_table_marks_the_regressions_and_counts_them():
    slower = RegressionRow(variant="spec", level=2.0, metric="output_tps", ratio=0.8, ci95=[0.7, 0.9], change="-20%")
    unmeasured = RegressionRow(variant="spec", level=4.0, metric="output_tps", change="not measured")
    doc = RunComparison(old="a", new="b", max_regression_pct=5.0, rows=[slower, unmeasured], regressions=[slower])
    lines = comparison_table(doc).splitlines()
    assert lines[0].startswith("compare a -> b") and "by more than 5%" in lines[0]
    row = next(line for line in lines if " 2 " in line)
    assert row.endswith("-20%  REGRESSION") and "0.800" in row and "[0.700, 0.900]" in row
    row = next(line for line in lines if " 4 " in line)
    assert "REGRESSION" not in row and row.split()[3:5] == ["-", "-"]
    assert lines[-1] == "1 regression(s)"

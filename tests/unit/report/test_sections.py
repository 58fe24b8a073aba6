"""The report's text sections (``report.sections``) from hand-built documents: the gates box, the comparison with
an earlier run, and the run's events on the run's own clock."""

from locust_llm.analysis.documents.regression import RegressionRow, RunComparison
from locust_llm.analysis.documents.summary import GateCheck, Verdict
from locust_llm.analysis.gates import EXIT_MEANINGS
from locust_llm.analysis.timeline import Timeline
from locust_llm.report import ReportInput, RunView
from locust_llm.report.sections import LOG_TAIL_MAX, gates, regression, run_events
from locust_llm.rundir.env import RunEnv
from locust_llm.rundir.events import OtherEvent
from tests.unit.report.documents import step, summary, view

T0 = 1_700_000_000.0


def test_the_gates_box_lists_only_the_failed_checks():
    checks = [
        GateCheck(gate="ttft_p99_ms", variant="spec", level=4.0, value=812.5, limit=500.0, ok=False),
        GateCheck(gate="ttft_p99_ms", variant="spec", level=1.0, value=120.0, limit=500.0, ok=True),
    ]
    verdict = Verdict(exit_code=3, reasons={"3": ["spec @ 4: ttft_p99_ms 812.5 > 500"]}, checks=checks)
    box = gates(view(summary({"spec": [step(1.0)]}), verdict=verdict))
    assert not box["ok"] and box["code"] == 3 and box["meaning"] == EXIT_MEANINGS[3]
    assert box["checked"] == 2
    assert box["failed"] == [{"gate": "ttft_p99_ms", "variant": "spec", "level": "4", "value": "812", "limit": "500"}]
    assert box["reasons"] == ["[3] spec @ 4: ttft_p99_ms 812.5 > 500"]
    assert gates(view(summary({"spec": [step(1.0)]}))) is None  # no verdict yet: no box


def test_a_regression_row_is_flagged_only_when_the_comparison_lists_it():
    slower = RegressionRow(variant="spec", level=2.0, metric="output_tps", ratio=0.8, ci95=[0.7, 0.9], change="-20%")
    same = RegressionRow(variant="spec", level=1.0, metric="output_tps", ratio=1.0, ci95=[0.9, 1.1], change="0%")
    doc = RunComparison(old="run-a", new="run-b", max_regression_pct=5.0, rows=[same, slower], regressions=[slower])
    inp = ReportInput(summary({"spec": [step(1.0)]}), RunEnv(), Timeline(None), regression=doc)
    section = regression(RunView(inp))
    assert [(r["level"], r["regression"]) for r in section["rows"]] == [("1", False), ("2", True)]
    assert section["regressions"] == 1 and section["threshold"] == "5"


def test_events_are_timed_from_the_run_start_and_a_long_log_tail_is_cut():
    doc = summary({"spec": [step(1.0)]})
    # As another release wrote it (with the exit code): listed with every field it has.
    doc.events.append(
        OtherEvent(kind="server_exited", t=T0 + 12.5, variant="spec", code=137, log_tail="x" * (3 * LOG_TAIL_MAX))
    )
    section = run_events(RunView(ReportInput(doc, RunEnv(), Timeline(T0))))
    (event,) = section["events"]
    assert (event["t"], event["kind"], event["variant"]) == ("+12.5 s", "server_exited", "spec")
    assert event["details"] == "code: 137"
    assert LOG_TAIL_MAX <= len(event["log_tail"]) < 2 * LOG_TAIL_MAX

"""The probes in the report (``report.probes``) from hand-built probe rows: durations in the unit people read, a
fault's sentence with the requests it hit and its neighbours, and which probes the console and summary.md list."""

from locust_llm.analysis.documents.probes import FaultFigures, ProbeRow, ProbeSummary, StepLatency
from locust_llm.analysis.errors import MESSAGE_MAX
from locust_llm.report.probes import fault_text, probe_lines, probes_section, seconds
from tests.unit.report.documents import step, summary, view


def row(probe: str, verdict: str, **fields) -> ProbeRow:
    return ProbeRow(variant="spec", probe=probe, sent="POST", expected="400", verdict=verdict, **fields)


def fault() -> ProbeRow:
    figures = FaultFigures(
        step=StepLatency(step=3, level=4.0, status="fault-injected", ttft_p99_ms=2500.0, e2e_p99_ms=9000.0),
        in_flight=6,
        in_flight_failed=2,
        in_flight_e2e_max_ms=12_000.0,
        neighbours=[StepLatency(step=2, level=4.0, status="clean", ttft_p99_ms=80.0, e2e_p99_ms=900.0)],
    )
    return row(
        "sigstop", "ok", kind="fault", step=3, level=4.0, answer="stopped 5 s", recover_ms=350.0, figures=figures
    )


def test_durations_are_ms_below_a_second_and_seconds_above():
    assert (seconds(999.0), seconds(1500.0), seconds(None)) == ("999 ms", "1.5 s", None)


def test_a_fault_sentence_says_what_it_hit_and_when_the_server_answered_again():
    text = fault_text(fault())
    assert text.startswith("sigstop of spec in step 3 (level 4): stopped 5 s")
    assert "6 requests in flight (2 failed), the longest 12 s end to end" in text
    assert "the step's TTFT / E2E P99 2.5 s / 9 s vs 80 ms / 900 ms (step 2) next to it" in text
    assert text.endswith("answering again 350 ms after it ended")


def test_the_lines_list_every_fault_and_only_the_probes_that_were_not_ok():
    rows = [row("bad-json", "ok"), row("huge-prompt", "unexpected", answer="200", note="x" * 5000), fault()]
    doc = summary({"spec": [step(1.0)]}, probes=ProbeSummary(rows=rows, text="3 probes"))
    lines = probe_lines(doc)
    assert lines[0] == "probes: 3 probes" and len(lines) == 3
    assert lines[1].startswith("probe huge-prompt on spec: unexpected (200; x") and len(lines[1]) < MESSAGE_MAX + 100
    assert lines[2].startswith("fault: sigstop")
    section = probes_section(view(doc))
    assert [r["cls"] for r in section["rows"]] == ["ok", "warn", "ok"]
    assert [f["probe"] for f in section["faults"]] == ["sigstop"]

"""The probe table and injected faults through the whole pipeline, on a run built by hand with known answers: the
paused step is fault-injected (no verdict, no SLO gate), the requests it held are found with the time they lost,
and a server's error message reaches the report escaped."""

import json

import pytest

from locust_llm.pipeline import finish_run
from locust_llm.rundir import layout
from tests.synthetic import PAYLOAD, stream_record, window, write_run

START = 1_700_000_000.0
E2E_S, TTFT_S, TOKENS = 0.5, 0.05, 20
PAUSE = (START + 40 + 10.1, START + 40 + 15.1)  # in baseline step 1's window [START + 40, START + 60)


def user_requests(variant: str, step: int, level: float, start: float, user: int, pause=None) -> list[dict]:
    """Back-to-back requests of ``E2E_S`` each; the one in flight when a pause begins waits it out."""
    rows, send, k = [], start + 0.25 * user, 0
    while send + E2E_S <= start + 20:
        tpot = (E2E_S - TTFT_S) / (TOKENS - 1)
        if pause is not None and send < pause[0] < send + E2E_S:
            tpot += (pause[1] - pause[0]) / (TOKENS - 1)  # its tokens after the first are late by the pause
        rows.append(
            stream_record(
                "p",
                variant,
                level,
                step,
                send,
                TTFT_S,
                tpot,
                TOKENS,
                worker=user,
                user=0,
                seq=user * 1000 + k,
                request_id=f"{variant}-{step}-{user}-{k}",
            )
        )
        send, k = rows[-1]["t_done"], k + 1
    return rows


@pytest.fixture
def run(tmp_path):
    rows, steps = [], []
    for i, (variant, step, level) in enumerate(
        (("baseline", 0, 1), ("baseline", 1, 2), ("spec", 0, 1), ("spec", 1, 2))
    ):
        start = START + 20 * 2 * i
        paused = PAUSE if (variant, step) == ("baseline", 1) else None
        for user in range(level):
            rows += user_requests(variant, step, level, start, user, paused)
        steps.append(window(variant, step, level, start, 20.0))
        if paused:
            steps[-1]["faults"] = [{"kind": "pause", "t_start": PAUSE[0], "t_end": PAUSE[1], "pause_s": 5.0}]
    write_run(tmp_path, rows, steps, gates={"tpot_p99_ms": 100.0})
    probes = [
        {
            "variant": "baseline",
            "probe": "pause",
            "kind": "fault",
            "sent": "SIGSTOP",
            "expected": "waits",
            "answer": "paused 5.00 s",
            "latency_ms": 5000.0,
            "recovered": True,
            "recover_ms": 12.0,
            "verdict": "ok",
            "t_start": PAUSE[0],
            "t_end": PAUSE[1],
            "step": 1,
            "level": 2.0,
        },
        {
            "variant": "spec",
            "probe": "invalid_utf8",
            "sent": "bytes",
            "expected": "a 4xx",
            "status": 500,
            "answer": "HTTP 500",
            "error": PAYLOAD,
            "latency_ms": 3.0,
            "recovered": True,
            "recover_ms": 4.0,
            "verdict": "unexpected",
            "t_start": START + 200,
            "t_end": START + 200.01,
        },
    ]
    layout.write_json(tmp_path / layout.PROBES, {"probes": probes})
    return tmp_path


def test_the_paused_step_is_fault_injected_and_its_held_requests_are_found(run):
    outcome = finish_run(run)
    baseline = outcome.summary.variants["baseline"].steps
    assert [s.status for s in baseline] == ["clean", "fault-injected"]
    # The fault comes first; the 5 s hole in its throughput may be named after it (every reason that applies).
    assert baseline[1].status_reasons[0] == (
        "fault-injected: server paused for 5.0 s (SIGSTOP, then SIGCONT) in the steady window"
    )
    # The held requests' TPOT is ~13 times the gate's 100 ms, but a fault injected on purpose is not judged.
    assert baseline[1].tpot_all_ms.p99 > 250
    assert outcome.verdict.exit_code == 0, outcome.verdict.reasons
    assert {(c.variant, c.level) for c in outcome.verdict.checks} == {("baseline", 1.0), ("spec", 1.0), ("spec", 2.0)}
    level_2 = next(s for s in outcome.summary.comparisons[0].steps if s.level == 2)
    assert level_2.status != "clean" and level_2.output_tps_speedup.value is None
    fault = outcome.summary.probes.rows[0]
    figures = fault.figures
    assert figures.in_flight == 2 and figures.in_flight_failed == 0  # one request of each of the two users
    assert figures.in_flight_e2e_max_ms == pytest.approx(1e3 * (E2E_S + 5.0), abs=2)
    assert figures.in_flight_ttft_max_ms == pytest.approx(1e3 * TTFT_S, abs=1)  # both had their first token
    assert figures.step.step == 1 and figures.step.status == "fault-injected"
    assert [n.step for n in figures.neighbours] == [0]
    assert outcome.summary.probes.counts == {"ok": 1, "unexpected": 1, "server-failed": 0, "not-run": 0}
    assert "fault: pause of baseline in step 1 (level 2)" in outcome.text
    assert "probe invalid_utf8 on spec: unexpected (HTTP 500)" in outcome.text


def test_a_servers_error_message_reaches_the_report_escaped(run):
    finish_run(run)
    html = (run / layout.REPORT).read_text()
    assert PAYLOAD not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'id="probes"' in html and "invalid_utf8" in html and "unexpected" in html
    summary = json.loads((run / layout.SUMMARY).read_text())
    assert summary["probes"]["rows"][1]["error"] == PAYLOAD  # the data keeps the server's words
    markdown = (run / layout.SUMMARY_MD).read_text()
    assert "<script>" not in markdown and "fault: pause of baseline" in markdown


def test_without_probes_nothing_about_them_appears(run):
    (run / layout.PROBES).unlink()
    outcome = finish_run(run)
    assert outcome.summary.probes is None and "\nprobes: " not in outcome.text
    assert 'id="probes"' not in (run / layout.REPORT).read_text()

"""A load process lost mid-step: its step is marked ``worker-lost`` and left out of every verdict (speed-ups, the
recommendation, SLO gates); with ``load.on_worker_loss: stop`` the run exits 5 saying what was lost.

The run is built by hand (tests/synthetic.py) with a known answer and goes through the whole pipeline.
"""

import json

import numpy as np

from locust_llm.analysis.gates import EXIT_INVALID, EXIT_OK
from locust_llm.pipeline import finish_run
from tests.synthetic import back_to_back, window, write_run

START = 1_700_000_000.0
TPOT_S = {"baseline": 0.015, "spec": 0.010}
LOST_TPOT_S = 0.080  # what the lost step's requests saw: far beyond the TPOT gate, had it been judged


def two_levels(path, event: dict):
    """Levels 1 and 2 of baseline and spec, 20 s windows; spec's level 2 lost worker 1 (and its requests were
    slow). The TPOT gate is 50 ms."""
    rng = np.random.default_rng(7)
    rows, steps, t = [], [], START
    for variant in ("baseline", "spec"):
        for step, level in enumerate((1, 2)):
            lost = variant == "spec" and level == 2
            for stream in range(level):
                rows += back_to_back(
                    "lost",
                    variant,
                    level,
                    step,
                    t,
                    20.0,
                    0.02,
                    LOST_TPOT_S if lost else TPOT_S[variant],
                    20,
                    rng,
                    stream=stream,
                )
            steps.append({**window(variant, step, level, t, 20.0), **({"workers_lost": [1]} if lost else {})})
            t += 30.0
    run = write_run(path, rows, steps, gates={"tpot_p99_ms": 50.0})
    (run / "steps.json").write_text(json.dumps({"steps": steps, "events": [{"t": START + 100, **event}]}))
    return run


def lost_event(stopped: bool) -> dict:
    return {
        "kind": "worker_lost",
        "worker": 1,
        "client_id": "w1",
        "variant": "spec",
        "step": 1,
        "level": 2.0,
        "records_sent": 37,
        "records_received": 37,
        "requests_lost": 2,
        "stopped": stopped,
    }


def test_a_step_that_lost_a_worker_is_shown_and_judged_by_nothing(tmp_path):
    outcome = finish_run(two_levels(tmp_path, lost_event(stopped=False)))
    spec = {s.level: s for s in outcome.summary.variants["spec"].steps}
    assert spec[1].status == "clean" and spec[2].status == "worker-lost" and spec[2].workers_lost == [1]
    assert spec[2].status_reasons == ["worker-lost: load process(es) 1 lost during the step: the level was not held"]
    assert spec[2].tpot_all_ms.p99 > 70  # measured, and shown as it was ...
    by_level = {s.level: s for s in outcome.summary.comparisons[0].steps}
    assert by_level[1].status == "clean" and by_level[1].output_tps_speedup.value is not None
    assert by_level[2].status == "worker-lost" and by_level[2].output_tps_speedup.value is None  # ... not compared
    assert "not judged: 2 (worker-lost)" in outcome.summary.comparisons[0].recommendation
    # the SLO gate judged the three other steps only: the lost step's 80 ms TPOT fails nothing
    judged = {(c.variant, c.level) for c in outcome.verdict.checks}
    assert judged == {("baseline", 1.0), ("baseline", 2.0), ("spec", 1.0)}
    assert outcome.verdict.exit_code == EXIT_OK


def test_a_run_stopped_by_a_lost_worker_exits_5_saying_what_was_lost(tmp_path):
    outcome = finish_run(two_levels(tmp_path, lost_event(stopped=True)))
    assert outcome.verdict.exit_code == EXIT_INVALID
    assert outcome.verdict.reasons[str(EXIT_INVALID)] == [
        "load process 1 lost during spec step 1 (it had sent 37 records; 2 requests in flight or not yet shipped are "
        "lost): the run stopped (load.on_worker_loss: stop)"
    ]

"""What a verdict rests on: contended, insufficient, unsteady and inconsistent levels never drive it.

Each run is built by hand (tests/synthetic.py) with a known answer and goes through the whole pipeline.
"""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from locust_llm.analysis.gates import EXIT_INVALID
from locust_llm.host.scan import HOST_SCHEMA
from locust_llm.pipeline import finish_run
from locust_llm.records import RequestRecord
from locust_llm.rundir import layout
from locust_llm.runtime.recorder import CLIENT_SCHEMA
from tests.synthetic import stream_record, window, write_run

START = 1_700_000_000.0
TOKENS = 20


def closed_step(rows, steps, variant, step, level, start, length, e2e_s, users=None):
    """``users`` streams back to back for ``length`` seconds, each request taking ``e2e_s``."""
    tpot = (e2e_s - 0.05) / (TOKENS - 1)
    for user in range(users or int(level)):
        send, k = start + user * e2e_s / max(level, 1), 0
        while send + e2e_s <= start + length:
            rows.append(
                stream_record(
                    "s",
                    variant,
                    level,
                    step,
                    send,
                    0.05,
                    tpot,
                    TOKENS,
                    worker=0,
                    user=user,
                    seq=user * 1000 + k,
                    request_id=f"{variant}-{step}-{user}-{k}",
                )
            )
            send, k = send + e2e_s, k + 1
    steps.append(window(variant, step, level, start, length))


def write_host(run, busy: list[tuple[float, float]], cores: float = 1.0, until: float = START + 1000):
    """One sample a second; ``cores`` of a foreign 'burner' inside each ``(start, end)`` of ``busy``."""
    rows = []
    t = START - 5
    while t < until:
        t += 1.0
        hot = any(a < t <= b for a, b in busy)
        rows.append(
            {
                "t": t,
                "interval_s": 1.0,
                "busy_cores": 1.5 + (cores if hot else 0.0),
                "own_cores": 1.5,
                "foreign_cores": cores if hot else 0.01,
                "steal_cores": 0.0,
                "foreign_gpu_processes": 0,
                "top_foreign": json.dumps([{"pid": 4242, "name": "burner", "cores": cores}] if hot else []),
            }
        )
    layout.write_parquet(run / layout.HOST, pa.Table.from_pylist(rows, schema=HOST_SCHEMA))


def three_levels(tmp_path, busy_baseline_level: float | None = 2.0, slow_baseline_level: float | None = 4.0):
    """Levels 1, 2, 4; spec is 1.5x faster everywhere. Optionally the baseline's level 2 ran next to a foreign
    process burning a core, and its level 4 requests took 9 s each in a 20 s window (users staggered by 2.25 s:
    2 + 1 + 1 + 1 = 5 requests end inside it)."""
    rows, steps, t, busy = [], [], START, []
    for variant, speed in (("baseline", 1.0), ("spec", 1.5)):
        for step, level in enumerate((1, 2, 4)):
            e2e = 0.5 / speed
            if variant == "baseline" and level == slow_baseline_level:
                e2e = 9.0
            closed_step(rows, steps, variant, step, level, t, 20.0, e2e)
            if variant == "baseline" and level == busy_baseline_level:
                busy.append((t, t + 20.0))
            t += 30.0
    run = write_run(tmp_path, rows, steps)
    write_host(run, busy)
    return run


def test_contended_and_insufficient_levels_are_marked_and_never_drive_the_recommendation(tmp_path):
    outcome = finish_run(three_levels(tmp_path))
    base = {s.level: s for s in outcome.summary.variants["baseline"].steps}
    assert base[1].status == "clean" and base[1].host.foreign_cores == pytest.approx(0.01)
    assert base[2].status == "contended"
    assert "burner (pid 4242) 1.00" in base[2].status_reasons[0] and base[2].host.top_foreign[0].name == "burner"
    assert base[4].status == "insufficient"
    assert "requests took 9.0 s each, so the 20 s window saw 5 completed requests" in base[4].status_reasons[0]
    comp = outcome.summary.comparisons[0]
    by_level = {s.level: s for s in comp.steps}
    assert by_level[1].status == "clean" and by_level[1].output_tps_speedup.value == pytest.approx(1.5, rel=0.05)
    assert by_level[2].status == "contended" and by_level[2].output_tps_speedup.value is None
    assert by_level[4].status == "insufficient" and by_level[4].excluded
    # only level 1 was clean: the recommendation names it alone, and says what was not judged
    assert comp.recommendation.startswith("enable spec at every level judged, up to 1 ")
    assert "not judged: 2 (contended), 4 (insufficient)" in comp.recommendation
    assert outcome.verdict.exit_code == 0
    assert "1 clean, 2 contended, 4 insufficient" in outcome.text


def test_no_clean_level_exits_invalid_naming_the_busy_host(tmp_path):
    rows, steps = [], []
    for i, variant in enumerate(("baseline", "spec")):
        closed_step(rows, steps, variant, 0, 1, START + 30 * i, 20.0, 0.5)
    run = write_run(tmp_path, rows, steps)
    write_host(run, [(START, START + 20.0)], cores=0.6)
    outcome = finish_run(run)
    assert outcome.verdict.exit_code == EXIT_INVALID
    (reason,) = outcome.verdict.reasons[str(EXIT_INVALID)]
    assert "no level of spec vs baseline was measured cleanly" in reason and "burner (pid 4242)" in reason
    assert "no verdict on spec" in outcome.summary.comparisons[0].recommendation


def test_below_the_threshold_a_busy_host_is_still_clean(tmp_path):
    rows, steps = [], []
    for i, variant in enumerate(("baseline", "spec")):
        closed_step(rows, steps, variant, 0, 1, START + 30 * i, 20.0, 0.5)
    run = write_run(tmp_path, rows, steps)
    write_host(run, [(START, START + 20.0)], cores=0.2)  # the default limit is a quarter of a core
    assert finish_run(run).summary.comparisons[0].steps[0].status == "clean"


def test_blocks_that_disagree_make_the_level_inconclusive_not_faster(tmp_path):
    """ABBA: spec is 2x faster in block 0 and 0.7x in block 1, far beyond the noise of 20 s each."""
    rows, steps, t = [], [], START
    for step, order in ((0, (("baseline", 0.5), ("spec", 0.25))), (1, (("spec", 0.7), ("baseline", 0.5)))):
        for variant, e2e in order:
            closed_step(rows, steps, variant, step, 2, t, 20.0, e2e)
            t += 30.0
    outcome = finish_run(write_run(tmp_path, rows, steps))
    (level,) = outcome.summary.comparisons[0].steps
    assert level.output_tps_speedup.blocks == 2 and level.output_tps_speedup.blocks_agree is False
    assert level.status == "inconclusive"
    assert not outcome.summary.comparisons[0].recommendation.startswith("enable")


def test_a_throughput_collapse_is_flagged_as_an_anomaly(tmp_path):
    rows, steps = [], []
    closed_step(rows, steps, "baseline", 0, 1, START, 20.0, 0.5)
    closed_step(rows, steps, "baseline", 1, 4, START + 30, 20.0, 0.5, users=1)  # 4 users, yet only one sends
    outcome = finish_run(write_run(tmp_path, rows, steps))
    low, high = outcome.summary.variants["baseline"].steps
    assert low.anomaly is None
    assert high.anomaly is None  # the same throughput at a higher level is saturation, not an anomaly
    rows2, steps2 = [], []
    closed_step(rows2, steps2, "baseline", 0, 1, START, 20.0, 0.5)
    closed_step(rows2, steps2, "baseline", 1, 2, START + 30, 20.0, 3.0, users=1)
    (tmp_path / "b").mkdir()
    high = finish_run(write_run(tmp_path / "b", rows2, steps2)).summary.variants["baseline"].steps[1]
    assert high.anomaly and "more than half" in high.anomaly


def abba_with_a_busy_last_block(tmp_path, e2e: tuple[float, float, float, float]):
    """ABBA at level 1 (baseline, spec, spec, baseline), each block's requests taking ``e2e`` seconds; the last block
    (the baseline's second) ran beside a burner."""
    rows, steps, t = [], [], START
    for (variant, step), seconds in zip((("baseline", 0), ("spec", 0), ("spec", 2), ("baseline", 2)), e2e, strict=True):
        busy = [(t, t + 20.0)]
        closed_step(rows, steps, variant, step, 1, t, 20.0, seconds)
        t += 30.0
    run = write_run(tmp_path, rows, steps)
    write_host(run, busy)
    return finish_run(run)


def test_a_level_with_a_short_block_and_a_busy_block_names_the_busy_host(tmp_path):
    """ABBA at level 1: the baseline's first block is too short (9 s requests), its second ran beside a burner;
    the level's status and the exit-5 reason name the more serious one, the busy host, with its process."""
    outcome = abba_with_a_busy_last_block(tmp_path, (9.0, 0.3, 0.3, 0.5))
    assert [s.status for s in outcome.summary.variants["baseline"].steps] == ["insufficient", "contended"]
    (level,) = outcome.summary.comparisons[0].steps
    assert level.status == "contended"
    assert "burner (pid 4242)" in level.excluded[0]
    assert outcome.verdict.exit_code == EXIT_INVALID
    (reason,) = outcome.verdict.reasons[str(EXIT_INVALID)]
    assert "burner (pid 4242)" in reason


def test_a_window_where_nothing_completed_says_what_was_sent_and_what_ran_out():
    from locust_llm.analysis.status import step_status
    from locust_llm.rundir.env import RecordedLoad

    status, (reason,) = step_status(
        {"window_s": 20.0, "requests": 4, "errors": 4, "output_tokens": 0, "extended_s": 10.0},
        None,
        RecordedLoad(max_extend_s=10.0),
    )
    assert status == "insufficient"
    assert "none of the 4 requests sent in the 20 s window (extended by 10 s) completed (4 failed)" in reason
    assert reason.endswith("the extension ran out: make the step longer or raise load.max_extend_s")
    _, (unextended,) = step_status(
        {"window_s": 20.0, "requests": 30, "errors": 0, "output_tokens": 50, "e2e_ms": {"p50": 400.0}},
        None,
        RecordedLoad(max_extend_s=0.0),
    )
    assert "saw 30 completed requests and 50 output tokens (at least 20 and 100 needed)" in unextended
    assert unextended.endswith("allow load.max_extend_s")


def test_a_step_with_suspect_counts_is_flagged_and_its_counts_never_reach_the_throughput(tmp_path):
    """Level 2: every tenth request claims 5000 tokens for its 20 chunks (suspect_usage). The step is marked, its
    throughput is the honest requests' alone (level 1's, doubled), and the claimed tokens are nowhere."""
    rows, steps = [], []
    closed_step(rows, steps, "baseline", 0, 1, START, 20.0, 0.5)
    closed_step(rows, steps, "baseline", 1, 2, START + 30, 20.0, 0.5)
    liars = [r for r in rows if r["step"] == 1][::10]
    for row in liars:
        row.update(
            output_tokens=5000,
            chunk_tokens=[1] * (TOKENS - 1) + [5000 - TOKENS + 1],
            error_class="suspect_usage",
            error_message="suspect usage: usage.completion_tokens 5000 (usage_deltas) is above max_tokens 20",
        )
    outcome = finish_run(write_run(tmp_path, rows, steps))
    one, two = outcome.summary.variants["baseline"].steps
    assert one.status == "clean" and one.suspect_usage == 0
    assert two.status == "suspect-usage" and two.suspect_usage == len(liars) > 0
    assert two.status_reasons[0].startswith(f"suspect-usage: {len(liars)} request(s) whose server token counts")
    honest = (two.requests - len(liars)) / two.requests
    assert two.output_tps == pytest.approx(2 * one.output_tps * honest, rel=0.1)  # not 5000 tokens a request
    assert outcome.verdict.exit_code == 3  # a suspect request is a failed one: the error-rate gate says so
    assert any("error_rate" in reason for reason in outcome.verdict.reasons["3"])


def test_a_step_of_instant_refusals_says_the_server_refused_not_that_the_client_was_the_bottleneck(tmp_path):
    """Most requests of the step failed 1 ms after their connection began (an HTTP 503 at once), with the client's
    CPU pegged by them: the step is failed-fast, and the client is not blamed."""
    rows, steps = [], []
    closed_step(rows, steps, "baseline", 0, 1, START, 20.0, 0.5)
    for k in range(200):
        t = START + 0.1 * k
        rows.append(
            RequestRecord(
                run_id="s",
                variant="baseline",
                level=1.0,
                step=0,
                phase="steady",
                seq=10_000 + k,
                request_id=f"refused-{k}",
                t_connect=t,
                t_send=t + 0.0002,
                t_done=t + 0.001,
                http_status=503,
                error_class="http_error",
                error_message="HTTP 503: overloaded",
            ).to_dict()
        )
    run = write_run(tmp_path, rows, steps)
    busy = {"worker": 0, "cpu_percent": 100.0, "loop_lag_ms_max": 5.0, "loop_lag_ms_mean": 1.0}
    samples = [{**busy, "t": START + second} for second in range(21)]
    layout.write_parquet(run / layout.CLIENT, pa.Table.from_pylist(samples, schema=CLIENT_SCHEMA))
    (step,) = finish_run(run).summary.variants["baseline"].steps
    assert step.failed_fast == 200 and step.client_valid is False
    assert step.status == "failed-fast"
    assert step.status_reasons[0].startswith("failed-fast: the server refused or failed fast: 200 of")
    assert not any("client was the bottleneck" in reason for reason in step.status_reasons)


def test_a_usage_check_made_after_its_record_was_sent_amends_the_run(tmp_path):
    """The run's usage_suspect event names two requests a tokenizer found suspect once they had been sent: the
    analysis reads them as suspect_usage failures; requests.parquet keeps what the server said."""
    rows, steps = [], []
    closed_step(rows, steps, "baseline", 0, 1, START, 20.0, 0.5)
    run = write_run(tmp_path, rows, steps)
    named = {rows[3]["request_id"]: "suspect usage: the server counts 8 ...", rows[7]["request_id"]: "suspect ..."}
    (run / "steps.json").write_text(
        json.dumps({"steps": steps, "events": [{"kind": "usage_suspect", "t": START + 30, "requests": named}]})
    )
    (step,) = finish_run(run).summary.variants["baseline"].steps
    assert step.suspect_usage == 2 and step.errors == 2 and step.status == "suspect-usage"
    assert step.errors_by_class == {"suspect_usage": 2}
    assert pq.read_table(run / "requests.parquet").column("error_class").null_count == len(rows)


def test_a_level_judged_on_one_of_its_two_pairs_says_so_in_its_verdict(tmp_path):
    """ABBA at level 1, the baseline's second block beside a burner: the level is judged on its first pair alone,
    1.5x faster, and every place that gives the level's verdict says it rests on 1 of 2 pairs."""
    outcome = abba_with_a_busy_last_block(tmp_path, (0.45, 0.3, 0.3, 0.45))
    (level,) = outcome.summary.comparisons[0].steps
    assert level.status == "clean" and level.output_tps_speedup.value == pytest.approx(1.5, rel=0.05)
    assert level.output_tps_speedup.blocks == 1 and level.output_tps_speedup.pairs_planned == 2
    assert level.pairs_note == "1 of 2 pairs: period effect not balanced"
    assert "- Levels: 1 clean 1.50x (1 of 2 pairs: period effect not balanced)" in (tmp_path / "summary.md").read_text()
    assert "1 clean (1 of 2 pairs: period effect not balanced)" in outcome.text

"""Exit codes the post-run pipeline gives on its own: a run that measured no variant, the default error-rate gate,
and a ladder run killed before its merge, analysed later by ``locust-llm report``."""

import json
import math
import socket
import subprocess
import sys
import time

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from locust_llm.pipeline import finish_run
from locust_llm.records import RequestRecord
from tests.synthetic import back_to_back, synthetic_run, window, write_run


def test_a_run_that_measured_no_variant_is_invalid(tmp_path):
    # Every variant skipped, or the run stopped before its first step: nothing to judge is not a pass.
    (tmp_path / "steps.json").write_text(json.dumps({"steps": [], "events": []}))
    (tmp_path / "env.json").write_text(json.dumps({"run_id": "none", "baseline": "baseline"}))
    verdict = finish_run(tmp_path).verdict
    assert verdict.exit_code == 5 and verdict.reasons == {"5": ["no variant was measured"]}


def failing_run(path, failed_share: float, gates: dict):
    """One steady window of back-to-back successes, plus failures making ``failed_share`` of its requests."""
    rows = back_to_back("e", "baseline", 1, 0, 1000.0, 20.0, 0.02, 0.01, 20, np.random.default_rng(0))
    failures = round(len(rows) * failed_share / (1 - failed_share))
    rows += [
        RequestRecord(
            run_id="e",
            variant="baseline",
            level=1,
            step=0,
            phase="steady",
            request_id=f"f{i}",
            t_send=1000.0 + 0.1 * i,
            error_class="http_error",
            http_status=500,
        ).to_dict()
        for i in range(failures)
    ]
    path.mkdir()
    return write_run(path, rows, [window("baseline", 0, 1, 1000.0, 20.0)], gates=gates)


def test_the_default_error_rate_gate_fails_a_run_with_many_failures(tmp_path):
    # No gate set anywhere: 5% holds by default, so 10% failures fail the run (exit 3), 2% do not, and a scenario
    # that turns the gate off (error_rate: null) passes the same run.
    verdict = finish_run(failing_run(tmp_path / "ten", 0.10, {})).verdict
    assert verdict.exit_code == 3 and "error_rate" in verdict.reasons["3"][0] and "> 0.05" in verdict.reasons["3"][0]
    assert finish_run(failing_run(tmp_path / "two", 0.02, {})).verdict.exit_code == 0
    assert finish_run(failing_run(tmp_path / "off", 0.10, {"error_rate": None})).verdict.exit_code == 0


def test_report_reads_a_killed_ladder_run_from_its_part_files(tmp_path):
    # Killed during the last step of the ladder: the part files were never merged, and steps.json is as written
    # when that step's window opened (no t_end yet).
    run = tmp_path / "killed"
    run.mkdir()
    synthetic_run(run, np.random.default_rng(7))
    steps = json.loads((run / "steps.json").read_text())
    last = steps["steps"][-1]
    last["t_end"] = math.nan
    (run / "steps.json").write_text(json.dumps(steps))
    table = pq.read_table(run / "requests.parquet")
    (run / "requests.parquet").unlink()
    recorded = table.filter(pc.less(table.column("t_send"), last["t_steady"] + 5.0))  # nothing after the kill
    (run / "requests.parts").mkdir()
    for i, start in enumerate(range(0, recorded.num_rows, 300)):
        pq.write_table(recorded.slice(start, 300), run / "requests.parts" / f"part-{i + 1:06d}.parquet")
    done = subprocess.run(
        [sys.executable, "-m", "locust_llm.cli", "report", str(run)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 7 and "verdict: exit code 7" in done.stdout, done.stdout + done.stderr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["records"] == recorded.num_rows
    frame = recorded.to_pandas()
    steady = frame[frame["phase"] == "steady"].groupby(["variant", "step"]).size().to_dict()
    reported = {(name, s["step"]): s["requests"] for name, entry in summary["variants"].items() for s in entry["steps"]}
    assert reported == steady and len(reported) == 8  # every step of both variants, the unfinished one too
    (event,) = [e for e in summary["events"] if e["kind"] == "unfinished"]
    assert event["variant"] == last["variant"] and event["steps"] == [last["step"]]


def report_cli(run) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "locust_llm.cli", "report", str(run)], capture_output=True, text=True, timeout=300
    )


def test_report_on_a_run_still_being_written_says_so_and_exits_7(tmp_path):
    """Another live process holds the run's lock: nothing is recomputed under it; once it is gone, it is."""
    synthetic_run(tmp_path, np.random.default_rng(5))
    (tmp_path / "verdict.json").unlink(missing_ok=True)
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock = {"pid": writer.pid, "host": socket.gethostname(), "started": time.time()}
        (tmp_path / ".lock").write_text(json.dumps(lock))
        done = report_cli(tmp_path)
        assert done.returncode == 7, done.stdout + done.stderr
        assert f"is still being written by process {writer.pid}" in done.stderr
        assert not (tmp_path / "verdict.json").exists()
    finally:
        writer.kill()
        writer.wait()
    done = report_cli(tmp_path)  # the writer is gone: its lock is stale
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert done.returncode == verdict["exit_code"], done.stderr


def test_a_truncated_requests_file_is_named_in_one_line_or_read_from_its_parts(tmp_path):
    synthetic_run(tmp_path, np.random.default_rng(5))
    whole = pq.read_table(tmp_path / "requests.parquet")
    raw = (tmp_path / "requests.parquet").read_bytes()
    (tmp_path / "requests.parquet").write_bytes(raw[: len(raw) // 2])  # the disk filled up, or a copy was cut
    done = report_cli(tmp_path)
    assert done.returncode == 5 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {tmp_path / 'requests.parquet'}: cannot read this Parquet file")
    assert "no part files are left" in line

    (tmp_path / "requests.parts").mkdir()
    pq.write_table(whole.slice(0, 500), tmp_path / "requests.parts" / "part-000001.parquet")
    pq.write_table(whole.slice(500), tmp_path / "requests.parts" / "part-000002.parquet")
    done = report_cli(tmp_path)
    assert "reading its 2 part files instead" in done.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["records"] == whole.num_rows
    assert done.returncode == json.loads((tmp_path / "verdict.json").read_text())["exit_code"]


def test_a_load_process_that_could_not_build_a_request_is_bad_input(tmp_path):
    """Its refusal (the run's client_refused event) is exit 2 with the reason, before every other code."""
    run = failing_run(tmp_path / "refused", 0.0, {})
    steps = json.loads((run / "steps.json").read_text())
    steps["events"] = [{"kind": "client_refused", "t": 1001.0, "worker": 0, "message": "OSError: cat.png: missing"}]
    (run / "steps.json").write_text(json.dumps(steps))
    verdict = finish_run(run).verdict
    assert verdict.exit_code == 2
    assert verdict.reasons["2"] == [
        "load process 0 could not build a request, so none was sent and the run stopped: OSError: cat.png: missing"
    ]

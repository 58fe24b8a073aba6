"""A full disk during a run, through the experiment and the post-run pipeline: steps.json writes that fail at a
step boundary and part files that fail for a while are made good (every record on disk), and part files that can
never be written end in a records_lost event and exit 5."""

import errno
import json
import os
from pathlib import Path

import pandas as pd
import pytest

import locust_llm.rundir.parts as parts_module
from locust_llm.records import Phase
from locust_llm.rundir import layout
from locust_llm.runtime import experiment as experiment_module
from locust_llm.runtime import recorder as recorder_module
from locust_llm.runtime.experiment import Experiment
from locust_llm.runtime.plan import load_plan
from tests.helpers import REPO
from tests.synthetic import stream_record

from .fakes import Clock, FakeEnvironment, FakeSession, options, prompts_built_at_once
from .test_recorder import wait_for

SCENARIO = str(REPO / "scenarios" / "tiny-cpu-test.yaml")


class Disk:
    """The run directory's disk: while ``full``, steps.json and part files cannot be written; ``parts_never``
    keeps part files unwritable for good. Counts the writes it refused."""

    def __init__(self, parts_never: bool = False):
        self.full, self.parts_never = False, parts_never
        self.refused: list[str] = []
        self.write_json, self.write_parquet = layout.write_json, layout.write_parquet

    def _refuse(self, path: Path) -> None:
        self.refused.append(Path(path).name)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def json(self, path, data):
        if self.full and Path(path).name == layout.STEPS:
            self._refuse(path)
        return self.write_json(path, data)

    def part(self, path, table):
        if self.full or self.parts_never:
            self._refuse(path)
        return self.write_parquet(path, table)


@pytest.fixture
def disk(monkeypatch, request):
    disk = Disk(parts_never=request.param)
    monkeypatch.setattr(layout, "write_json", disk.json)
    monkeypatch.setattr(parts_module, "write_parquet", disk.part)
    monkeypatch.setattr(experiment_module, "now", Clock())
    monkeypatch.setattr(recorder_module, "FLUSH_INTERVAL_S", 0.0)
    monkeypatch.setattr(recorder_module, "CLOSE_RETRY_S", 0.0)
    return disk


def run(tmp_path: Path, disk: Disk) -> tuple[Experiment, int]:
    """One variant over two levels; one worker sends 8 records per steady window. The disk is full from the first
    step's start until the second step has begun; the flusher is seen trying while it is."""
    plan = load_plan(
        options(
            scenario=SCENARIO,
            report_dir=str(tmp_path),
            run_id="disk",
            ladder="1,2",
            step_duration=1,
            warmup=0,
            variant="baseline",
            min_requests=0,
        )
    )
    experiment = prompts_built_at_once(
        Experiment(FakeEnvironment(), plan, {"closed": "closed-user"}, session=FakeSession)
    )
    sent, fed = 0, set()
    for _ in experiment.program():
        state = experiment.state
        disk.full = state.step == 0 and state.phase in (Phase.WARMUP, Phase.STEADY)
        if state.phase == Phase.STEADY and state.step not in fed:
            fed.add(state.step)
            row = experiment.run.steps[-1]
            records = [
                stream_record(
                    "disk",
                    "baseline",
                    state.level,
                    state.step,
                    row.t_steady + 0.01 * i,
                    0.01,
                    0.001,
                    20,
                    worker=0,
                    request_id=f"{state.step}-{i}",
                )
                for i in range(8)
            ]
            sent += len(records)
            refused = len(disk.refused)
            experiment.recorder.on_batch(
                {"worker": 0, "records": records, "client": [], "sent_total": sent, "users_running": 1}
            )
            if disk.full or disk.parts_never:
                assert wait_for(
                    lambda refused=refused: len(disk.refused) > refused
                )  # the flusher tried, and kept the rows
        if state.phase == Phase.DRAIN:
            experiment.recorder.on_batch(
                {"worker": 0, "records": [], "client": [], "sent_total": sent, "users_running": 0}
            )
    experiment.finish(final=True)
    return experiment, sent


@pytest.mark.parametrize("disk", [False], indirect=True)
def test_a_disk_full_for_a_while_costs_no_record_and_no_step(tmp_path, disk):
    experiment, sent = run(tmp_path, disk)
    assert layout.STEPS in disk.refused and any(name.startswith("part-") for name in disk.refused)
    frame = pd.read_parquet(tmp_path / "disk" / layout.REQUESTS)
    assert len(frame) == experiment.recorder.received() == sent == 16 and frame["request_id"].is_unique
    steps = json.loads((tmp_path / "disk" / layout.STEPS).read_text())
    assert [(s["step"], s["level"]) for s in steps["steps"]] == [(0, 1), (1, 2)]
    assert not {e["kind"] for e in steps["events"]} & {"records_lost", "records_missing", "drain_timeout"}
    assert experiment.outcome.verdict.exit_code == 0


@pytest.mark.parametrize("disk", [True], indirect=True)
def test_part_files_that_can_never_be_written_are_a_records_lost_event_and_exit_5(tmp_path, disk):
    experiment, sent = run(tmp_path, disk)
    assert len(pd.read_parquet(tmp_path / "disk" / layout.REQUESTS)) == 0
    events = json.loads((tmp_path / "disk" / layout.STEPS).read_text())["events"]
    (lost,) = [e for e in events if e["kind"] == "records_lost"]
    assert lost["lost"] == experiment.recorder.received() == sent == 16
    # Every record arrived: the run stopped waiting then (rows held for the disk count), not at the drain's limit.
    assert "drain_timeout" not in {e["kind"] for e in events}
    verdict = experiment.outcome.verdict
    assert verdict.exit_code == 5
    assert any(reason.startswith("records_lost") for reason in verdict.reasons["5"])


def test_a_run_whose_own_files_cannot_be_written_ends_in_one_line_and_exit_5(tmp_path, caplog):
    from types import SimpleNamespace

    from locust_llm.runtime.plugin import finished

    class Unwritable:
        run = SimpleNamespace(path=tmp_path / "full")
        recorder = SimpleNamespace(parts=SimpleNamespace(rows_lost=3, pending=9, rows_written=40))

        def finish(self, final: bool):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    environment = SimpleNamespace(process_exit_code=None)
    assert finished(environment, Unwritable()) is None
    assert environment.process_exit_code == 5
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == (
        f"the run directory {tmp_path / 'full'} could not be finished: No space left on device; 12 records could not "
        "be written (records_lost), 40 were; exit 5"
    )

"""Run events against their models (``rundir.events``): each kind is written as the dicts of before were (kind,
time, then its fields in the order given), reads back as its own model, refuses a misspelt field before anything is
written; the files of the previous release load; a kind this release does not know is kept, listed and judged by
nothing; the published schema is the models'."""

import json

import pytest
from pydantic import ValidationError

from locust_llm.analysis.documents.summary import Summary
from locust_llm.pipeline import finish_run
from locust_llm.rundir import RunDir, UnreadableFile, layout, load_run
from locust_llm.rundir.events import (
    KNOWN,
    ClientRefused,
    Interrupted,
    OtherEvent,
    ProbeServerFailed,
    ServerExited,
    UsageSuspect,
    WorkerLost,
    events_schema,
    parse_event,
)
from locust_llm.rundir.load import read_events
from tests.helpers import REPO
from tests.unit.test_exit_codes import failing_run
from tests.unit.test_pipeline import undescribed

# Written by the previous release: a ladder run stopped by SIGTERM and tests/synthetic's hostile run (the golden
# runs of issue 28), and a lost and a joined load process (tests/e2e/test_cluster.py, as in steps-7db6fe5).
PREVIOUS = [
    *json.loads((REPO / "tests" / "data" / "events-previous.json").read_text())["events"],
    *json.loads((REPO / "tests" / "data" / "steps-7db6fe5" / "worker-lost.json").read_text())["events"],
]

# One event of each kind, with the fields in the order its call site in the runtime gives them.
EXAMPLES: dict[str, dict] = {
    "server_exited": {"variant": "spec", "log_tail": "fatal: out of memory"},
    "server_start_failed": {"variant": "spec", "error": "exited with code 1", "during": "probes"},
    "server_paused": {
        "variant": "baseline",
        "step": 1,
        "level": 4,
        "t_start": 1000.5,
        "t_end": 1002.5,
        "pause_s": 2.0,
        "pid": 4242,
    },
    "server_restarted": {
        "variant": "baseline",
        "step": 1,
        "level": 4,
        "t_start": 1000.5,
        "t_end": 1003.25,
        "down_s": 2.75,
        "old_url": "http://127.0.0.1:8080",
        "new_url": "http://127.0.0.1:8081",
        "same_port": False,
    },
    "server_restart_failed": {"variant": "baseline", "step": 1, "error": "exited with code 1 during start-up"},
    "faults_not_injected": {"fault_level": 3.0, "ladder": [1, 2, 4], "reason": "fault_level is not a ladder level"},
    "probe_server_failed": {
        "variant": "spec",
        "probe": "control_characters",
        "reason": "the server process exited",
        "log_tail": "abort",
    },
    "scale_out_failed": {"variant": "spec", "error": "a scale-out server exited", "log_tails": ["boom"]},
    "prometheus_unavailable": {"error": "connection refused"},
    "consistency_skipped": {"variant": "spec", "error": "no tokenizer"},
    "context_too_long": {"variant": "spec", "context": 4000, "max_tokens": 64, "server_context": 512},
    "interrupted": {"signal": "SIGTERM", "step": 2, "variant": "baseline"},
    "unfinished": {"variant": "spec", "step": 3, "steps": [2, 3]},
    "sweep_stopped": {"sweep": "spec", "level": 8, "context": None, "speedups": [0.84, None, 0.81]},
    "client_refused": {"worker": 0, "message": "OSError: cat.png: missing"},
    "worker_lost": {
        "worker": 1,
        "client_id": "w1",
        "variant": "spec",
        "step": 1,
        "level": 2.0,
        "records_sent": 37,
        "records_received": 35,
        "requests_lost": 2,
        "stopped": True,
    },
    "worker_joined": {"worker": 2, "client_id": "w2", "variant": "spec", "step": 1},
    "clock_uncertain": {"worker": 1, "offset_s": -0.008, "uncertainty_s": 0.01, "bound_s": 0.005},
    "records_missing": {"missing": {"0": 3}},
    "drain_timeout": {"missing": {"1": 2}},
    "records_lost": {"lost": 2, "reasons": ["t_send: not a float"]},
    "usage_suspect": {"requests": {"r1": "usage 3 tokens, the text holds 40"}},
}
MODELS = {model.model_fields["kind"].default: model for model in KNOWN}


def test_every_kind_has_an_example():
    assert set(EXAMPLES) == set(MODELS)


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_each_kind_is_written_as_before_and_reads_back_as_itself(kind):
    fields = EXAMPLES[kind]
    event = MODELS[kind](**fields)
    # What RunDir.note wrote before the models: {"kind": kind, "t": time.time(), **details}, key for key.
    before = {"kind": kind, "t": event.t, **fields}
    assert json.dumps(event.written()) == json.dumps(before)
    again = parse_event(json.loads(json.dumps(event.written())))
    assert type(again) is MODELS[kind]
    assert json.dumps(again.written()) == json.dumps(before)


def test_a_misspelt_or_missing_field_is_refused_before_anything_is_written(tmp_path):
    run = RunDir(tmp_path, "r")
    with pytest.raises(ValidationError, match="log_tial"):
        run.note(ServerExited(variant="spec", log_tial="boom"))  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="message"):
        run.note(ClientRefused(worker=0))  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="during"):
        ServerExited(variant="spec", log_tail="", during="probes")  # type: ignore[call-arg]
    assert run.events == [] and not run.file(layout.STEPS).exists()


def test_a_field_set_later_is_written_last_and_one_set_again_stays_in_place(tmp_path):
    run = RunDir(tmp_path, "r")
    run.note(UsageSuspect(requests={"a": "x"}))
    run.events[0].requests = {"a": "x", "b": "y"}  # amended at the end of the run (runtime.experiment.finish)
    merged = run.events[0].of_run("r1")  # a merged report says which run each event came from
    run.write_steps()
    (written,) = json.loads(run.file(layout.STEPS).read_text())["events"]
    assert list(written) == ["kind", "t", "requests"] and written["requests"] == {"a": "x", "b": "y"}
    assert list(merged.written()) == ["kind", "t", "requests", "run_id"] and merged.written()["run_id"] == "r1"
    assert run.events[0].run_id is None  # the merge's copy, not the run's event


@pytest.mark.parametrize("raw", PREVIOUS, ids=lambda e: e["kind"])
def test_the_previous_release_events_load_field_for_field(raw):
    typed = parse_event(raw)
    assert type(typed) is MODELS[raw["kind"]]
    assert json.dumps(typed.written()) == json.dumps(raw)  # nothing lost, nothing added, in the file's order


def test_the_loader_reads_typed_events_and_summary_json_keeps_them_as_written(tmp_path):
    (tmp_path / "steps.json").write_text(json.dumps({"steps": [], "events": PREVIOUS}))
    events = load_run(tmp_path).events
    assert [type(e) for e in events] == [Interrupted, ServerExited, WorkerLost, MODELS["worker_joined"]]
    summary = Summary(generated_at="now", records=0, events=events)
    # Key for key, in the file's order, and no null for a field an event was not given.
    assert json.dumps(json.loads(summary.model_dump_json())["events"]) == json.dumps(PREVIOUS)


def test_an_event_of_a_known_kind_that_does_not_fit_is_refused_naming_it(tmp_path):
    with pytest.raises(UnreadableFile, match=r"steps.json: events\[1\] is not a run event \(worker: Field required"):
        read_events(tmp_path / "steps.json", [PREVIOUS[0], {"kind": "client_refused", "t": 1.0, "message": "m"}])
    with pytest.raises(UnreadableFile, match=r"events\[0\] is not a run event \(kind: Field required"):
        read_events(tmp_path / "steps.json", [{"t": 1.0}])


def test_a_kind_this_release_does_not_know_is_kept_listed_and_judged_by_nothing(tmp_path):
    unknown = {"kind": "gpu_throttled", "t": 1001, "variant": "baseline", "clock_mhz": [1980, 1410]}
    (event,) = read_events(tmp_path / "steps.json", [unknown])
    assert isinstance(event, OtherEvent) and event.kind == "gpu_throttled"
    assert json.dumps(event.written()) == json.dumps(unknown)  # the integer time stays one

    plain = finish_run(failing_run(tmp_path / "plain", 0.0, {}))
    run = failing_run(tmp_path / "unknown", 0.0, {})
    steps = json.loads((run / "steps.json").read_text())
    (run / "steps.json").write_text(json.dumps({**steps, "events": [unknown]}))
    outcome = finish_run(run)
    assert outcome.verdict.exit_code == plain.verdict.exit_code == 0
    assert json.loads((run / "summary.json").read_text())["events"] == [unknown]
    report = (run / "report.html").read_text()
    assert "gpu_throttled" in report and "clock_mhz: [1980, 1410]" in report


def test_the_published_schema_is_the_models_and_says_what_each_field_means():
    published = json.loads((REPO / "docs" / "events.schema.json").read_text())
    assert published == events_schema(), "regenerate it: locust-llm schema events > docs/events.schema.json"
    assert not undescribed(published), "give each field an attribute docstring (its unit too)"
    kinds = {d["properties"]["kind"]["const"] for d in published["$defs"].values()}
    assert kinds == set(MODELS)


def test_a_server_locust_llm_did_not_launch_has_no_log_to_show():
    # A probe that made an external server (--host) stop answering: no log tail, and it is said so.
    raw = {"kind": "probe_server_failed", "t": 1.0, "variant": "ref", "probe": "p", "reason": None, "log_tail": None}
    event = parse_event(raw)
    assert isinstance(event, ProbeServerFailed) and event.log_tail is None
    assert json.dumps(event.written()) == json.dumps(raw)
    with pytest.raises(ValidationError, match="log_tail"):  # said, not left out
        ProbeServerFailed(variant="ref", probe="p", reason=None)  # type: ignore[call-arg]

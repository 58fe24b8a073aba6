"""``env.json`` against its model (``rundir.env.RunEnv``): the files the previous release wrote load and write back
byte for byte, the loader reads it typed and names a field that does not fit, a misspelt or mistyped field fails
where the runtime sets it, secrets are still masked in the file, and the published schema is the model's."""

import json

import pytest
from pydantic import ValidationError

from locust_llm.rundir import RunDir, UnreadableFile, load_run
from locust_llm.rundir.env import ClocksEnv, RunEnv, ServerEnv, WorkloadEnv, env_schema
from locust_llm.rundir.redact import MASK
from locust_llm.scenario.scale_out import ScaleOutPlan
from tests.helpers import REPO
from tests.unit.test_pipeline import undescribed

# Written by the release before the model: real CPU llama.cpp runs (a ladder of launched servers, an external
# server with shared prefixes, a conversation, a trace replay) and the soak, scale-out (an external replica whose
# URL held a password) and clock-sync programs of its unit tests (tests/unit/runtime).
PREVIOUS = sorted((REPO / "tests" / "data" / "env-previous").glob("*.json"))


def test_the_previous_release_wrote_every_section():
    docs = {p.stem: json.loads(p.read_text()) for p in PREVIOUS}
    keys = {key for doc in docs.values() for key in doc}
    assert {"servers", "host", "client", "workload", "soak", "scale_out", "clocks", "server_requests"} <= keys
    servers = [s for doc in docs.values() for s in doc.get("servers", {}).values()]
    assert {s["launched"] for s in servers} == {True, False}
    assert docs["trace"]["workload"]["trace"] and docs["conversation"]["workload"]["conversation"]


@pytest.mark.parametrize("path", PREVIOUS, ids=lambda p: p.stem)
def test_each_file_of_the_previous_release_loads_and_writes_back_byte_for_byte(path):
    raw = json.loads(path.read_text())
    typed = RunEnv.model_validate(raw)
    # Nothing lost, nothing added, the same types, in the order the runtime wrote them.
    assert json.dumps(typed.written(), indent=2) == json.dumps(raw, indent=2)


def held_in(read, written) -> bool:
    """Whether a typed reading says what the file says: every field it read, nested ones too, with the file's
    value (a nested reading reads some fields of its part)."""
    if hasattr(read, "model_dump"):
        read = read.model_dump(exclude_unset=True)
    if isinstance(read, dict):
        return isinstance(written, dict) and all(k in written and held_in(v, written[k]) for k, v in read.items())
    return read == written and type(read) is type(written)


@pytest.mark.parametrize("path", PREVIOUS, ids=lambda p: p.stem)
def test_the_copied_scenario_and_load_read_typed_say_what_the_file_says(path):
    raw = json.loads(path.read_text())
    env = RunEnv.model_validate(raw)
    for reading, copy in ((env.recorded_load, raw.get("load", {})), (env.recorded_scenario, raw.get("scenario", {}))):
        assert held_in(reading, copy)
    if "load" in raw:  # the fields the analysis decides by were read, not left at None
        assert {"mode", "ladder", "unique_prefix", "step_duration_s"} <= env.recorded_load.model_fields_set


def test_the_loader_reads_env_json_typed(tmp_path):
    (tmp_path / "steps.json").write_text(json.dumps({"steps": [], "events": []}))
    (tmp_path / "env.json").write_text((REPO / "tests" / "data" / "env-previous" / "ladder.json").read_text())
    env = load_run(tmp_path).env
    assert env.baseline == "baseline" and env.variants == ["baseline", "spec-k4"]
    server = env.server("spec-k4")
    assert server.launched is True and server.context_size == 512 and server.speculative is not None
    assert env.workload is not None and env.workload.prompt_cache == "cold"
    assert env.server("never started") == ServerEnv()


def test_a_run_without_env_json_loads_an_empty_one(tmp_path):
    (tmp_path / "steps.json").write_text(json.dumps({"steps": [], "events": []}))
    assert load_run(tmp_path).env == RunEnv()


def test_a_field_that_does_not_fit_is_refused_naming_the_file_and_the_field(tmp_path):
    (tmp_path / "steps.json").write_text(json.dumps({"steps": [], "events": []}))
    (tmp_path / "env.json").write_text(json.dumps({"run_id": "r", "workload": "garbled"}))
    with pytest.raises(UnreadableFile, match=r"env\.json.*workload"):
        load_run(tmp_path)
    (tmp_path / "env.json").write_text(json.dumps({"run_id": "r", "servers": {"a": {"contex_size": 512}}}))
    with pytest.raises(UnreadableFile, match=r"servers\.a\.contex_size"):
        load_run(tmp_path)


def test_a_misspelt_or_mistyped_field_fails_where_the_runtime_sets_it(tmp_path):
    run = RunDir(tmp_path, "r")
    with pytest.raises(ValidationError, match="sever_seen"):
        run.env.sever_seen = {}
    with pytest.raises(ValidationError, match="seed"):
        run.env.seed = "not a number"
    run.env.servers["a"] = ServerEnv(url="http://127.0.0.1:1")
    with pytest.raises(ValidationError, match="context_sise"):
        run.env.servers["a"].context_sise = 512
    with pytest.raises(ValidationError, match="cache_sallt"):
        WorkloadEnv(prompt_cache="cold", cache_sallt=True)
    with pytest.raises(ValidationError, match="uncertainty_s"):
        run.env.clocks = ClocksEnv.model_validate({"bound_s": 0.005, "workers": {"0": {"offset_s": 0.1}}})
    run.write_env()
    assert json.loads(run.file("env.json").read_text()) == {"servers": {"a": {"url": "http://127.0.0.1:1"}}}


def test_secrets_never_reach_env_json(tmp_path):
    run = RunDir(tmp_path, "r")
    run.env.options = {"api_key": "sk-live-1234", "host": "http://user:hunter22@127.0.0.1:8000"}
    run.env.external_url = "http://user:hunter22@127.0.0.1:8000"
    run.env.servers["a"] = ServerEnv(command=["llama-server", "--api-key", "sk-live-1234", "--port", "8000"])
    run.env.scale_out = ScaleOutPlan(
        servers=2, level=1.0, pairs=1, min_efficiency=None, urls=["http://u:hunter22@127.0.0.1:8001"]
    )
    run.write_env()
    text = run.file("env.json").read_text()
    assert "sk-live-1234" not in text and "hunter22" not in text
    doc = json.loads(text)
    assert doc["options"]["api_key"] == MASK and doc["external_url"] == f"http://user:{MASK}@127.0.0.1:8000"
    assert doc["servers"]["a"]["command"] == ["llama-server", "--api-key", MASK, "--port", "8000"]
    assert doc["scale_out"]["urls"] == [f"http://u:{MASK}@127.0.0.1:8001"]
    run.write_all()  # the end-of-run write masks the same way
    assert json.loads(run.file("env.json").read_text()) == doc
    # in memory the run keeps what it was given (it connects with it); only the file is masked
    assert run.env.servers["a"].command == ["llama-server", "--api-key", "sk-live-1234", "--port", "8000"]


def test_the_published_schema_is_the_model_and_says_what_each_field_means():
    published = json.loads((REPO / "docs" / "env.schema.json").read_text())
    assert published == env_schema(), "regenerate it: locust-llm schema env > docs/env.schema.json"
    assert not undescribed(published), "give each field an attribute docstring (its unit too)"

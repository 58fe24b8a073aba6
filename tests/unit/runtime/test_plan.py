"""Options + scenario -> Plan: overrides, variants chosen, gates, and errors that name the fix."""

import json
import math
import os
import socket
import subprocess
import sys
import time

import psutil
import pytest

from locust_llm.runtime.options import OPTIONS
from locust_llm.runtime.plan import load_plan, recordable_options
from locust_llm.runtime.webform import check_form
from locust_llm.scenario import ScenarioError
from tests.helpers import REPO

from .fakes import options

SCENARIO = str(REPO / "scenarios" / "tiny-cpu-test.yaml")


def test_scenario_values_unless_overridden():
    plan = load_plan(options(scenario=SCENARIO))
    assert plan.load.ladder == [1, 2] and plan.load.step_duration_s == 5 and plan.load.warmup_s == 1
    assert plan.variants == ["baseline", "spec-k4"] and plan.engine == "llamacpp" and plan.external_url is None
    plan = load_plan(
        options(
            scenario=SCENARIO,
            ladder="4, 1",
            step_duration=2.5,
            warmup=0,
            mode="open",
            max_tokens=7,
            api="chat",
            run_id="r1",
        )
    )
    assert plan.load.ladder == [4.0, 1.0] and plan.load.step_duration_s == 2.5 and plan.load.warmup_s == 0
    assert plan.load.mode == "open" and plan.load.max_tokens == 7 and plan.load.api == "chat"
    assert plan.run_id == "r1"


def test_host_means_one_external_variant():
    plan = load_plan(options(scenario=SCENARIO), host="http://127.0.0.1:8000")
    assert plan.variants == ["external"] and plan.engine == "external"
    assert plan.external_url == "http://127.0.0.1:8000"
    assert load_plan(options(scenario=SCENARIO, variant="spec-k4")).variants == ["spec-k4"]


def test_gate_options_override_the_scenario():
    plan = load_plan(
        options(
            scenario=SCENARIO, slo_ttft_p99_ms=250, slo_error_rate=0.0, max_regression_pct=3, baseline_run="nightly"
        )
    )
    gates = plan.gates
    assert gates.ttft_p99_ms == 250 and gates.error_rate == 0.0 and gates.max_regression_pct == 3
    assert gates.baseline_run == "nightly" and gates.tpot_p99_ms is None


@pytest.mark.parametrize(
    "given, message",
    [
        ({"mode": "sideways"}, "--mode must be 'closed' or 'open'"),
        ({"ladder": "1,two"}, "--ladder must be a comma list of numbers"),
        ({"ladder": "0"}, "options are invalid: load.ladder"),
        ({"ladder": "nan"}, "finite number"),
        ({"ladder": "1e12"}, "<= 100000"),
        ({"run_id": "../../x"}, "not a plain name"),
        ({"variant": "nope"}, "--variant 'nope' is not in"),
        ({"slo_error_rate": 2.0}, "gate options are invalid"),
    ],
)
def test_bad_options_name_the_fix(given, message):
    with pytest.raises(ScenarioError, match=message):
        load_plan(options(scenario=SCENARIO, **given))


NUMBERS = [o for o in OPTIONS if isinstance(o.default, (int, float)) and not isinstance(o.default, bool)]


@pytest.mark.parametrize(
    "option, value", [(o.dest, v) for o in NUMBERS for v in ([-5, math.nan] if isinstance(o.default, float) else [-5])]
)
def test_no_number_typed_is_taken_for_the_scenarios_value(option, value):
    # Every numeric option of the plugin: a NaN or negative value is one line naming the option or its key, never
    # silently "unset" (a NaN SLO would otherwise be no gate at all).
    with pytest.raises(ScenarioError) as caught:
        load_plan(options(scenario=SCENARIO, **{option: value}))
    message = str(caught.value)
    key = {
        "warmup": "warmup_s",
        "step_duration": "step_duration_s",
        "slo_ttft_p99_ms": "ttft_p99_ms",
        "slo_tpot_p99_ms": "tpot_p99_ms",
        "slo_error_rate": "error_rate",
        "max_concurrency": "max_inflight",
    }.get(option, option)
    assert "\n" not in message and (key in message or f"--{option.replace('_', '-')}" in message), message


def test_the_defaults_still_mean_the_scenarios_values():
    plan = load_plan(options(scenario=SCENARIO, **{o.dest: o.default for o in NUMBERS}))
    assert plan.load.warmup_s == 1 and plan.gates.error_rate == 0.05 and plan.gates.ttft_p99_ms is None
    assert plan.scale_out is None and plan.soak is None


@pytest.mark.parametrize(
    "scenario, host", [(SCENARIO, "http://127.0.0.1:8000"), (str(REPO / "scenarios" / "external.yaml"), None)]
)
def test_an_external_servers_variant_is_a_plain_name_too(scenario, host):
    for bad in ('../evil"q', 'a"b', "/tmp/x"):
        with pytest.raises(ScenarioError, match=r"--variant '.*' is not a plain name; use letters"):
            load_plan(options(scenario=scenario, variant=bad), host=host)
        message = check_form(options(scenario=scenario), {"variant": bad}, host, scenario)
        assert message is not None and "is not a plain name" in message
    assert load_plan(options(scenario=scenario, variant="mine-1.2"), host=host).variants == ["mine-1.2"]


@pytest.mark.parametrize("name", ["../../any/run", "/abs", "a/b", "."])
def test_the_baseline_run_is_a_plain_name(name):
    with pytest.raises(ScenarioError, match="gates.baseline_run: not a plain name"):
        load_plan(options(scenario=SCENARIO, baseline_run=name))


def test_recorded_options_hold_no_secret():
    recorded = recordable_options(options(api_key="sk-1", auth_token="t", password="p", ladder="1"))
    assert "ladder" in recorded and not {"api_key", "auth_token", "password"} & set(recorded)


def test_host_must_be_a_url():
    with pytest.raises(ScenarioError, match="--host must be an http"):
        load_plan(options(scenario=SCENARIO), host="notaurl")


def test_a_run_directory_is_never_reused_without_overwrite(tmp_path):
    from locust_llm.runtime.plan import claim_run_dir

    plan = load_plan(options(scenario=SCENARIO, report_dir=str(tmp_path), run_id="r1"))
    claim_run_dir(plan, overwrite=False).release()  # the run ended
    (tmp_path / "r1" / "requests.parts").mkdir()
    with pytest.raises(ScenarioError, match="exists already"):
        claim_run_dir(plan, overwrite=False)
    claim_run_dir(plan, overwrite=True).release()
    assert list((tmp_path / "r1").iterdir()) == []
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    plan = load_plan(options(scenario=SCENARIO, report_dir=str(locked), run_id="r2"))
    if os.geteuid() != 0:  # root writes anywhere
        with pytest.raises(ScenarioError, match="cannot write"):
            claim_run_dir(plan, overwrite=False)
    bad = load_plan(options(scenario=SCENARIO, report_dir=str(tmp_path / "file.txt"), run_id="r3"))
    (tmp_path / "file.txt").write_text("not a folder")
    with pytest.raises(ScenarioError, match="cannot write"):
        claim_run_dir(bad, overwrite=False)
    # Names the file system cannot hold: a component over NAME_MAX, a path over PATH_MAX.
    for report_dir in (tmp_path / ("n" * 300), tmp_path.joinpath(*["d" * 200] * 25)):
        too_long = load_plan(options(scenario=SCENARIO, report_dir=str(report_dir), run_id="r4"))
        with pytest.raises(ScenarioError, match="cannot write the run directory .*File name too long"):
            claim_run_dir(too_long, overwrite=False)


def test_the_web_form_runs_only_the_projects_scenarios_or_the_command_lines(tmp_path, monkeypatch):
    from locust_llm.runtime.webform import check_web_scenario

    monkeypatch.chdir(REPO)
    check_web_scenario("scenarios/tiny-cpu.yaml", "")
    check_web_scenario(str(tmp_path / "mine.yaml"), str(tmp_path / "mine.yaml"))
    for elsewhere in ("/etc/passwd", "../scenarios/tiny-cpu.yaml", str(tmp_path / "other.yaml")):
        with pytest.raises(ScenarioError, match="the web form runs"):
            check_web_scenario(elsewhere, "scenarios/tiny-cpu.yaml")


ZOMBIE_MAKER = (
    "import subprocess, sys, time; child = subprocess.Popen([sys.executable, '-c', '']); "
    "print(child.pid, flush=True); time.sleep(60)"
)


def test_a_run_directory_has_one_writer_and_a_dead_writers_lock_is_taken_over(tmp_path):
    """A live run holds the folder: a second claim is refused, --overwrite included, naming the holder; once the
    holder is gone (a process that has exited, or a zombie), its lock is stale and the next claim takes it."""
    from locust_llm.runtime.plan import claim_run_dir

    plan = load_plan(options(scenario=SCENARIO, report_dir=str(tmp_path), run_id="busy"))
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock = tmp_path / "busy" / ".lock"
        lock.parent.mkdir()
        lock.write_text(json.dumps({"pid": holder.pid, "host": socket.gethostname(), "started": time.time()}))
        (tmp_path / "busy" / "requests.parts").mkdir()
        for overwrite in (False, True):
            with pytest.raises(ScenarioError, match=f"being written by process {holder.pid} on "):
                claim_run_dir(plan, overwrite=overwrite)
        assert (tmp_path / "busy" / "requests.parts").exists()  # nothing of the live run was removed
    finally:
        holder.kill()
        holder.wait()
    # stale: a writer that has died and is a zombie its parent has not reaped yet (the parent here: a process that
    # never waits for its child)
    parent = subprocess.Popen(
        [sys.executable, "-c", ZOMBIE_MAKER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        zombie = int(parent.stdout.readline())
        while psutil.Process(zombie).status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.01)
        lock.write_text(json.dumps({"pid": zombie, "host": socket.gethostname(), "started": time.time()}))
        mine = claim_run_dir(plan, overwrite=True)
    finally:
        parent.kill()
        parent.wait()
    assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert [p.name for p in (tmp_path / "busy").iterdir()] == [".lock"]
    mine.release()
    assert not lock.exists()


def test_a_lock_whose_pid_now_belongs_to_a_newer_process_is_stale(tmp_path):
    """The writer died and its pid was given to a process started after the lock was taken: not the writer."""
    from locust_llm.rundir import lock_holder

    newer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        born = psutil.Process(newer.pid).create_time()
        for started, held in ((born - 60, False), (born + 5, True)):
            lock = {"pid": newer.pid, "host": socket.gethostname(), "started": started}
            (tmp_path / ".lock").write_text(json.dumps(lock))
            assert (lock_holder(tmp_path) is not None) == held
    finally:
        newer.kill()
        newer.wait()


@pytest.mark.parametrize(
    "key, words",
    [
        ("k\r\nX-Injected: evil", "LOCUST_LLM_API_KEY holds the control character '\\r'"),
        ("k\tx", "LOCUST_LLM_API_KEY holds the control character '\\t'"),
        ("ключ", "LOCUST_LLM_API_KEY holds 'к', which an HTTP header cannot carry"),
    ],
)
def test_an_api_key_that_cannot_be_a_header_refuses_the_run(monkeypatch, key, words):
    monkeypatch.setenv("LOCUST_LLM_API_KEY", key)
    with pytest.raises(ScenarioError) as refused:
        load_plan(options(scenario=SCENARIO), host="http://127.0.0.1:9")
    assert words in str(refused.value) and "on one line" in str(refused.value)
    assert key not in str(refused.value)  # the key itself is never printed


@pytest.mark.parametrize("host", ["http://127.0.0.1:9/v1 x", "http://127.0.0.1:9/v1\r\nX-Injected: 1"])
def test_a_host_url_that_would_break_the_request_line_refuses_the_run(host):
    with pytest.raises(ScenarioError, match="must be percent-encoded"):
        load_plan(options(scenario=SCENARIO), host=host)


@pytest.mark.parametrize(
    "content, words",
    [
        ("", "no usable prompts (no entries)"),
        ('{"prompt": "fine"}\n{"prompt": "cut\n', "bad.jsonl:2:12: not valid JSON: Unterminated string"),
        (None, "bad.jsonl: is a directory"),
    ],
)
def test_a_bad_dataset_refuses_the_run_before_any_request(tmp_path, content, words):
    from locust_llm.runtime.plan import check_dataset

    dataset = tmp_path / "bad.jsonl"
    if content is None:
        dataset.mkdir()
    else:
        dataset.write_text(content)
    scenario = tmp_path / "s.yaml"
    scenario.write_text((REPO / "scenarios" / "external.yaml").read_text() + "  dataset: bad.jsonl\n")
    with pytest.raises(ScenarioError) as refused:
        check_dataset(load_plan(options(scenario=str(scenario)), host="http://127.0.0.1:9"))
    assert str(refused.value).startswith("load.dataset: ") and words in str(refused.value)

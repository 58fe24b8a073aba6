"""What an operator brings, refused or warned about before the first request: a URL with a query, a baseline that
is not in the library, values that cannot mean what they say, a plan the host cannot carry; and built-in files
found from any working directory."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from locust_llm import places
from locust_llm.runtime.plan import capacity_warnings, check_baseline, load_plan
from locust_llm.scenario import LoadSpec, ScenarioError, load_scenario
from tests.helpers import REPO

from .fakes import options

SCENARIO = str(REPO / "scenarios" / "tiny-cpu-test.yaml")


@pytest.mark.parametrize(
    "host, shown",
    [
        ("http://127.0.0.1:9/?api_key=K3y-s3cret", "http://127.0.0.1:9/?api_key=***"),
        ("http://127.0.0.1:9/v1?api-version=2024-06-01", "http://127.0.0.1:9/v1?api-version=2024-06-01"),
        ("http://bob:pw-s3cret@127.0.0.1:9/#frag", "http://bob:***@127.0.0.1:9/#..."),
    ],
)
def test_a_url_with_a_query_or_fragment_is_refused_in_one_line_with_its_secrets_masked(host, shown):
    # It once sent /?api_key=K/metrics to the control plane and the streams without the query.
    with pytest.raises(ScenarioError) as refused:
        load_plan(options(scenario=SCENARIO), host=host)
    message = str(refused.value)
    assert shown in message and "refused" in message and "\n" not in message
    assert "K3y-s3cret" not in message and "pw-s3cret" not in message


def test_a_missing_baseline_is_found_before_the_first_request_in_the_library_of_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv(places.BASELINES_ENV, str(tmp_path / "lib"))
    plan = load_plan(options(scenario=SCENARIO, baseline_run="nightly"))
    with pytest.raises(ScenarioError) as refused:
        check_baseline(plan)
    assert f"'nightly' not found in {tmp_path / 'lib'}/" in str(refused.value)
    (tmp_path / "lib" / "nightly").mkdir(parents=True)
    (tmp_path / "lib" / "nightly" / "steps.json").write_text("{}")
    check_baseline(plan)  # a saved run of that name: found, where `baseline save` puts it


def test_a_scenarios_own_library_is_relative_to_its_folder_not_the_working_directory(tmp_path, monkeypatch):
    scenario = tmp_path / "conf" / "s.yaml"
    scenario.parent.mkdir()
    scenario.write_text(
        (REPO / "scenarios" / "tiny-cpu-test.yaml").read_text() + "\ngates: {library: saved, baseline_run: b}\n"
    )
    monkeypatch.chdir(tmp_path)
    plan = load_plan(options(scenario=str(scenario)))
    assert plan.gates.library == str(tmp_path / "conf" / "saved")


def test_the_default_scenario_and_baselines_do_not_depend_on_the_working_directory(tmp_path, monkeypatch):
    # `cd ~ && locust -f .../spec_decode.py` once failed: "scenarios/tiny-cpu.yaml: scenario file not found".
    monkeypatch.delenv(places.BASELINES_ENV, raising=False)
    code = (
        "import json; from locust_llm.runtime.plan import load_plan; from locust_llm.runtime.options import defaults;"
        "from argparse import Namespace; from locust_llm.places import baseline_library;"
        "plan = load_plan(Namespace(**defaults()));"
        "print(json.dumps([str(plan.scenario.source), str(baseline_library())]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60, env=_env()
    )
    assert done.returncode == 0, done.stderr
    source, library = json.loads(done.stdout)
    assert source == str(REPO / "scenarios" / "tiny-cpu.yaml") and library == str(REPO / "baselines")


def _env() -> dict:
    import os

    return {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.mark.parametrize(
    "text, words",
    [
        ("load: {ladder: [1]}\nload: {ladder: [2]}\n", "s.yaml:4: key 'load' appears twice"),
        ("load:\n  ladder: [1]\n  max_tokens: 8\n  ladder: [2]\n", "s.yaml:6: key 'ladder' appears twice"),
        ("load: {ladder: [1.5]}\n", "ladder 1.5: closed mode runs whole users"),
        ("load: {ladder: [1], step_duration_s: 0.001}\n", "greater than or equal to 1"),
    ],
)
def test_values_that_cannot_mean_what_they_say_are_refused(tmp_path, text, words):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nserver: {engine: external, url: 'http://127.0.0.1:9'}\n" + text)
    with pytest.raises(ScenarioError, match=words):
        load_scenario(path)


def test_an_open_loop_may_have_a_fractional_rate():
    assert LoadSpec(mode="open", ladder=[0.5, 1.5]).ladder == [0.5, 1.5]


def test_a_scenario_file_above_the_cap_is_refused_unparsed(tmp_path):
    from locust_llm.scenario import MAX_SCENARIO_BYTES

    path = tmp_path / "big.yaml"
    path.write_text("name: s\n# " + "x" * MAX_SCENARIO_BYTES + "\n")
    with pytest.raises(ScenarioError, match="larger than 1024 KiB"):
        load_scenario(path)


def test_a_plan_the_host_cannot_carry_is_warned_about_with_the_arithmetic():
    closed = LoadSpec(ladder=[1, 100_000])
    said = capacity_warnings(closed, cores=2, processes=1, memory_bytes=3 << 30)
    assert "100000 users on 1 load core(s) is 100,000 users per core" in said[0]
    assert "about 1.9 GiB (20 KiB each)" in said[1] and "3.0 GiB" in said[1]
    many = capacity_warnings(LoadSpec(ladder=[2]), cores=2, processes=64, memory_bytes=64 << 30)
    assert len(many) == 1 and "--processes 64 on 2 cores: 32.0 load processes per core" in many[0]
    rate = capacity_warnings(LoadSpec(mode="open", ladder=[100_000], max_tokens=8), 2, 2, 64 << 30)
    assert "400,000 tokens/s per core" in rate[0]
    assert capacity_warnings(LoadSpec(ladder=[1, 8]), cores=2, processes=1, memory_bytes=4 << 30) == []

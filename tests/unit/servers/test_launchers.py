"""Launchers: command lines of every engine, and failure modes with a stand-in server process."""

import json
import os
import socket
import sys
from pathlib import Path

import psutil
import pytest

from locust_llm.scenario import load_scenario
from locust_llm.servers import PortInUseError, ServerError, launch_variant, plan_variant
from tests.helpers import REPO

HERE = Path(__file__).resolve().parent
FAKE = f"{sys.executable} {HERE / 'fake_server.py'}"


def scenario_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


def vllm_scenario(tmp_path, binary=None):
    binary_line = f"  binary: {json.dumps(binary)}\n" if binary else ""
    return load_scenario(
        scenario_file(
            tmp_path,
            f"""
name: v
server:
  engine: vllm
  model: meta-llama/Llama-3.1-8B-Instruct
  args: ["--max-model-len", "8192"]
  startup_timeout_s: 20
  stop_grace_s: 2
{binary_line}variants:
  baseline: {{}}
  eagle3:
    speculative: {{method: eagle3, model: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, num_speculative_tokens: 3}}
    args: ["--max-num-seqs", "64"]
""",
        )
    )


def test_vllm_command_line(tmp_path):
    scenario = vllm_scenario(tmp_path, binary=sys.executable)  # any executable; only the argv is checked
    plan = plan_variant(scenario, "eagle3", port=8123)
    argv = plan.argv
    assert argv[1:4] == ["serve", "meta-llama/Llama-3.1-8B-Instruct", "--host"]
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and argv[argv.index("--port") + 1] == "8123"
    config = json.loads(argv[argv.index("--speculative-config") + 1])
    assert config == {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}
    # server args before variant args, so a variant can override a server-wide flag
    assert argv.index("--max-model-len") < argv.index("--max-num-seqs")
    assert "--speculative-config" not in plan_variant(scenario, "baseline", port=8123).argv
    assert plan.base_url == "http://127.0.0.1:8123"


def test_sglang_command_line(tmp_path):
    scenario = load_scenario(REPO_SCENARIOS / "sglang-eagle.yaml")
    scenario = scenario.model_copy(update={"server": scenario.server.model_copy(update={"binary": sys.executable})})
    argv = plan_variant(scenario, "eagle-s3-k4", port=30000).argv
    pairs = dict(zip(argv, argv[1:], strict=False))
    assert pairs["--model-path"] == "meta-llama/Llama-2-7b-chat-hf"
    assert pairs["--speculative-algorithm"] == "EAGLE"
    assert pairs["--speculative-draft-model-path"] == "lmsys/sglang-EAGLE-llama2-chat-7B"
    assert (
        pairs["--speculative-num-steps"],
        pairs["--speculative-eagle-topk"],
        pairs["--speculative-num-draft-tokens"],
    ) == ("3", "4", "16")
    assert "--enable-metrics" in argv
    assert "--speculative-algorithm" not in plan_variant(scenario, "baseline", port=30000).argv


REPO_SCENARIOS = REPO / "scenarios"


def test_llamacpp_command_line_uses_generated_draft(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCUST_LLM_CACHE", str(tmp_path / "cache"))
    scenario = load_scenario(REPO_SCENARIOS / "tiny-cpu-test.yaml")
    scenario = scenario.model_copy(update={"server": scenario.server.model_copy(update={"binary": sys.executable})})
    argv = plan_variant(scenario, "spec-k4", port=8124).argv
    pairs = dict(zip(argv, argv[1:], strict=False))
    assert Path(pairs["-m"]).name == "target.gguf" and Path(pairs["-md"]).name == "draft.gguf"
    assert Path(pairs["-md"]).exists() and Path(pairs["-m"]).exists()
    spec_flags = (pairs["--spec-type"], pairs["--spec-draft-n-max"], pairs["--spec-draft-p-min"])
    assert spec_flags == ("draft-simple", "4", "0.0")
    assert "--metrics" in argv
    assert "-md" not in plan_variant(scenario, "baseline", port=8124).argv


def test_missing_engine_binary(tmp_path):
    scenario = vllm_scenario(tmp_path, binary="/nonexistent/vllm")
    with pytest.raises(ServerError, match="not found.*pip install vllm"):
        plan_variant(scenario, "baseline")


def test_bad_model_path(tmp_path):
    scenario = load_scenario(
        scenario_file(
            tmp_path,
            f"""
name: l
server: {{engine: llamacpp, model: missing.gguf, binary: {json.dumps(sys.executable)}}}
variants: {{baseline: {{}}}}
""",
        )
    )
    with pytest.raises(ServerError, match=r"model file not found: .*missing\.gguf"):
        plan_variant(scenario, "baseline")


def test_unknown_variant(tmp_path):
    with pytest.raises(ServerError, match="choose one of: baseline, eagle3"):
        plan_variant(vllm_scenario(tmp_path, binary=sys.executable), "nope")


def test_port_in_use(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(PortInUseError, match=f"port {port} on 127.0.0.1 is already in use"):
            launch_variant(vllm_scenario(tmp_path, binary=FAKE), "baseline", log_dir=tmp_path, port=port)


def test_crash_during_startup_reports_log_tail(tmp_path):
    scenario = vllm_scenario(tmp_path, binary=f"{FAKE} --crash-after 0.2")
    with pytest.raises(ServerError) as info:
        launch_variant(scenario, "baseline", log_dir=tmp_path)
    message = str(info.value)
    assert "exited with code 3 during start-up" in message
    assert "CUDA out of memory" in message
    assert (tmp_path / "server-baseline.log").exists()


def test_never_healthy_times_out_and_cleans_up(tmp_path):
    pid_file = tmp_path / "pids.json"
    scenario = vllm_scenario(tmp_path, binary=f"{FAKE} --never-healthy --pid-file {pid_file}")
    scenario = scenario.model_copy(update={"server": scenario.server.model_copy(update={"startup_timeout_s": 2.0})})
    with pytest.raises(ServerError, match="not healthy after 2 s"):
        launch_variant(scenario, "baseline", log_dir=tmp_path)
    assert_gone(json.loads(pid_file.read_text()).values())


def assert_gone(pids):
    for pid in pids:
        # A zombie awaiting its reaper is already dead.
        alive = psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        assert not alive, f"process {pid} survived the stop"


@pytest.mark.parametrize("extra", ["", "--ignore-sigterm"])
def test_stop_leaves_no_process_behind(tmp_path, extra):
    pid_file = tmp_path / "pids.json"
    scenario = vllm_scenario(tmp_path, binary=f"{FAKE} --pid-file {pid_file} {extra}")
    server = launch_variant(scenario, "eagle3", log_dir=tmp_path)
    assert server.served_model == "fake-model"
    assert server.version == "fake-server 1.2.3"
    pids = json.loads(pid_file.read_text())
    assert all(psutil.pid_exists(p) for p in pids.values())
    server.stop()
    assert_gone(pids.values())
    info = server.describe()
    assert "--speculative-config" in info["command"]


def test_child_dies_with_interrupted_launcher(tmp_path):
    """A launcher killed outright (no cleanup code runs) still takes its server down."""
    pid_file = tmp_path / "pids.json"
    script = tmp_path / "launcher.py"
    script.write_text(f"""
import sys, time
sys.path.insert(0, {str(REPO)!r})
from locust_llm.scenario import load_scenario
from locust_llm.servers import launch_variant
launch_variant(load_scenario({str(tmp_path / "s.yaml")!r}), 'baseline', log_dir={str(tmp_path)!r})
print('up', flush=True)
time.sleep(600)
""")
    vllm_scenario(tmp_path, binary=f"{FAKE} --pid-file {pid_file}")
    launcher = psutil.Popen([sys.executable, str(script)], stdout=__import__("subprocess").PIPE, text=True)
    assert launcher.stdout.readline().strip() == "up"
    pids = json.loads(pid_file.read_text())
    launcher.kill()
    launcher.wait()
    server = psutil.Process(pids["server"])
    server.wait(timeout=10)
    assert_gone([pids["server"]])


def test_a_launched_server_runs_below_the_load_generators_priority(tmp_path):
    """By default every process of a launched server gets nice +10 over the launcher's own (the load generator gets a
    core at once when a chunk arrives); a variant may set its own, and describe() records it for env.json."""
    pid_file = tmp_path / "pids.json"
    scenario = vllm_scenario(tmp_path, binary=f"{FAKE} --pid-file {pid_file}")
    own = os.getpriority(os.PRIO_PROCESS, 0)
    with launch_variant(scenario, "eagle3", log_dir=tmp_path) as server:
        pids = json.loads(pid_file.read_text())
        assert {psutil.Process(pid).nice() for pid in pids.values()} == {min(own + 10, 19)}
        assert server.describe()["nice"] == 10
    text = (tmp_path / "s.yaml").read_text().replace('    args: ["--max-num-seqs", "64"]', "    nice: 0")
    assert plan_variant(load_scenario(scenario_file(tmp_path, text)), "eagle3", port=8123).nice == 0
    assert plan_variant(scenario, "baseline", port=8123).nice == 10

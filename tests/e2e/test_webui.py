"""The web UI: the LLM tab's live rows during a run, and the report link once it has stopped."""

import os
import socket
import subprocess
import sys
import time

import pytest
import requests

from tests.helpers import REPO, require_llama_server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def poll(url: str, accept, timeout_s: float = 120.0):
    """GET ``url`` until ``accept(response)`` holds; every try is bounded, and so is the whole wait."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = requests.get(url, timeout=5)
            if accept(last):
                return last
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{url} never answered as expected; last answer: {last and last.text[:300]}")


@pytest.mark.server
def test_llm_tab_and_report_link(tmp_path):
    require_llama_server()
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(REPO / "locustfiles" / "spec_decode.py"),
        "--autostart",
        "--autoquit",
        "20",
        "--web-host",
        "127.0.0.1",
        "--web-port",
        str(port),
        "--skip-log",
        "--scenario",
        "scenarios/tiny-cpu-test.yaml",
        "--ladder",
        "1,2",
        "--step-duration",
        "3",
        "--warmup",
        "1",
        "--run-id",
        "ui",
        "--report-dir",
        str(tmp_path),
    ]
    locust = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=os.environ.copy()
    )
    base = f"http://127.0.0.1:{port}"
    try:
        index = poll(base + "/", lambda r: r.status_code == 200)
        assert '"llm"' in index.text and "LLM report (HTML)" in index.text
        # the experiment's options are in the start form ("Custom parameters"), not only on the command line
        options = index.text[index.text.index('"extra_options"') :]
        for name in ("scenario", "ladder", "mode", "step_duration", "slo_ttft_p99_ms"):
            assert f'"{name}": {{' in options, name
        during = poll(base + "/llm/rows", lambda r: r.status_code == 200 and r.json()["rows"])
        row = during.json()["rows"][0]
        assert row["variant"] == "baseline" and row["requests"] > 0
        stats = poll(base + "/stats/requests", lambda r: r.status_code == 200 and r.json().get("extended_stats"))
        (tab,) = stats.json()["extended_stats"]
        assert tab["key"] == "llm" and tab["data"]
        report = poll(base + "/llm/report", lambda r: r.status_code == 200, timeout_s=180)
        assert "text/html" in report.headers["Content-Type"] and "spec-k4" in report.text
        after = requests.get(base + "/llm/rows", timeout=5).json()
        assert after["report"] == "/llm/report"
        assert {r["variant"] for r in after["rows"]} == {"baseline", "spec-k4"}
        assert locust.wait(timeout=120) is not None
    finally:
        if locust.poll() is None:
            locust.kill()
            locust.wait()
    assert (tmp_path / "ui" / "report.html").exists()

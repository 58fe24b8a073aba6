"""The cockpit with a run under way, driven over HTTP as a page or a second operator would: Locust's own routes
refuse other origins and rebound names like the plugin's, every JSON answer is strict JSON, a second start is
refused with the run it would disturb, and Stop is recorded in the run directory like SIGTERM."""

import json
import subprocess
import sys
import time

import requests

from tests.e2e.test_webui import free_port, poll
from tests.helpers import LOCUSTFILE, REPO, RefServerProcess, terminate

EVIL = {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"}


def strict(text: str):
    """JSON as a browser's parser reads it: NaN and Infinity are errors."""
    return json.loads(text, parse_constant=lambda name: (_ for _ in ()).throw(ValueError(f"not JSON: {name}")))


def test_locusts_routes_are_guarded_a_second_start_is_refused_and_stop_is_recorded(tmp_path):
    server = RefServerProcess("--ttft-s", "0.01", "--gap-s", "0.005")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    reports = tmp_path / "reports"
    log = (tmp_path / "locust.log").open("w")
    command = [sys.executable, "-m", "locust", "-f", LOCUSTFILE, "--web-port", str(port), "--autostart"]
    command += ["--scenario", "scenarios/external.yaml", "--host", server.url, "--ladder", "1,2", "--step-duration"]
    command += ["30", "--warmup", "0.5", "--run-id", "first", "--report-dir", str(reports)]
    locust = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=log)
    try:
        answers = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # strict JSON from the first answer on, the run's start included
            try:
                answer = requests.get(base + "/llm/live", timeout=10)
            except requests.RequestException:
                time.sleep(0.1)
                continue
            answers.append(strict(answer.text))
            progress = answers[-1].get("progress") or {}
            if progress.get("phase") == "steady":
                break
            time.sleep(0.1)
        assert answers and answers[-1]["progress"]["phase"] == "steady"

        for path in ("/stats/requests", "/logs", "/stats/report", "/exceptions", "/stats/requests/csv", "/llm/live"):
            refused = requests.get(base + path, headers=EVIL, timeout=10)
            assert refused.status_code == 403, path
            assert refused.headers.get("Access-Control-Allow-Origin") != "http://evil.example"
            rebound = requests.get(base + path, headers={"Host": f"evil.example:{port}"}, timeout=10)
            assert rebound.status_code == 403, path
        assert requests.post(base + "/stats/reset", headers=EVIL, timeout=10).status_code == 403
        # The LLM rows, to the UI's own page, once a request has ended (steady can begin before one has, on a busy
        # machine).
        own = poll(
            base + "/stats/requests",
            lambda r: r.status_code == 200 and strict(r.text)["extended_stats"][0]["data"],
            timeout_s=60,
        )
        assert own.headers["Access-Control-Allow-Origin"] == base

        again = requests.post(base + "/swarm", data={"user_count": "1", "spawn_rate": "1"}, timeout=30).json()
        assert again["success"] is False and "a run is under way (run first, during " in again["message"]

        time.sleep(2)  # into the steady window
        requests.get(base + "/stop", timeout=30)
        verdict = poll(base + "/llm/verdict", lambda r: r.status_code == 200, timeout_s=120).json()
    finally:
        terminate(locust, 60)
        log.close()
        server.stop()
    events = json.loads((reports / "first" / "steps.json").read_text())["events"]
    (stopped,) = [e for e in events if e["kind"] == "interrupted"]
    assert stopped["signal"] == "the web UI's Stop button" and stopped["step"] == 0
    assert stopped["cut"].startswith(f"steady window of {stopped['variant']} step 0 cut at ")
    assert stopped["cut"].endswith(" s of 30 s")
    written = json.loads((reports / "first" / "verdict.json").read_text())
    assert written["exit_code"] == 7 and verdict["exit_code"] == 7
    assert "interrupted by the web UI's Stop button" in written["reasons"]["7"][0]
    assert sorted(p.name for p in reports.iterdir()) == ["first"]  # the second start started nothing

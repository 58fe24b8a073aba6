"""The web UI in headless Chromium, as a user drives it: the form shows the scenario, a bad value is refused with
the command line's words, a typed value reaches the run (env.json), the LLM tab shows the run live and its
verdict, links work, and the page loads nothing from anywhere but the Locust server.

``LOCUST_LLM_SCREENSHOTS=docs`` saves the three screenshots docs/web-ui.md shows (form, live tab, verdict).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import requests
import yaml
from gevent.pywsgi import WSGIServer

from tests.browser import Chromium, chromium_binary
from tests.e2e.test_webui import free_port, poll
from tests.helpers import LOCUSTFILE, REPO, RefServerProcess, require_llama_server, terminate

pytestmark = pytest.mark.browser

SCENARIO = "scenarios/tiny-cpu-test.yaml"


class Cockpit:
    """A Locust web UI process and a Chromium page on it."""

    def __init__(self, tmp_path: Path, *args: str):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.report_dir = tmp_path / "reports"
        command = [
            sys.executable,
            "-m",
            "locust",
            "-f",
            LOCUSTFILE,
            "--web-host",
            "127.0.0.1",
            "--web-port",
            str(self.port),
            "--report-dir",
            str(self.report_dir),
            *args,
        ]
        self.log = (tmp_path / "locust.log").open("w")
        self.locust = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=self.log)
        self.browser = None
        try:
            poll(self.base + "/", lambda r: r.status_code == 200)
            self.browser = Chromium(chromium_binary())
            self.browser.load(self.base + "/", settle_s=1.0)
            self.wait(
                "document.getElementById('llm-plan-sentence') && "
                "document.getElementById('llm-plan-sentence').textContent.length > 0"
            )
        except BaseException:
            self.close()
            raise

    def js(self, expression: str):
        return self.browser.evaluate(expression)

    def wait(self, expression: str, timeout_s: float = 60.0):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = self.js(f"(() => {{ try {{ return {expression}; }} catch (e) {{ return null; }} }})()")
            if value:
                return value
            time.sleep(0.25)
        raise AssertionError(f"never true: {expression}")

    def field(self, name: str):
        return self.js(f"document.querySelector('form [name=\"{name}\"]').value")

    def type_into(self, name: str, text: str) -> None:
        """Select the field's text and type over it (real key input, as a user does)."""
        self.js(f"(() => {{ const i = document.querySelector('form [name=\"{name}\"]'); i.focus(); i.select(); }})()")
        self.browser.call("Input.insertText", {"text": text})

    def choose(self, name: str, value: str) -> None:
        self.js(f"""(() => {{ const s = document.querySelector('form [name="{name}"]'); s.focus();
                 s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change', {{bubbles: true}})); }})()""")

    def start(self) -> None:
        self.js("document.querySelector('form button[type=submit]').click()")

    def open_llm_tab(self) -> None:
        self.wait("[...document.querySelectorAll('[role=tab]')].some(t => t.textContent.trim() === 'LLM')")
        self.js("[...document.querySelectorAll('[role=tab]')].find(t => t.textContent.trim() === 'LLM').click()")

    def shot(self, tmp_path: Path, name: str) -> None:
        folder = Path(os.environ.get("LOCUST_LLM_SCREENSHOTS") or tmp_path)
        self.browser.screenshot(folder / name)
        assert (folder / name).stat().st_size > 10_000

    def close(self) -> None:
        try:
            if self.browser is not None:
                self.browser.close()
        finally:
            terminate(self.locust, 60)
            self.log.close()


@pytest.fixture
def refserver_run(tmp_path):
    server = RefServerProcess("--ttft-s", "0.02", "--gap-s", "0.01", "--tokens-per-chunk", "2")
    ui = None
    try:
        ui = Cockpit(tmp_path, "--scenario", SCENARIO, "--host", server.url)
        yield ui, server
    finally:
        if ui is not None:
            ui.close()
        server.stop()


def test_the_form_the_live_tab_and_the_verdict(refserver_run, tmp_path):
    ui, server = refserver_run
    scenario = yaml.safe_load((REPO / SCENARIO).read_text())
    # The form shows the experiment: users and ramp-up give way to a sentence, fields hold the scenario's values.
    shown = ui.js("""(() => {
        const box = n => document.querySelector(`form [name="${n}"]`).closest('.MuiFormControl-root');
        return {users: getComputedStyle(box('userCount')).display, ramp: getComputedStyle(box('spawnRate')).display,
                sentence: document.getElementById('llm-plan-sentence').textContent,
                scenarios: [...document.querySelector('form [name=scenario]').options].map(o => o.value),
                variants: [...document.querySelectorAll('[data-llm-variant]')].map(t => [t.value, t.checked])};
    })()""")
    assert shown["users"] == "none" and shown["ramp"] == "none"
    assert "the ladder drives the load" in shown["sentence"] and server.url in shown["sentence"]
    assert shown["scenarios"][0] == SCENARIO and "scenarios/tiny-cpu.yaml" in shown["scenarios"]
    assert shown["variants"] == [["external", True]]  # --host: the one server that is there
    load = scenario["load"]
    assert ui.field("ladder") == ",".join(str(x) for x in load["ladder"])
    assert float(ui.field("stepDuration")) == load["step_duration_s"]
    assert int(ui.field("maxTokens")) == load["max_tokens"] and ui.field("mode") == load["mode"]
    # The scale-out and overwrite fields are shown in their groups, with a planner's label (CSS order places them).
    boxes = ui.js("""(() => Object.fromEntries(['probes', 'scaleOut', 'gpuHourUsd', 'runId', 'overwrite'].map(n => {
        const box = document.querySelector(`form [name="${n}"]`)
            .closest('.MuiFormControl-root, .MuiFormControlLabel-root');
        const shown = getComputedStyle(box).display !== 'none' && box.getBoundingClientRect().height > 0;
        const label = box.querySelector(':scope > label, .MuiFormControlLabel-label').textContent;
        return [n, {shown, order: Number(box.style.order), label}]; })))()""")
    assert all(box["shown"] for box in boxes.values())
    assert boxes["probes"]["order"] < boxes["scaleOut"]["order"] < boxes["gpuHourUsd"]["order"]
    assert boxes["runId"]["order"] < boxes["overwrite"]["order"] < 1000  # 1000: fields the cockpit does not know
    assert boxes["scaleOut"]["label"].startswith("Scale-out: after each variant's ladder, 1 server against")
    assert boxes["overwrite"]["label"] == "Replace a run directory of that name"
    ui.shot(tmp_path, "webui-form.png")

    # A bad value is refused in the form with the words the command line uses for it.
    ui.type_into("ladder", "1,two")
    ui.start()
    alert = ui.wait("document.querySelector('[role=alert]') && document.querySelector('[role=alert]').innerText")
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "locust",
            "-f",
            LOCUSTFILE,
            "--headless",
            "--skip-log",
            "--scenario",
            SCENARIO,
            "--host",
            server.url,
            "--ladder",
            "1,two",
            "--report-dir",
            str(tmp_path / "cli"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    message = "--ladder must be a comma list of numbers, found '1,two'"
    assert message in alert and message in cli.stderr and cli.returncode == 2

    # Typed values reach the run.
    ui.type_into("ladder", "1,2")
    ui.type_into("stepDuration", "2.5")
    ui.type_into("warmup", "0.5")
    ui.type_into("runId", "from-the-form")
    assert "2 step(s) at 1, 2" in ui.js("document.getElementById('llm-plan-sentence').textContent")
    ui.start()
    ui.open_llm_tab()
    where = ui.wait(
        "document.getElementById('llm-where') && "
        "document.getElementById('llm-where').textContent.includes('measuring') && "
        "document.querySelectorAll('#llm-charts circle').length > 0 && "
        "document.getElementById('llm-where').textContent"
    )
    assert "Running external at 1 user" in where or "Running external at 2 users" in where
    left = ui.js("document.getElementById('llm-left').textContent")
    assert "left in this step" in left and "of 2" in left
    ui.shot(tmp_path, "webui-live.png")

    exit_text = ui.wait(
        "document.getElementById('llm-exit') && document.getElementById('llm-exit').textContent", timeout_s=120
    )
    run_dir = ui.report_dir / "from-the-form"
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert exit_text.startswith(f"Exit code {verdict['exit_code']} in a nightly job")
    env = json.loads((run_dir / "env.json").read_text())
    assert env["options"]["ladder"] == "1,2" and env["options"]["step_duration"] == 2.5
    assert env["options"]["warmup"] == 0.5 and env["load"]["ladder"] == [1.0, 2.0]
    levels = ui.js("[...document.querySelectorAll('#llm-charts svg')].length")
    assert levels == 4
    # Once done, each level's throughput point has its interval drawn.
    assert ui.js("document.querySelectorAll('#llm-charts svg')[0].querySelectorAll('line.ci').length") == 2
    ui.js("window.scrollTo(0, 0)")
    ui.shot(tmp_path, "webui-verdict.png")

    links = ui.js("[...document.querySelectorAll('#llm-verdict a')].map(a => a.getAttribute('href'))")
    assert "/llm/report" in links and "/llm/files/summary.md" in links and "/llm/files/env.json" in links
    summary = requests.get(ui.base + "/llm/files/summary.md", timeout=10)
    assert summary.status_code == 200 and summary.text == (run_dir / "summary.md").read_text()
    assert summary.headers["Content-Type"].startswith("text/plain")
    for outside in ("..%2Fenv.json", "%2Fetc%2Fpasswd", "requests.parts"):
        assert requests.get(f"{ui.base}/llm/files/{outside}", timeout=10).status_code == 404

    assert ui.browser.problems() == []
    assert all(url.startswith((ui.base, "data:")) for url in ui.browser.requests()), ui.browser.requests()


@pytest.mark.server
def test_choosing_a_scenario_and_its_variants_in_the_form(tmp_path):
    """The command line names one scenario; the form picks another of the project's and leaves a variant out."""
    require_llama_server()
    ui = Cockpit(tmp_path, "--scenario", "scenarios/external.yaml")
    try:
        ui.choose("scenario", SCENARIO)
        ui.wait("document.querySelectorAll('[data-llm-variant]').length === 2")
        assert ui.field("ladder") == "1,2" and ui.field("maxTokens") == "32"
        baseline = ui.js("document.querySelector('[data-llm-variant=baseline]').disabled")
        assert baseline is True
        ui.js("document.querySelector('[data-llm-variant=\"spec-k4\"]').click()")
        assert ui.field("variant") == "baseline"
        ui.type_into("stepDuration", "1")
        ui.type_into("warmup", "0")
        ui.type_into("ladder", "1")
        ui.type_into("runId", "picked")
        ui.start()
        ui.open_llm_tab()
        ui.wait("!!document.getElementById('llm-exit')", timeout_s=180)
        env = json.loads((ui.report_dir / "picked" / "env.json").read_text())
        assert env["scenario_file"].endswith("tiny-cpu-test.yaml") and env["variants"] == ["baseline"]
        assert ui.browser.problems() == []
    finally:
        ui.close()


def test_a_page_of_another_origin_can_neither_start_a_run_nor_read_a_file(tmp_path):
    """The cockpit with no --web-host: it listens on 127.0.0.1 only (and says so). A page served from another
    origin, open in the same browser, tries what a malicious page would: a cross-origin fetch of a run file, a
    form posted to /swarm (which would start a run aimed at any host), a no-cors POST to /swarm and /stop. Nothing
    is read, nothing starts or stops; the same fetch from the cockpit's own page reads the file. A symbolic link
    or a FIFO put in the run directory is neither listed nor served."""
    server = RefServerProcess("--ttft-s", "0.005", "--gap-s", "0.002")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    reports = tmp_path / "reports"
    log = (tmp_path / "locust.log").open("w")
    command = [sys.executable, "-m", "locust", "-f", LOCUSTFILE, "--web-port", str(port), "--autostart"]
    command += ["--scenario", "scenarios/external.yaml", "--host", server.url, "--ladder", "1", "--step-duration"]
    command += ["1", "--warmup", "0", "--min-requests", "0", "--run-id", "first", "--report-dir", str(reports)]
    locust = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=log)
    evil = WSGIServer(("127.0.0.1", 0), evil_page(base), log=None)
    evil.start()
    browser = None
    try:
        poll(base + "/llm/verdict", lambda r: r.status_code == 200, timeout_s=180)  # the first run has ended
        listening = {c.laddr for c in psutil.Process(locust.pid).net_connections("tcp") if c.status == "LISTEN"}
        assert listening == {("127.0.0.1", port)}, listening
        run_dir = reports / "first"
        (run_dir / "evil.txt").symlink_to("/etc/passwd")
        os.mkfifo(run_dir / "pipe.txt")
        files = requests.get(base + "/llm/verdict", timeout=10).json()["files"]
        assert "env.json" in files and not {"evil.txt", "pipe.txt", ".lock"} & set(files)
        for name in ("evil.txt", "pipe.txt"):
            assert requests.get(f"{base}/llm/files/{name}", timeout=10).status_code == 404

        browser = Chromium(chromium_binary())
        browser.load(f"http://127.0.0.1:{evil.server_port}/", settle_s=0.5)
        read = browser.evaluate(
            f"fetch('{base}/llm/files/env.json').then(r => r.text(), e => 'blocked: ' + e)", await_promise=True
        )
        assert read.startswith("blocked: TypeError"), read[:200]
        browser.evaluate(
            f"fetch('{base}/swarm', {{method: 'POST', mode: 'no-cors', body: new URLSearchParams("
            f"{{user_count: '1', spawn_rate: '1', host: 'http://attacker.example', run_id: 'evil'}})}}).then(() => 1)",
            await_promise=True,
        )
        browser.evaluate(f"fetch('{base}/stop', {{mode: 'no-cors'}}).then(() => 1)", await_promise=True)
        browser.events.clear()  # the next load event is the form's answer
        browser.evaluate("document.getElementById('attack').submit()")  # a cross-site form post: a navigation
        browser.wait_event("Page.loadEventFired")
        refused = browser.evaluate("document.body.innerText")
        assert "cross-origin requests to the cockpit are refused" in refused, refused[:300]

        browser.load(base + "/", settle_s=0.5)  # the cockpit's own page reads the same file
        own = browser.evaluate(f"fetch('{base}/llm/files/env.json').then(r => r.text())", await_promise=True)
        assert json.loads(own)["run_id"] == "first"
        assert requests.get(base + "/llm/live", timeout=10).json()["run_id"] == "first"  # nothing else started
        assert sorted(p.name for p in reports.iterdir()) == ["first"]
    finally:
        if browser is not None:
            browser.close()
        evil.stop()
        terminate(locust, 60)
        log.close()
        server.stop()
    text = (tmp_path / "locust.log").read_text()
    assert "the web UI listens on 127.0.0.1 only" in text
    # Said once with a count, not once per refusal (a page looping on them must not flood the log and the loop).
    assert "cross-origin request(s) (said at most every 10s), the last" in text, text[-3000:]


def evil_page(cockpit: str):
    """A WSGI app serving one page of another origin that aims at the cockpit."""
    page = f"""<!doctype html><html><body>
        <form id="attack" method="post" action="{cockpit}/swarm">
          <input name="user_count" value="1"><input name="spawn_rate" value="1">
          <input name="host" value="http://attacker.example"><input name="run_id" value="evil">
        </form></body></html>""".encode()

    def app(_environ, start_response):
        start_response("200 OK", [("Content-Type", "text/html"), ("Content-Length", str(len(page)))])
        return [page]

    return app

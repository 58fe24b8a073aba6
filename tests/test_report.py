"""report.html, steps.csv and summary.md: a real run rendered in real headless Chromium, escaping of
server-supplied strings, graceful rendering of sparse run directories, and exports equal to summary.json."""

import base64
import csv
import html.parser
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from locust_llm.analysis.summary import write_summary
from locust_llm.recorder import records_table
from locust_llm.records import RequestRecord
from locust_llm.report import render_report, steps_csv, summary_markdown
from locust_llm.report.exports import md, step_rows
from locust_llm.report.render import render_html

from .conftest import require_llama_server

REPO = Path(__file__).resolve().parent.parent
PAYLOAD = "<script>alert(1)</script>"
PAYLOAD_TITLE = "<script>document.title='pwned'</script>"
PAYLOAD_IMG = "\"><img src=x onerror=alert(2)>"
EVIL_VARIANT = "spec\"><svg onload=alert(4)>"


# -- a small Chrome DevTools Protocol client (websocket-client, installed with locust) ------------------
def chromium_binary() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed; CI must install the Debian package `chromium`")
    pytest.skip("chromium not installed (apt-get install chromium)")


class Chromium:
    """Headless Chromium driven over CDP; collects console, exception, log, dialog and network events."""

    def __init__(self, binary: str, width: int = 1280, height: int = 1600):
        import websocket

        self.profile = tempfile.mkdtemp(prefix="chromium-profile-")
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115
        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--hide-scrollbars", "--remote-debugging-port=0",
             f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr)
        self.events: list[dict] = []
        self._id = 0
        try:
            port = self._port()
            deadline = time.monotonic() + 30
            while True:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as response:
                    pages = [t for t in json.loads(response.read()) if t.get("type") == "page"]
                if pages or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
            for domain in ("Page", "Runtime", "Network", "Log"):
                self.call(f"{domain}.enable")
        except BaseException:
            self.close()
            raise

    def _port(self) -> int:
        marker = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (marker.exists() and marker.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stderr.seek(0)
                raise RuntimeError(f"chromium did not start: {self.stderr.read().decode(errors='replace')[-2000:]}")
            time.sleep(0.05)
        return int(marker.read_text().split()[0])

    def call(self, method: str, params: dict | None = None, timeout: float = 60) -> dict:
        self._id += 1
        ident = self._id
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = json.loads(self.ws.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)
        raise TimeoutError(method)

    def wait_event(self, name: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        seen = len(self.events)
        for event in self.events:
            if event["method"] == name:
                return event
        while time.monotonic() < deadline:
            message = json.loads(self.ws.recv())
            if "method" in message:
                self.events.append(message)
                if message["method"] == name:
                    return message
        raise TimeoutError(f"{name} (saw {[e['method'] for e in self.events[seen:]]})")

    def load(self, url: str, settle_s: float = 0.5) -> None:
        self.events.clear()
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")
        self.evaluate("1")  # drain events sent while loading
        time.sleep(settle_s)
        self.evaluate("1")

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    def screenshot(self, path: Path, y: float = 0, height: float | None = None) -> None:
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": y, "width": size["width"], "height": height or size["height"] - y, "scale": 1}
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip})
        path.write_bytes(base64.b64decode(data["data"]))

    def problems(self) -> list[str]:
        """Console errors/warnings, uncaught exceptions, error log entries and dialogs of the last load."""
        out = []
        for e in self.events:
            method, params = e["method"], e.get("params", {})
            if method == "Runtime.exceptionThrown":
                out.append(f"exception: {params.get('exceptionDetails')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
                out.append(f"console.{params.get('type')}: {params.get('args')}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
                out.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
            elif method == "Page.javascriptDialogOpening":
                out.append(f"dialog: {params.get('message')}")
        return out

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def close(self) -> None:
        try:
            if getattr(self, "ws", None):
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(10)
            self.stderr.close()
            shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    chrome = Chromium(chromium_binary())
    yield chrome
    chrome.close()


# -- HTML inspection without a browser ----------------------------------------------------------------
class Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def parse(text: str) -> list[tuple[str, dict]]:
    parser = Tags()
    parser.feed(text)
    return parser.tags


def assert_inert(text: str) -> None:
    """No script, no event handler, nothing that loads from anywhere."""
    tags = parse(text)
    names = {t for t, _ in tags}
    assert not names & {"script", "img", "iframe", "object", "embed", "link", "audio", "video", "source", "base"}
    for tag, attrs in tags:
        for key, value in attrs.items():
            assert not key.startswith("on"), (tag, key)
            if key in ("src", "href", "xlink:href", "action", "data"):
                assert value is None or value.startswith("#"), (tag, key, value)


# -- a real run against the CPU llama.cpp server ---------------------------------------------------------
@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    require_llama_server()
    out = tmp_path_factory.mktemp("report-runs")
    command = [sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "spec_decode.py"), "--headless",
               "--scenario", "scenarios/tiny-cpu-test.yaml", "--ladder", "1,2,4", "--step-duration", "4",
               "--warmup", "1", "--run-id", "report", "--report-dir", str(out), "--skip-log"]
    done = subprocess.run(command, check=False, cwd=REPO, capture_output=True, text=True, timeout=400)
    run_dir = out / "report"
    # The exit code is the nightly gates' business (SLO / regression codes); this test needs the run directory.
    for name in ("summary.json", "steps.json", "env.json", "requests.parquet"):
        assert (run_dir / name).exists(), f"{name} missing (rc={done.returncode}): {done.stderr[-3000:]}"
    path = render_report(run_dir)
    return run_dir, path


def test_real_report_is_self_contained(real_run):
    run_dir, path = real_run
    text = path.read_text()
    assert path == run_dir / "report.html"
    assert "could not be rendered" not in text
    assert_inert(text)
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(
        "http://127.0.0.1", "")  # the only URLs are the SVG namespace and the server's local address (text)
    assert "https://" not in text
    summary = json.loads((run_dir / "summary.json").read_text())
    (comparison,) = summary["comparisons"]
    assert str(__import__("markupsafe").escape(comparison["recommendation"])) in text
    assert text.count("<svg") >= 7


def test_real_report_in_chromium(real_run, browser, tmp_path):
    run_dir, path = real_run
    browser.load(path.as_uri())
    assert browser.problems() == []
    urls = browser.requests()
    assert urls and all(u.startswith(("file://", "data:")) for u in urls), urls
    dom = browser.evaluate("""(() => ({
        title: document.title,
        svgs: document.querySelectorAll('svg.chart').length,
        paths: document.querySelectorAll('svg.chart path, svg.chart circle').length,
        scripts: document.querySelectorAll('script').length,
        sections: [...document.querySelectorAll('section[id]')].map(s => s.id),
        ladderRows: document.querySelectorAll('#ladder tbody tr').length,
        width: document.documentElement.scrollWidth,
        verdict: document.querySelector('#verdict .rec') && document.querySelector('#verdict .rec').innerText,
    }))()""")
    assert dom["title"] == "locust-llm report \u2014 report"
    assert dom["svgs"] >= 7 and dom["paths"] > 20 and dom["scripts"] == 0
    assert {"verdict", "conditions", "charts", "ladder", "speedup", "consistency", "validity", "events",
            "telemetry", "method"} <= set(dom["sections"])
    assert dom["ladderRows"] == 2 * 3 * 2  # two tables per variant, three levels
    assert dom["width"] <= 1280  # nothing overflows the page sideways
    (comparison,) = json.loads((run_dir / "summary.json").read_text())["comparisons"]
    assert comparison["recommendation"] in dom["verdict"]
    browser.screenshot(tmp_path / "report.png")
    assert (tmp_path / "report.png").stat().st_size > 10_000
    pdf = browser.call("Page.printToPDF", {"printBackground": True})
    assert len(base64.b64decode(pdf["data"])) > 10_000
    assert browser.problems() == []


# -- synthetic run directories -----------------------------------------------------------------------------
def _requests(run_id: str, variants: dict, levels: list, t: float, rng, window: float = 6.0,
              fail: dict | None = None) -> tuple[list, list]:
    """Closed-loop streams per level; ``variants`` maps name -> per-token seconds. Returns (rows, steps)."""
    rows, steps = [], []
    for variant, tpot in variants.items():
        for step, level in enumerate(levels):
            steady = t + 1.0
            steps.append({"variant": variant, "step": step, "level": float(level), "mode": "closed",
                          "users": level, "t_start": t, "t_steady": steady, "t_end": steady + window})
            failing = (fail or {}).get((variant, level))
            for stream in range(level):
                send = t + 0.01 * stream
                while send < steady + window:
                    phase = "steady" if steady <= send < steady + window else "warmup"
                    if failing:
                        rows.append(RequestRecord(run_id=run_id, variant=variant, level=level, step=step, phase=phase,
                                                  request_id=f"{variant}-{step}-{len(rows)}", t_send=send,
                                                  error_class="connect_error", error_message=failing).to_dict())
                        send += 0.5
                        continue
                    gaps = rng.uniform(0.5, 1.5, 19) * tpot * (1 + 0.3 * math.log2(level))
                    offsets = 0.02 + np.concatenate([[0.0], np.cumsum(gaps)])
                    rows.append(RequestRecord(
                        run_id=run_id, variant=variant, level=level, step=step, phase=phase,
                        request_id=f"{variant}-{step}-{len(rows)}", output_tokens=20, token_source="server_events",
                        t_send=send, t_first=send + offsets[0], t_end=send + offsets[-1],
                        chunk_offsets=offsets.tolist(), chunk_tokens=[1] * 20, finish_reason="length",
                        http_status=200, draft_n=16 if variant != "baseline" else None,
                        draft_accepted=12 if variant != "baseline" else None).to_dict())
                    send += offsets[-1]
            t = steady + window + 2.0
    return rows, steps


def hostile_run(path: Path) -> Path:
    """Two variants, telemetry with a gap, a server exit, errors and a consistency defect, and
    server-supplied strings that try to inject markup everywhere they surface."""
    rng = np.random.default_rng(3)
    variants = {"baseline": 0.010, EVIL_VARIANT: 0.006}
    rows, steps = _requests("hostile", variants, [1, 2, 4], 1_800_000_000.0, rng)
    rows.append(RequestRecord(run_id="hostile", variant=EVIL_VARIANT, level=2, step=1, phase="steady",
                              request_id="failed-1", t_send=steps[4]["t_steady"] + 0.5, error_class="http_error",
                              error_message=f"upstream said {PAYLOAD} {PAYLOAD_IMG}", http_status=500).to_dict())
    pq.write_table(records_table(rows), path / "requests.parquet")
    events = [{"kind": "server_exited", "t": steps[-1]["t_end"] - 1, "variant": EVIL_VARIANT,
               "log_tail": f"fatal: {PAYLOAD}\nlast line {PAYLOAD_TITLE}"}]
    (path / "steps.json").write_text(json.dumps({"steps": steps, "events": events}))
    server = {"engine": "llamacpp", "version": f"version: 1.0 {PAYLOAD}", "model": f"/models/{PAYLOAD}.gguf",
              "served_model": f"evil{PAYLOAD}{PAYLOAD_TITLE}", "command": ["llama-server", "--alias", PAYLOAD_IMG],
              "launched": True}
    env = {"run_id": "hostile", "baseline": "baseline", "variants": list(variants),
           "scenario": {"name": f"scenario {PAYLOAD}", "slo": {"ttft_ms": None, "tpot_ms": None, "e2e_ms": None},
                        "variants": {"baseline": {}, EVIL_VARIANT: {"speculative": {"type": PAYLOAD, "n_max": 4}}}},
           "load": {"mode": "closed", "ladder": [1, 2, 4], "step_duration_s": 6.0, "warmup_s": 1.0,
                    "prompt_tokens": 32, "max_tokens": 20, "api": "completions", "seed": 0},
           "servers": {"baseline": dict(server, variant="baseline", speculative=None),
                       EVIL_VARIANT: dict(server, variant=EVIL_VARIANT, speculative={"type": PAYLOAD, "n_max": 4})},
           "host": {"hostname": f"host{PAYLOAD}", "cpu_count": 2, "gpu": PAYLOAD_IMG}, "seed": 0}
    (path / "env.json").write_text(json.dumps(env))
    outputs = [{"prompt_id": f"p/{i}", "max_tokens": 8, "text": f"text {i} {PAYLOAD}", "tokens": [1, 2, 3, i]}
               for i in range(3)]
    diverged = [dict(o) for o in outputs]
    diverged[1] = dict(diverged[1], text=f"other {PAYLOAD_TITLE}", tokens=[1, 2, 9, 1])
    (path / "consistency.json").write_text(json.dumps({"baseline": outputs, EVIL_VARIANT: diverged}))
    telemetry = []
    for s in steps:
        for t in np.arange(s["t_start"], s["t_end"], 1.0):
            if s["variant"] == EVIL_VARIANT and s["step"] == 1 and t > s["t_steady"] + 2:
                continue  # a gap
            k = t - steps[0]["t_start"]
            telemetry += [(t, s["variant"], "scrape", "requests_running", "{}", float(s["users"])),
                          (t, s["variant"], "process", "process_cpu_cores", "{}", 1.2),
                          (t, s["variant"], "scrape", "generation_tokens", "{}", 100.0 * k),
                          (t, s["variant"], "scrape", "spec_draft_tokens", "{}", 40.0 * k),
                          (t, s["variant"], "scrape", "spec_accepted_tokens", "{}", 30.0 * k)]
    pd.DataFrame(telemetry, columns=["t", "variant", "source", "metric", "labels", "value"]).to_parquet(
        path / "telemetry.parquet")
    (path / "telemetry.json").write_text(json.dumps({"gaps": [], "notes": [{"kind": "x", "t": 0,
                                                                             "message": f"note {PAYLOAD}"}]}))
    (path / "verdict.json").write_text(json.dumps({
        "exit_code": 3, "reasons": {"3": [f"{EVIL_VARIANT} @ 1: ttft_p99_ms 25 > 1 {PAYLOAD}"]},
        "checks": [{"gate": f"ttft_p99_ms{PAYLOAD}", "variant": EVIL_VARIANT, "level": 1.0, "value": 25.0, "limit": 1.0,
                    "ok": False}]}))
    write_summary(path)
    return path


def minimal_run(path: Path) -> Path:
    """One variant, no telemetry, no client samples, no consistency check; every request of level 2 failed."""
    rng = np.random.default_rng(5)
    rows, steps = _requests("minimal", {"baseline": 0.01}, [1, 2], 1_800_000_000.0, rng,
                            fail={("baseline", 2): "connection refused"})
    pq.write_table(records_table(rows), path / "requests.parquet")
    (path / "steps.json").write_text(json.dumps({"steps": steps, "events": []}))
    (path / "env.json").write_text(json.dumps({"run_id": "minimal", "baseline": "baseline"}))
    write_summary(path)
    return path


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    path = hostile_run(tmp_path_factory.mktemp("hostile"))
    render_report(path)
    return path


def test_server_strings_are_escaped(hostile):
    text = (hostile / "report.html").read_text()
    assert "could not be rendered" not in text
    assert_inert(text)
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    # model name, error message, consistency text, log tail, command line: each shown, as text
    for needle in (f"evil{escaped}", f"upstream said {escaped}", f"text 0 {escaped}", f"fatal: {escaped}",
                   "&#34;&gt;&lt;img src=x onerror=alert(2)&gt;"):
        assert needle in text, needle
    assert "<script" not in text.lower() and "<img" not in text.lower() and "<svg onload" not in text.lower()
    summary_md = (hostile / "summary.md").read_text()
    assert "<" not in summary_md and "&lt;script&gt;alert(1)" in summary_md


def test_escaped_strings_do_not_run_in_chromium(hostile, browser):
    browser.load((hostile / "report.html").as_uri())
    assert browser.problems() == []  # no alert dialog, no error, no CSP violation
    assert all(u.startswith(("file://", "data:")) for u in browser.requests())
    dom = browser.evaluate("""(() => ({
        title: document.title,
        injected: document.querySelectorAll('script, img, iframe, object, embed, svg [onload], [onerror]').length,
        handlers: [...document.querySelectorAll('*')].filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
        text: document.body.innerText,
        svgs: document.querySelectorAll('svg.chart').length,
    }))()""")
    assert dom["title"] == "locust-llm report \u2014 hostile"
    assert dom["injected"] == 0 and dom["handlers"] == 0
    assert PAYLOAD in dom["text"] and EVIL_VARIANT in dom["text"]  # shown to the reader as text
    assert dom["svgs"] >= 7


def test_hostile_report_flags_what_went_wrong(hostile):
    text = (hostile / "report.html").read_text()
    assert "DEFECT: diverged" in text and "Consistency defect" in text
    assert "server_exited" in text
    assert "http_error" in text
    assert "Nightly gates: exit code 3 (an SLO gate failed)" in text and "ttft_p99_ms&lt;script&gt;" in text


# -- graceful with little data ------------------------------------------------------------------------------
def test_minimal_run_renders_with_not_measured_notes(tmp_path):
    run_dir = minimal_run(tmp_path)
    path = render_report(run_dir)
    text = path.read_text()
    assert "could not be rendered" not in text
    assert_inert(text)
    assert "single variant: no baseline-vs-variant comparison was measured" in text
    assert "server telemetry over time: not measured" in text
    assert "consistency: not measured" in text
    assert "speed-up: not measured" in text
    assert "all failed" in text  # the failed step is marked
    assert "connection refused" in text
    rows = list(csv.DictReader((run_dir / "steps.csv").open()))
    assert [(r["variant"], r["level"]) for r in rows] == [("baseline", "1.0"), ("baseline", "2.0")]
    assert rows[1]["error_rate"] == "1.0"


def test_empty_and_missing_figures_never_crash(tmp_path, hostile):
    summary = json.loads((hostile / "summary.json").read_text())

    def blank(value):
        if isinstance(value, dict):
            return {k: blank(v) for k, v in value.items()}
        if isinstance(value, list):
            return [blank(v) for v in value]
        return None if isinstance(value, (int, float)) and not isinstance(value, bool) else value

    for variant in (blank(summary), {}, {"variants": {"x": {"steps": [{}]}}, "comparisons": [{}]},
                    {"variants": {"a": {"steps": [{"level": 1, "ttft_ms": None, "acceptance": None}]}},
                     "comparisons": [{"variant": "a", "steps": [{"level": 1, "output_tps_speedup": None}]}],
                     "consistency": {"a": {"prompts": [{}]}}, "events": [{}, "junk"]}):
        text = render_html(hostile, variant)
        assert "could not be rendered" not in text, variant
        assert "n/m" in text or "not measured" in text
        steps_csv(variant)
        summary_markdown(variant)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "locust-llm report" in render_report(empty, {}).read_text()


# -- exports -----------------------------------------------------------------------------------------------
def _leaves(value, skip=("acceptance", "window", "t_from", "t_to")):
    if isinstance(value, dict):
        for k, v in value.items():
            if k not in skip:
                yield from _leaves(v, skip)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v, skip)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value


def test_steps_csv_equals_summary(hostile):
    summary = json.loads((hostile / "summary.json").read_text())
    frame = pd.read_csv(hostile / "steps.csv")
    expected = [(v, s["level"]) for v in ("baseline", EVIL_VARIANT) for s in summary["variants"][v]["steps"]]
    assert list(zip(frame["variant"], frame["level"])) == expected
    comparison = {s["level"]: s for s in summary["comparisons"][0]["steps"]}
    for _, row in frame.iterrows():
        step = next(s for s in summary["variants"][row["variant"]]["steps"] if s["level"] == row["level"])
        assert row["ttft_ms_p95"] == step["ttft_ms"]["p95"]
        assert row["tpot_ms_p50_ci95_hi"] == step["tpot_ms"]["ci95"]["p50"][1]
        assert row["output_tps"] == step["output_tps"]
        assert row["output_tps_ci95_lo"] == step["output_tps_ci95"][0]
        assert row["requests"] == step["requests"] and row["errors"] == step["errors"]
        assert row["error_rate"] == step["error_rate"]
        if row["variant"] == EVIL_VARIANT:
            speed = comparison[row["level"]]["output_tps_speedup"]
            assert row["speedup_output_tps"] == speed["value"]
            assert row["speedup_output_tps_ci95_hi"] == speed["ci95"][1]
        else:
            assert math.isnan(row["speedup_output_tps"])
        # every number of the step is somewhere in its row, exactly
        cells = {float(v) for v in row.to_numpy() if isinstance(v, (int, float, np.number)) and not pd.isna(v)}
        assert {float(v) for v in _leaves(step)} <= cells


def test_summary_md_pastes_into_a_ticket(hostile):
    summary = json.loads((hostile / "summary.json").read_text())
    text = (hostile / "summary.md").read_text()
    (comparison,) = summary["comparisons"]
    assert md(comparison["recommendation"]) in text
    assert "Recommendation:" in text and "**Conditions**" in text
    assert "consistency defect" in text
    table_rows = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(table_rows) == 2 * 3
    assert all(line.count(" | ") == table_rows[0].count(" | ") for line in table_rows[:3])


def test_csv_rows_one_per_variant_and_level(hostile):
    rows = step_rows(json.loads((hostile / "summary.json").read_text()))
    assert len(rows) == 6 and len({(r["variant"], r["level"]) for r in rows}) == 6
    with (hostile / "steps.csv").open() as handle:
        header = next(csv.reader(handle))
    assert header[:4] == ["variant", "is_baseline", "step", "level"] and len(header) == len(set(header))

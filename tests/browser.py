"""Headless Chromium driven over the Chrome DevTools Protocol (websocket-client, installed with Locust):
console, exception, log, dialog and network events are collected so tests can assert there were none.
"""

import base64
import html.parser
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import terminate


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
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--hide-scrollbars",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
        )
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

    def evaluate(self, expression: str, await_promise: bool = False):
        """The expression's value (with ``await_promise``, the value its promise settles to)."""
        params = {"expression": expression, "returnByValue": True, "awaitPromise": await_promise}
        result = self.call("Runtime.evaluate", params)
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
            terminate(self.proc, 10)
            self.stderr.close()
            shutil.rmtree(self.profile, ignore_errors=True)


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

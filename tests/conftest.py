"""Shared fixtures and the markers: ``server`` (a real llama-server), ``e2e`` (Locust in a subprocess or a
real server; every test under ``tests/e2e``), ``browser`` (headless Chromium)."""

import locust  # noqa: F401, I001  (gevent must patch ssl/sockets before any test imports requests)

from pathlib import Path

import pytest

from tests.browser import Chromium, chromium_binary
from tests.helpers import RefServerProcess

E2E_DIR = Path(__file__).parent / "e2e"


def pytest_collection_modifyitems(items):
    for item in items:
        if E2E_DIR in Path(item.fspath).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def refserver():
    """A reference server shared by the session; behaviour is set per request (``"ref"`` in the body)."""
    server = RefServerProcess()
    yield server
    server.stop()


@pytest.fixture
def refserver_factory():
    """Start fresh reference servers with CLI flags (e.g. ``--stall-once-s``); all stopped at teardown."""
    started: list[RefServerProcess] = []

    def start(*args: str) -> RefServerProcess:
        started.append(RefServerProcess(*args))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium for the module's tests (skipped where it is not installed, except in CI)."""
    chrome = Chromium(chromium_binary())
    yield chrome
    chrome.close()


def pytest_runtest_setup(item):
    if "browser" in item.fixturenames:
        item.add_marker(pytest.mark.browser)

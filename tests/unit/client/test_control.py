"""Control-plane requests (/v1/models, /tokenize) and the consistency prompts never hold a run: a total deadline
(not a per-read timeout), a cap on what is read, and a stop after the first failure or on SIGTERM."""

import logging
import socket
import subprocess
import sys
import textwrap
import time

import gevent
import pytest
from gevent.event import Event
from gevent.server import StreamServer

from locust_llm.client import control, http
from locust_llm.client.greedy import greedy_outputs
from locust_llm.client.tokenizer import ServerTokenizer
from locust_llm.servers.base import get_json
from locust_llm.workload import PromptItem, WorkloadError
from tests.helpers import REPO

pytestmark = pytest.mark.timeout(60)  # a regression shows as a failure, not as a hung suite
TRICKLES = 150  # the misbehaving server gives up after 30 s of trickling (a bound, far beyond every deadline here)
HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


class Misbehaving:
    """A loopback server that answers every request the same bad way; counts the requests it got."""

    def __init__(self, mode: str, on_request=None):
        self.mode, self.on_request, self.requests = mode, on_request, 0
        self.server = StreamServer(("127.0.0.1", 0), self.handle)

    def __enter__(self):
        self.server.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        return self

    def __exit__(self, *exc):
        self.server.stop(timeout=1)

    def handle(self, sock, _address):
        sock.recv(65536)
        self.requests += 1
        if self.on_request:
            self.on_request()
        try:
            if self.mode == "trickle_body":  # headers, then one byte of body every 0.2 s, forever
                sock.sendall(HEADERS)
                for _ in range(TRICKLES):
                    sock.sendall(b"1\r\n{\r\n")
                    gevent.sleep(0.2)
            elif self.mode == "trickle_headers":  # a header line that never ends
                sock.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                for _ in range(TRICKLES):
                    sock.sendall(b"a")
                    gevent.sleep(0.2)
            elif self.mode == "ok":
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            elif self.mode in ("endless_error", "endless_answer"):
                status = b"500 Internal Server Error" if self.mode == "endless_error" else b"200 OK"
                sock.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\n\r\n")
                for _ in range(1024):  # 64 MiB: more than any cap
                    sock.sendall(b" " * 65536)
                    gevent.sleep(0)
        except OSError:
            pass


@pytest.mark.parametrize("mode", ["trickle_body", "trickle_headers"])
def test_a_trickling_server_is_cut_off_at_the_total_deadline(mode):
    with Misbehaving(mode) as server:
        started = time.monotonic()
        with pytest.raises(control.ControlError, match="no complete answer .* within 1 s"):
            control.call(server.url + "/v1/models", timeout_s=1.0)
        assert time.monotonic() - started < 3
        started = time.monotonic()
        with pytest.raises(OSError, match="within 1 s"):
            get_json(server.url + "/v1/models", timeout_s=1.0)
        assert time.monotonic() - started < 3


def test_an_endless_answer_is_read_only_up_to_its_cap():
    with Misbehaving("endless_error") as server:
        status, body = control.call(server.url + "/tokenize", {"content": "x"}, timeout_s=10)
        assert status == 500 and 0 < len(body) <= control.ERROR_BODY_BYTES
    with Misbehaving("endless_answer") as server, pytest.raises(control.ControlError, match="longer than 65536 bytes"):
        control.call(server.url + "/v1/models", timeout_s=10, max_bytes=65536)


def test_nothing_listening_is_unreachable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(control.Unreachable):
        control.call(f"http://127.0.0.1:{port}/v1/models", timeout_s=2)


def test_tokenize_has_a_total_deadline_and_a_cap():
    with Misbehaving("trickle_body") as server:
        started = time.monotonic()
        with pytest.raises(WorkloadError, match="within 1 s"):
            ServerTokenizer(server.url, timeout=1.0).count("hello")
        assert time.monotonic() - started < 5  # two request shapes tried, one second each
    with Misbehaving("endless_answer") as server, pytest.raises(WorkloadError, match="longer than"):
        ServerTokenizer(server.url, timeout=30).count("hello")


def test_the_deadline_holds_without_gevent_too():
    """``servers`` and ``workload`` also run unpatched (``locust-llm serve``): the timer still ends the read."""
    script = textwrap.dedent("""
        import socket, threading, time
        from locust_llm.client import control, http
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        def trickle():
            sock, _ = listener.accept()
            sock.recv(65536)
            sock.sendall(b"HTTP/1.1 200 OK\\r\\nX-Slow: ")
            try:
                for _ in range(150):
                    sock.sendall(b"a")
                    time.sleep(0.2)
            except OSError:
                pass
        threading.Thread(target=trickle, daemon=True).start()
        started = time.monotonic()
        try:
            control.call(f"http://127.0.0.1:{listener.getsockname()[1]}/v1/models", timeout_s=1.0)
        except control.ControlError as exc:
            print(f"{time.monotonic() - started:.2f} {exc}")
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=30)
    took, _, message = done.stdout.strip().partition(" ")
    assert "within 1 s" in message, done.stderr
    assert float(took) < 3


PROMPTS = [PromptItem("b", f"prompt {i}", 2, 8, True, f"b/{i}") for i in range(4)]


def test_the_consistency_check_stops_after_the_first_failure_within_its_deadline():
    with Misbehaving("trickle_body") as server:
        started = time.monotonic()
        answers = greedy_outputs(server.url, "vllm", "m", PROMPTS, deadline_s=1.0)
        assert time.monotonic() - started < 3
        assert server.requests == 1  # the other prompts were never sent
    assert [a.prompt_id for a in answers] == ["b/0", "b/1", "b/2", "b/3"]
    assert "no complete answer within" in answers[0].error
    assert all(a.text is None and a.error.startswith("not asked after: _Deadline") for a in answers[1:])


def test_a_stop_abandons_the_consistency_prompt_in_flight():
    stop = Event()
    with Misbehaving("trickle_body", on_request=stop.set) as server:
        started = time.monotonic()
        answers = greedy_outputs(server.url, "vllm", "m", PROMPTS, deadline_s=60.0, stop=stop)
        assert time.monotonic() - started < 3
        assert server.requests == 1
    assert answers[0].error == "stopped: the run was interrupted"
    assert all("not asked after: stopped" in a.error for a in answers[1:])


def test_a_proxy_in_the_environment_is_not_used_and_said_once(monkeypatch, caplog):
    """HTTP_PROXY set (as on many corporate machines), loopback not in NO_PROXY: the streams cannot go through a
    proxy, so /metrics and every other request of the run go direct too."""
    for name in (*http.PROXY_VARIABLES, "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    with Misbehaving("ok") as server, Misbehaving("ok") as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        http._say_proxies_unused.cache_clear()
        with caplog.at_level(logging.INFO, logger=http.__name__):
            answers = [http.session("telemetry").get(server.url + "/metrics", timeout=5) for _ in range(2)]
        assert [a.status_code for a in answers] == [200, 200]
        assert server.requests == 2 and proxy.requests == 0
    said = [r.getMessage() for r in caplog.records if "HTTP_PROXY" in r.getMessage()]
    assert said == ["HTTP_PROXY set: not used; every request of the run goes directly to its server"]

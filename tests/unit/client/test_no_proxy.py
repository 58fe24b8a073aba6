"""A proxy in the environment (HTTP_PROXY, as on many corporate machines) is not used by any request of the run:
the streams cannot go through one, so /metrics, the model checks and the greedy prompts go direct too."""

import logging

import pytest
from gevent.server import StreamServer

from locust_llm.client import http

pytestmark = pytest.mark.timeout(30)


class Answering:
    """A loopback server that answers every request with ``status`` and counts them."""

    def __init__(self, status: bytes):
        self.status, self.requests = status, 0
        self.server = StreamServer(("127.0.0.1", 0), self.handle)

    def handle(self, sock, _address):
        sock.recv(65536)
        self.requests += 1
        sock.sendall(b"HTTP/1.1 " + self.status + b"\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        sock.close()

    def __enter__(self):
        self.server.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        return self

    def __exit__(self, *exc):
        self.server.stop(timeout=1)


def test_a_proxy_in_the_environment_is_not_used_and_said_once(monkeypatch, caplog):
    with Answering(b"200 OK") as server, Answering(b"502 Bad Gateway") as proxy:
        for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        http._say_proxies_unused.cache_clear()
        with caplog.at_level(logging.INFO, logger=http.__name__):
            answers = [http.session("telemetry").get(server.url + "/metrics", timeout=5) for _ in range(2)]
        assert [a.status_code for a in answers] == [200, 200]
        assert server.requests == 2 and proxy.requests == 0
        said = [r.getMessage() for r in caplog.records if "HTTP_PROXY" in r.getMessage()]
        assert said == ["HTTP_PROXY set: not used; every request of the run goes directly to its server"]

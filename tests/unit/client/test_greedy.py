"""Greedy consistency prompts never hang the run: a total deadline, and error bodies read only in part."""

import time

import gevent
from gevent.server import StreamServer

from locust_llm.client.greedy import greedy_output
from locust_llm.client.http import session


def trickle(sock, _address):
    sock.recv(65536)
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    try:
        while True:
            sock.sendall(b"1\r\n{\r\n")
            gevent.sleep(0.2)
    except OSError:
        pass


def test_a_trickling_server_is_cut_off_at_the_deadline():
    server = StreamServer(("127.0.0.1", 0), trickle)
    server.start()
    try:
        started = time.monotonic()
        with session("test") as http:
            answer = greedy_output(http, f"http://127.0.0.1:{server.server_port}", "vllm", "m", "p", 8, timeout_s=1.0)
        assert time.monotonic() - started < 3
        assert answer.text is None and "within 1 s" in answer.error
    finally:
        server.stop()


def test_an_endless_error_body_is_not_read_whole(refserver):
    started = time.monotonic()
    with session("test") as http:
        answer = greedy_output(http, refserver.url, "external", "m", "p", 8, timeout_s=30)
    assert answer.text is None and answer.error
    assert time.monotonic() - started < 5

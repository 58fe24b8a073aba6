"""The server's tokenizer, counting many texts at once: the same counts, in order, as one by one, with the calls
overlapping (a server across a network would otherwise hold the run's start for seconds per process)."""

import json

import gevent
import pytest
from gevent.pywsgi import WSGIServer

from locust_llm.client.tokenizer import ServerTokenizer
from locust_llm.workload import WorkloadError
from locust_llm.workload.tokenizers import count_each

pytestmark = pytest.mark.timeout(60)


class Tokenize:
    """``POST /tokenize`` in llama.cpp's shape: one token per word, each answer after ``delay_s``; counts the calls
    in flight at once. A text holding ``fail`` gets a 500."""

    def __init__(self, delay_s: float = 0.02):
        self.delay_s, self.in_flight, self.most_in_flight, self.calls = delay_s, 0, 0, 0
        self.server = WSGIServer(("127.0.0.1", 0), self.app, log=None)

    def __enter__(self):
        self.server.start()
        return self

    def __exit__(self, *exc):
        self.server.stop(timeout=1)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def app(self, environ, start_response):
        text = json.loads(environ["wsgi.input"].read())["content"]
        self.calls += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            gevent.sleep(self.delay_s)
        finally:
            self.in_flight -= 1
        if "fail" in text:
            start_response("500 Internal Server Error", [("Content-Type", "text/plain")])
            return [b"tokenizer broke"]
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps({"tokens": list(range(len(text.split())))}).encode()]


def test_many_texts_are_counted_together_in_order():
    texts = [" ".join(["w"] * (k % 7 + 1)) for k in range(40)]
    with Tokenize() as server:
        counter = ServerTokenizer(server.url)
        together = count_each(counter, texts)
        most = server.most_in_flight
        one_by_one = [counter.count(text) for text in texts]
    assert together == one_by_one == [k % 7 + 1 for k in range(40)]
    assert 1 < most <= ServerTokenizer.PARALLEL


def test_a_failed_count_among_many_names_the_server():
    with Tokenize(delay_s=0) as server, pytest.raises(WorkloadError, match="/tokenize .*HTTP 500 tokenizer broke"):
        count_each(ServerTokenizer(server.url), ["a b", "fail here", "c"])


def test_a_short_text_is_asked_of_the_server_once_a_long_one_every_time():
    """A stream's chunks recur (" the", a name): their counts are remembered, so a final-usage-only server is not
    asked once per chunk of every request; a long text (a whole answer) is asked each time it is counted."""
    chunks = [" the", " cat", " the", ",", " the", " cat"]
    answer = " ".join(["word"] * 20)
    with Tokenize(delay_s=0) as server:
        counter = ServerTokenizer(server.url)
        counter.count(ServerTokenizer.PROBE)
        before = server.calls
        counts = [counter.count(text) for text in chunks] + [counter.count(answer), counter.count(answer)]
        calls = server.calls - before
    assert counts == [1, 1, 1, 1, 1, 1, 20, 20]
    assert calls == 3 + 2  # three distinct chunks, the long answer twice

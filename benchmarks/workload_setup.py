"""How long a load process takes to build its prompts when the server's ``/tokenize`` is a network away: the
generator's vocabulary counted one by one against ``ServerTokenizer.count_each`` (``PARALLEL`` at a time), in one run.

A loopback ``/tokenize`` in llama.cpp's shape (one token per word) answers each call after ``--delay-ms``, as a server
across a network would; the default-shaped workload (``LoadSpec(prompt_tokens=128)``) is built against it both ways.

    python benchmarks/workload_setup.py [--delay-ms 50]

Loopback only; about 45 s at 50 ms.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import gevent
import locust  # noqa: F401  (gevent patches sockets before the client modules load)
from gevent.pywsgi import WSGIServer

from locust_llm.client.tokenizer import ServerTokenizer
from locust_llm.scenario import LoadSpec
from locust_llm.workload import Workload


class OneByOne:
    """The same server tokenizer, without ``count_each``: every text counted on its own, in turn."""

    def __init__(self, counter: ServerTokenizer):
        self.counter = counter

    def count(self, text: str) -> int:
        return self.counter.count(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay-ms", type=float, default=50.0, help="each /tokenize answer's delay")
    args = parser.parse_args()

    def tokenize(environ, start_response):
        text = json.loads(environ["wsgi.input"].read())["content"]
        gevent.sleep(args.delay_ms / 1000)
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps({"tokens": list(range(len(text.split())))}).encode()]

    server = WSGIServer(("127.0.0.1", 0), tokenize, log=None)
    server.start()
    url = f"http://127.0.0.1:{server.server_port}"
    try:
        for name, counter in (("one by one", OneByOne(ServerTokenizer(url))), ("count_each", ServerTokenizer(url))):
            started = time.perf_counter()
            Workload.from_spec(LoadSpec(prompt_tokens=128, max_tokens=8), counter, Path("."))
            print(f"{name}: {time.perf_counter() - started:.1f} s to build the workload, {args.delay_ms:g} ms a call")
    finally:
        server.stop(timeout=1)


if __name__ == "__main__":
    main()

"""The launcher's reading of a running server's context size, against canned answers on loopback: vLLM's
``max_model_len`` in ``/v1/models``, llama.cpp's per-slot ``n_ctx`` in ``/props``, and servers that say nothing."""

import json
import socket
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from locust_llm.servers.base import context_size

# Shapes as the servers send them (trimmed): vLLM lists max_model_len per model; llama.cpp's /v1/models meta has
# the training context (n_ctx_train, not what a request may hold) and /props the slot's n_ctx (-c 2048 -np 4).
VLLM = {
    "/v1/models": {
        "object": "list",
        "data": [
            {"id": "meta-llama/Llama-3.1-8B-Instruct", "object": "model", "owned_by": "vllm", "max_model_len": 8192}
        ],
    }
}
LLAMACPP = {
    "/v1/models": {
        "object": "list",
        "data": [{"id": "target.gguf", "object": "model", "meta": {"n_ctx_train": 131072, "n_vocab": 32000}}],
    },
    "/props": {"default_generation_settings": {"n_ctx": 512, "temperature": 0.8}, "total_slots": 4},
}
SILENT = {"/v1/models": {"data": [{"id": "m"}]}}


@contextmanager
def answering(routes: dict):
    """A loopback HTTP server answering GETs from ``routes`` (404 otherwise); yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = routes.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps(body if body is not None else {"error": "not found"}).encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize(
    "routes, expected",
    [(VLLM, 8192), (LLAMACPP, 512), (SILENT, None)],
    ids=["vllm-max-model-len", "llamacpp-props-n-ctx", "says-nothing"],
)
def test_context_size_reads_what_each_server_says(routes, expected):
    with answering(routes) as url:
        assert context_size(url) == expected


def test_context_size_ignores_nonsense_and_a_closed_port():
    bad = {
        "/v1/models": {"data": [{"id": "m", "max_model_len": True}]},
        "/props": {"default_generation_settings": {"n_ctx": -1}},
    }
    with answering(bad) as url:
        assert context_size(url) is None
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert context_size(f"http://127.0.0.1:{port}") is None

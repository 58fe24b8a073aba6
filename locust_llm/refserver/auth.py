"""An API key for the reference server (``--api-key KEY``): a request without ``Authorization: Bearer KEY`` is
refused with 401, as llama.cpp and vLLM refuse it, and ``GET /ref/auth`` counts the requests that came with and
without the key by method and path, so a test can show that every request of a run carried it. ``/health`` and the
oracle's own ``/ref/`` endpoints stay open (llama.cpp leaves ``/health`` open too)."""

from __future__ import annotations

import hmac
import json
from collections import Counter

__all__ = ["require_key"]


def _json(start_response, status: str, obj: object) -> list[bytes]:
    body = json.dumps(obj).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def require_key(app, key: str):
    """``app`` behind a bearer-token check that keeps count of who had the key."""
    seen = {"with_key": Counter(), "without_key": Counter()}
    expected = f"Bearer {key}".encode()

    def guarded(environ, start_response):
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        if path == "/ref/auth" and method == "GET":
            return _json(start_response, "200 OK", seen)
        if path == "/health" or path.startswith("/ref/"):
            return app(environ, start_response)
        ok = hmac.compare_digest(environ.get("HTTP_AUTHORIZATION", "").encode(), expected)
        seen["with_key" if ok else "without_key"][f"{method} {path}"] += 1
        if not ok:
            return _json(
                start_response,
                "401 Unauthorized",
                {"error": {"message": "invalid API key", "type": "authentication_error", "code": 401}},
            )
        return app(environ, start_response)

    return guarded

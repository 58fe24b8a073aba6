"""The ``requests`` session every control-plane call to a server uses (models, greedy prompts, metrics).

Locust is imported first so that gevent has patched sockets and ssl before requests and urllib3 load;
every module of the package that needs requests imports it from here.
"""

from __future__ import annotations

import os

import locust  # noqa: F401, I001  (gevent must patch sockets before requests is imported)
import requests

from . import ledger
from .engines import auth_headers

__all__ = ["requests", "session"]


def session(purpose: str, pool_size: int = 16, verify_tls: bool = True) -> requests.Session:
    """No retries behind our back, no gzip (it would batch chunks), the API key on every request, and every request
    counted under ``purpose`` (``ledger``: what the run asked of the server besides the measured streams).

    The key is set as the session's auth: otherwise requests would replace it with Basic auth from a password in
    the URL (``--host http://user:pass@...``) or from ``~/.netrc``; the streams send neither, nor does this."""

    def with_key(request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers.update(auth_headers())
        ledger.count(purpose, request.method or "GET", request.url or "")
        return request

    s = requests.Session()
    s.auth = with_key
    adapter = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=pool_size, max_retries=0)
    s.mount("http://", adapter)
    s.mount("https://", adapter)
    # The CAs the streams trust (``SSL_CERT_FILE``, read by OpenSSL) are trusted here too; requests alone would
    # read only REQUESTS_CA_BUNDLE, so a private CA would pass the streams and fail /tokenize and /metrics.
    s.verify = (
        (os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("SSL_CERT_FILE") or True) if verify_tls else False
    )
    s.headers.update({"Accept-Encoding": "identity"})
    return s

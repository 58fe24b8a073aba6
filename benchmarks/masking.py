"""How long masking a log line takes as the line grows: a run of letters (what a page sends as a path or a form
value), with ``rundir.redact.redact_text``. Masking runs on the event loop for every log record, so its cost must
grow with the line's length, never with its square.

    python benchmarks/masking.py [--lengths 8000,30000,100000] [--code PATH]

``--code`` measures another checkout's ``redact.py`` (an earlier commit's, for the "before"). Pure CPU; seconds.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", default="8000,30000,100000")
    parser.add_argument("--code", type=Path, default=REPO, help="the checkout whose redact.py is measured")
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("redact", args.code / "locust_llm" / "rundir" / "redact.py")
    assert spec is not None and spec.loader is not None
    redact = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(redact)
    for n in map(int, args.lengths.split(",")):
        line = f"refused a cross-origin GET /llm/{'a' * n} (Origin None, Host 127.0.0.1:8089)"
        start = time.perf_counter()
        redact.redact_text(line)
        print(f"{n:>9,} letters: {time.perf_counter() - start:8.3f} s ({args.code})")


if __name__ == "__main__":
    main()

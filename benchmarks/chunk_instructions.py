"""Instructions per streamed token on the client's own path (``StreamingClient.stream``: read, stamp, parse, count),
counted by valgrind's callgrind, for this checkout and for earlier ones side by side in the same run.

CPU seconds per token move with whatever else a shared machine runs; instruction counts do not, though two runs of
one tree still differ (121,923 and 132,582 per token at ``--requests 2,6``: start-up is not the same twice; more
requests per user narrow it), so compare trees measured in the same run. Each tree (this checkout, and each
``--against`` commit, exported into a temporary directory) streams from its own reference server (outside valgrind;
one token per chunk, 50 ms apart, so the slowed client still reads every chunk alone as it does at full speed) twice
under callgrind: ``--requests`` gives a few and more requests per user.
The difference in instructions over the difference in tokens is the cost of a token, start-up excluded.

    python benchmarks/chunk_instructions.py [--against 32a17e5] [--users 4] [--requests 6,18] [--tokens 96]

Loopback only; about two minutes per tree (valgrind slows Python some fifty times).
"""

from __future__ import annotations  # noqa: I001  (locust first in the client: it monkey-patches)

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import refserver_process  # benchmarks/
from checkouts import export  # benchmarks/

REPO = Path(__file__).resolve().parents[1]
GAP_S = 0.05


def client(url: str, tree: str, users: int, requests: int, tokens: int) -> None:
    """The measured process: ``users`` greenlets, ``requests`` streams each, closed loop; prints the tokens."""
    sys.path.insert(0, tree)
    import gevent
    import locust  # noqa: F401  (it patches the standard library before the client's imports)

    from locust_llm import records
    from locust_llm.client.stream import RequestSpec, StreamingClient

    rng = random.Random(1)
    done: list = []

    def user(u: int) -> None:
        stream = StreamingClient(url)
        for n in range(requests):
            ref = {"id": f"{u}-{n}", "ttft_s": 0.005 + rng.random() * GAP_S, "gap_s": GAP_S}
            record = records.RequestRecord(request_id=ref["id"])
            stream.stream(RequestSpec(prompt="p", max_tokens=tokens, extra={"ref": ref}), record)
            done.append(record)
        stream.close()

    gevent.joinall([gevent.spawn_later(u * GAP_S / users, user, u) for u in range(users)])
    ok = [r for r in done if r.ok]
    print(json.dumps({"tokens": sum(int(r.output_tokens) for r in ok), "failed": len(done) - len(ok)}))


def instructions(tree: Path, url: str, users: int, requests: int, tokens: int, work: Path) -> tuple[int, int]:
    """(instructions, tokens) of one client process under callgrind."""
    out = work / f"callgrind.{requests}"
    ran = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            sys.executable,
            __file__,
            "--client",
            url,
            "--tree",
            str(tree),
            "--users",
            str(users),
            "--requests",
            str(requests),
            "--tokens",
            str(tokens),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        env=dict(os.environ, PYTHONHASHSEED="0"),  # the same hashes, so the same instructions, in every run
    )
    if ran.returncode != 0:
        raise SystemExit(f"{tree}: the client failed under valgrind:\n{ran.stderr[-2000:]}")
    result = json.loads(ran.stdout.strip().splitlines()[-1])
    if result["failed"]:
        raise SystemExit(f"{tree}: {result['failed']} streams failed under valgrind; the count would not compare")
    match = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)
    if match is None:
        raise SystemExit(f"{out}: no instruction total")
    return int(match.group(1)), int(result["tokens"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default="", help="commits to measure beside this checkout, comma-separated")
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--requests", default="6,18", help="requests per user of the short and the long run")
    parser.add_argument("--tokens", type=int, default=96, help="output tokens per request, one per chunk")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--tree", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client(args.client, args.tree, args.users, int(args.requests), args.tokens)
        return 0
    few, more = (int(n) for n in args.requests.split(","))
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        trees = [("this checkout", REPO)] + [(c, export(c, work)) for c in filter(None, args.against.split(","))]
        print(f"{args.users} users, {args.tokens} tokens per request, one per chunk {GAP_S * 1e3:g} ms apart")
        print(f"{'tree':<16} {'tokens':>7} {'instructions':>14} {'per token':>10}")
        for name, tree in trees:
            server, url = refserver_process.start(tree)
            try:
                (i0, t0), (i1, t1) = (instructions(tree, url, args.users, n, args.tokens, work) for n in (few, more))
            finally:
                server.terminate()
                server.wait(10)
            print(f"{name:<16} {t1 - t0:>7d} {i1 - i0:>14,d} {(i1 - i0) / (t1 - t0):>10,.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

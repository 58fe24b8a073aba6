"""How steady is this machine's own speed? A fixed counting loop in one process per core, its rate every interval.

No server, no client: what a step's drift could be before anything of ours runs. Each process counts as fast as it
can and prints, per interval, its count as a percentage of its own mean; a steady host reads near 100 throughout
(a shared VM can read 66-124% from one 2 s interval to the next, in slow spells of several seconds, with no steal
time reported).

    python benchmarks/host_speed.py [--seconds 60] [--interval-s 2] [--processes N (default: CPU count)]

Runs alone (stop load tests first); burns every core for ``--seconds``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time


def count(seconds: float, interval_s: float, out: multiprocessing.Queue) -> None:
    end, counts = time.monotonic() + seconds, []
    while time.monotonic() < end:
        started, n = time.monotonic(), 0
        while time.monotonic() - started < interval_s:
            for _ in range(10_000):
                n += 1
        counts.append(n)
    out.put(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval-s", type=float, default=2.0)
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    out: multiprocessing.Queue = multiprocessing.Queue()
    workers = [
        multiprocessing.Process(target=count, args=(args.seconds, args.interval_s, out)) for _ in range(args.processes)
    ]
    for worker in workers:
        worker.start()
    results = [out.get() for _ in workers]
    for worker in workers:
        worker.join()
    for i, counts in enumerate(results):
        mean = statistics.mean(counts)
        shares = [round(100 * c / mean) for c in counts]
        print(f"process {i}: per {args.interval_s:g} s, % of its mean: {shares} (range {min(shares)}-{max(shares)})")


if __name__ == "__main__":
    main()

"""A neighbour that burns CPU while a chosen server process is alive: the busy machine of the A/B tests.

``python -m locust_llm.testing.burner --while llama-server --unless-arg --spec-type`` burns one core half of the
time (0.5 s on, 0.5 s off) while some process named ``llama-server`` without ``--spec-type`` on its command line
(the baseline of the default scenario) runs, and idles otherwise; it stops by itself after ``--max-s``. Start it
outside the load generator's process tree, as another job on the machine would be.
"""

from __future__ import annotations

import argparse
import time

import psutil

__all__ = ["main", "target_alive"]


def target_alive(name: str, unless_arg: str) -> bool:
    for proc in psutil.process_iter(["name", "cmdline"]):
        try:
            if name in (proc.info["name"] or "") and unless_arg not in (proc.info["cmdline"] or []):
                return True
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return False


def burn(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--while", dest="name", default="llama-server", help="burn while a process of this name runs")
    parser.add_argument("--unless-arg", default="--spec-type", help="...and its command line lacks this argument")
    parser.add_argument("--on-s", type=float, default=0.5, help="seconds of burning per cycle")
    parser.add_argument("--off-s", type=float, default=0.5, help="seconds of rest per cycle")
    parser.add_argument("--max-s", type=float, default=900.0, help="stop after this long whatever happens")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.max_s
    while time.monotonic() < deadline:
        if target_alive(args.name, args.unless_arg):
            burn(args.on_s)
            time.sleep(args.off_s)
        else:
            time.sleep(0.2)


if __name__ == "__main__":
    main()

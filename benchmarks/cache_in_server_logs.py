"""How many completions took their prompt mostly from llama.cpp's prompt cache, from the servers' own logs.

llama-server logs, per task, ``prompt eval time = ... / N tokens`` (the prompt tokens it computed; at least one,
even when the whole prompt was cached), ``eval time = ... / G tokens`` (generated) and at the end ``stop
processing: n_tokens = T`` (what the slot holds: the prompt and the generated tokens but the last). So the prompt
had ``P = T - G + 1`` tokens and ``P - N`` came from the cache. A completion counts as "mostly from the cache" when
``P - N > P / 2``. Every completion of the log is counted: the ladder's, and the quality and consistency prompts
(which llama.cpp is asked not to cache).

    python benchmarks/cache_in_server_logs.py reports/<run-id> [more run directories or logs ...]

Prints, per log: completions, mostly cached, whole prompt cached (N = 1), and the cached share of all prompt tokens.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PATTERNS = {
    "prompt": re.compile(r"\|\s*task (\d+) \| prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens"),
    "eval": re.compile(r"\|\s*task (\d+) \|\s+eval time =\s*[\d.]+ ms /\s*(\d+) tokens"),
    "release": re.compile(r"\|\s*task (\d+) \| stop processing: n_tokens = (\d+)"),
}


def tasks_of(log: Path) -> list[tuple[int, int]]:
    """(prompt tokens, prompt tokens computed) per finished task."""
    seen: dict[str, dict[str, int]] = {}
    for line in log.read_text(errors="replace").splitlines():
        for key, pattern in PATTERNS.items():
            match = pattern.search(line)
            if match:
                seen.setdefault(match.group(1), {})[key] = int(match.group(2))
    out = []
    for task in seen.values():
        if {"prompt", "eval", "release"} <= set(task):
            out.append((task["release"] - task["eval"] + 1, task["prompt"]))
    return out


def main(paths: list[str]) -> None:
    logs = []
    for path in map(Path, paths):
        logs += sorted(path.glob("server-*.log")) if path.is_dir() else [path]
    print(f"{'log':<48} {'completions':>11} {'mostly cached':>14} {'all cached':>11} {'cached share':>13}")
    for log in logs:
        tasks = tasks_of(log)
        prompt = sum(p for p, _ in tasks)
        cached = sum(p - n for p, n in tasks)
        mostly = sum(p - n > p / 2 for p, n in tasks)
        whole = sum(n == 1 and p > 1 for p, n in tasks)
        share = f"{100 * cached / prompt:.1f}%" if prompt else "-"
        print(f"{str(log)[-48:]:<48} {len(tasks):>11} {mostly:>14} {whole:>11} {share:>13}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])

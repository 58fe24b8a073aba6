"""How far a real server's own output count is from its tokenizer's count of the text it returned: the ground
for the ``suspect_usage`` tolerance (``client.accounting``: x2 + 16 either way).

Launches the scenario's baseline server (the CPU test pair by default), asks it ``--n`` completions of
``--max-tokens`` tokens (greedy and sampled, ``ignore_eos``), and counts each answer's text with the server's own
``POST /tokenize``. Prints the spread of ``usage.completion_tokens - tokenizer count``.

    python benchmarks/usage_vs_tokenizer.py [--scenario scenarios/tiny-cpu-test.yaml] [--n 40] [--max-tokens 64]

Loopback only; about a minute on two CPU cores.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile

import locust  # noqa: F401  (gevent patches sockets before the client modules load)

from locust_llm.client import control
from locust_llm.client.accounting import SUSPECT_FACTOR, SUSPECT_SLACK
from locust_llm.scenario import load_scenario
from locust_llm.servers import launch_variant

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "river", "under", "green"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="scenarios/tiny-cpu-test.yaml")
    parser.add_argument("--n", type=int, default=40, help="prompts, each answered greedily and sampled")
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    scenario = load_scenario(args.scenario)
    server = launch_variant(scenario, scenario.baseline_variant, log_dir=tempfile.mkdtemp(prefix="usage-"))
    rng = random.Random(0)
    pairs = []
    try:
        for i in range(args.n):
            prompt = " ".join(rng.choice(WORDS) for _ in range(20))
            for temperature in (0.0, 1.0):
                body = {"prompt": prompt, "max_tokens": args.max_tokens, "temperature": temperature}
                _, raw = control.call(
                    f"{server.base_url}/v1/completions", {**body, "ignore_eos": True, "seed": i}, timeout_s=120
                )
                answer = json.loads(raw)
                text = answer["choices"][0]["text"]
                count = {"content": text, "add_special": False}
                _, raw = control.call(f"{server.base_url}/tokenize", count, timeout_s=30, max_bytes=1 << 24)
                pairs.append((answer["usage"]["completion_tokens"], len(json.loads(raw)["tokens"])))
    finally:
        server.stop()
    gaps = sorted(server_n - counted for server_n, counted in pairs)
    outside = sum(s > SUSPECT_FACTOR * c + SUSPECT_SLACK or c > SUSPECT_FACTOR * s + SUSPECT_SLACK for s, c in pairs)
    print(f"{len(pairs)} answers of {args.max_tokens} tokens from {args.scenario}")
    print(f"server count - tokenizer count: min {gaps[0]}, median {gaps[len(gaps) // 2]}, max {gaps[-1]}")
    print(f"outside the suspect_usage tolerance (x{SUSPECT_FACTOR:g} + {SUSPECT_SLACK}): {outside}")


if __name__ == "__main__":
    main()

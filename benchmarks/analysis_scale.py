"""How long does ``locust-llm report`` take on a night of load, and how much memory?

Writes a synthetic run directory (one variant, closed loop, ``--levels`` steps, ``--requests`` requests of
``--tokens`` tokens each, one token per chunk) in Parquet batches, then times ``locust-llm report`` on it in a
subprocess and reports its wall time and peak resident memory (the child's ``ru_maxrss``), for this checkout and
for each ``--against`` commit (exported into a temporary directory), one after the other on the same files.

    python benchmarks/analysis_scale.py --requests 200000 --tokens 128
    python benchmarks/analysis_scale.py --requests 1000000 --tokens 256 --keep /tmp/big-run --against 88ee833
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from checkouts import export  # noqa: E402  (benchmarks/)

from locust_llm.records import REQUESTS_SCHEMA  # noqa: E402

BATCH = 20_000


def write_run(path: Path, requests: int, tokens: int, levels: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    per_level = requests // levels
    start, window = 1_700_000_000.0, 600.0
    steps = []
    with pq.ParquetWriter(path / "requests.parquet", REQUESTS_SCHEMA) as writer:
        for step in range(levels):
            level = 2**step
            t_steady = start + step * (window + 10)
            steps.append(
                {
                    "variant": "baseline",
                    "step": step,
                    "level": level,
                    "mode": "closed",
                    "users": level,
                    "t_start": t_steady - 5,
                    "t_steady": t_steady,
                    "t_end": t_steady + window,
                }
            )
            for first in range(0, per_level, BATCH):
                n = min(BATCH, per_level - first)
                t_send = t_steady + np.sort(rng.uniform(0, window, n))
                tpot = rng.lognormal(np.log(0.02), 0.2, n)
                ttft = rng.lognormal(np.log(0.05), 0.3, n)
                gaps = rng.uniform(0.5, 1.5, (n, tokens - 1)) * tpot[:, None]
                offsets = np.concatenate([ttft[:, None], ttft[:, None] + np.cumsum(gaps, axis=1)], axis=1)
                flat = pa.array(offsets.astype(np.float32).ravel())
                bounds = pa.array(np.arange(0, n * tokens + 1, tokens, dtype=np.int32))
                columns = {
                    "run_id": pa.array(["scale"] * n),
                    "variant": pa.array(["baseline"] * n),
                    "level": pa.array(np.full(n, float(level))),
                    "step": pa.array(np.full(n, step, np.int64)),
                    "phase": pa.array(["steady"] * n),
                    "mode": pa.array(["closed"] * n),
                    "worker": pa.array(np.zeros(n, np.int64)),
                    "request_id": pa.array([f"{step}-{first + i}" for i in range(n)]),
                    "seq": pa.array(np.arange(first, first + n, dtype=np.int64)),
                    "output_tokens": pa.array(np.full(n, tokens, np.int64)),
                    "token_source": pa.array(["usage_deltas"] * n),
                    "t_send": pa.array(t_send),
                    "t_first": pa.array(t_send + offsets[:, 0]),
                    "t_end": pa.array(t_send + offsets[:, -1]),
                    "t_done": pa.array(t_send + offsets[:, -1]),
                    "chunk_offsets": pa.ListArray.from_arrays(bounds, flat),
                    "chunk_tokens": pa.ListArray.from_arrays(bounds, pa.array(np.ones(n * tokens, np.int32))),
                    "finish_reason": pa.array(["length"] * n),
                }
                arrays = [columns.get(f.name, pa.nulls(n, f.type)) for f in REQUESTS_SCHEMA]
                writer.write_table(pa.Table.from_arrays(arrays, schema=REQUESTS_SCHEMA))
    (path / "steps.json").write_text(json.dumps({"steps": steps, "events": []}))
    (path / "env.json").write_text(
        json.dumps({"run_id": "scale", "baseline": "baseline", "variants": ["baseline"], "load": {"mode": "closed"}})
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--levels", type=int, default=6)
    parser.add_argument("--keep", type=Path, default=None, help="write the run here and keep it")
    parser.add_argument("--against", default="", help="commits to measure beside this checkout, comma-separated")
    args = parser.parse_args()
    path = args.keep or Path(tempfile.mkdtemp(prefix="analysis-scale-"))
    path.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    write_run(path, args.requests, args.tokens, args.levels)
    print(
        f"wrote {args.requests:,} requests x {args.tokens} tokens in {time.perf_counter() - t0:.1f} s "
        f"({(path / 'requests.parquet').stat().st_size / 2**20:.0f} MiB)",
        flush=True,
    )
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        trees = [("this checkout", REPO)] + [(c, export(c, Path(tmp))) for c in filter(None, args.against.split(","))]
        for name, tree in trees:
            for output in ("summary.json", "report.html"):
                (path / output).unlink(missing_ok=True)
            wall, peak_mib, code, stderr = report(tree, path)
            print(f"{name}: locust-llm report {wall:.1f} s, peak RSS {peak_mib:,.0f} MiB, exit {code}", flush=True)
            if code:
                print(stderr[-3000:])
                failed = code
    if args.keep is None:
        shutil.rmtree(path)
    return failed


def report(tree: Path, run_dir: Path) -> tuple[float, float, int, str]:
    """``locust-llm report`` of the checkout at ``tree`` on ``run_dir``: seconds, peak MiB of that child alone
    (``wait4``), its exit code and its stderr."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "locust_llm.cli", "report", str(run_dir)],
            cwd=tree,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - t0
        child.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return wall, usage.ru_maxrss / 1024, child.returncode, err.read()


if __name__ == "__main__":
    sys.exit(main())

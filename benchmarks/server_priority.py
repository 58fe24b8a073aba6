"""What the launched server's CPU priority costs it, and what it buys the load generator: one interleaved run.

The default scenario's pair (baseline, spec-k4) is measured twice in the same run, ABBA-interleaved with every
server up: at nice 0 (the server competes with the load generator for the cores) and at ``server.nice``'s default
(the load generator gets a core as soon as a chunk arrives). With ``--threads`` a third pair runs at nice 0 with
one core fewer than the machine (``-t cores-1``), the other way to leave the client a core. Per level and pair it
prints the aggregate output tok/s, the server's throughput against the nice-0 pair (the cost, with the 95%
interval of the speed-ups, AR(1)-aware and block-paired, ``analysis.rates``), the speculative speed-up within the
pair, and the load generator's event-loop lag P95 (the per-second worst, over the step) and CPU.

Contention detection is off (a shared machine would otherwise leave most steps out): the foreign CPU is printed
per step instead, so read the ratios, which both sides of a block share, rather than the absolute figures.

    python benchmarks/server_priority.py [--ladder 1,4] [--step 15] [--warmup 3] [--nice 10] [--threads]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO / "scenarios" / "tiny-cpu.yaml"
SPEC = "spec-k4"


def scenario(work: Path, nice: int, threads: bool) -> tuple[Path, dict[str, tuple[str, str]]]:
    """The default scenario with the pair at nice 0, at ``nice`` (and at nice 0 on one core fewer); pairs by name."""
    doc = yaml.safe_load(DEFAULT.read_text())
    base, spec = doc["variants"]["baseline"], doc["variants"][SPEC]
    pairs = {"nice 0": ("baseline", SPEC), f"nice {nice}": (f"baseline-n{nice}", f"{SPEC}-n{nice}")}
    variants = {
        "baseline": {**base, "nice": 0},
        SPEC: {**spec, "nice": 0},
        f"baseline-n{nice}": {**base, "nice": nice},
        f"{SPEC}-n{nice}": {**spec, "nice": nice},
    }
    if threads:
        cores = max((os.cpu_count() or 2) - 1, 1)
        pairs[f"nice 0, -t {cores}"] = (f"baseline-t{cores}", f"{SPEC}-t{cores}")
        variants[f"baseline-t{cores}"] = {**base, "nice": 0, "args": ["-t", str(cores)]}
        variants[f"{SPEC}-t{cores}"] = {**spec, "nice": 0, "args": ["-t", str(cores)]}
    doc["variants"] = variants
    doc.pop("quality", None)  # answers are not what this measures
    doc["load"]["contention_cores"] = 1000  # shown per step instead of leaving steps out
    path = work / "server-priority.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path, pairs


def run(work: Path, path: Path, ladder: str, step: float, warmup: float) -> tuple[Path, int, float]:
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "locust",
            "-f",
            "locustfiles/spec_decode.py",
            "--headless",
            "--skip-log",
            "--scenario",
            str(path),
            "--ladder",
            ladder,
            "--step-duration",
            str(step),
            "--warmup",
            str(warmup),
            "--repeats",
            "2",
            "--order",
            "interleaved",
            "--report-dir",
            str(work),
            "--run-id",
            "server-priority",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if not (work / "server-priority" / "summary.json").exists():
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"the run wrote no summary (exit {done.returncode})")
    return work / "server-priority", done.returncode, time.monotonic() - started


def every_step_rates(run_dir: Path) -> dict[str, dict[float, dict[int, object]]]:
    """Per variant and level, each step's per-second output tok/s, whatever its status (the run's own analysis
    keeps clean steps only; here the ratios of all steps are shown, with the steps' statuses beside them)."""
    from locust_llm.analysis.summary import step_summary
    from locust_llm.rundir import load_run

    data = load_run(run_dir)
    out: dict[str, dict[float, dict[int, object]]] = {}
    for step in data.steps:
        frame = data.requests[data.requests["variant"] == step.variant]
        _, (rates, _, _, _) = step_summary(data, frame, step, {})
        out.setdefault(step.variant, {}).setdefault(float(step.level), {})[step.step] = rates
    return out


def ratio_text(ratio: dict) -> str:
    if ratio.get("value") is None:
        return "-"
    ci = ratio.get("ci95")
    return f"{ratio['value']:.3f}" + (f" [{ci[0]:.3f}-{ci[1]:.3f}]" if ci else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ladder", default="1,4")
    parser.add_argument("--step", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--nice", type=int, default=10)
    parser.add_argument("--threads", action="store_true", help="also a pair at nice 0 with one core fewer")
    parser.add_argument("--keep", default="", help="write the run here instead of a temporary folder")
    parser.add_argument("--analyse", default="", help="only show an earlier run of this script (its folder)")
    args = parser.parse_args()
    from locust_llm.analysis.rates import block_ratio_ci
    from locust_llm.pipeline import finish_run

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.keep or tmp)
        work.mkdir(parents=True, exist_ok=True)
        path, pairs = scenario(work, args.nice, args.threads)
        if args.analyse:
            run_dir, code, wall = Path(args.analyse), finish_run(Path(args.analyse)).verdict.exit_code, float("nan")
        else:
            run_dir, code, wall = run(work, path, args.ladder, args.step, args.warmup)
        summary = json.loads((run_dir / "summary.json").read_text())
        rates = every_step_rates(run_dir)
        print(f"run {run_dir.name}: exit {code}, wall {wall:.0f} s")
        print(
            "\nper step: variant, level, step, status, output tok/s, loop-lag P95 / max ms, client CPU %, foreign cores"
        )
        for name, entry in summary["variants"].items():
            for s in entry["steps"]:
                cv = s["client_validity"]
                host = s.get("host") or {}
                print(
                    f"  {name:<16} {s['level']:>4g} {s['step']:>3} {s['status']:<14} {s['output_tps'] or 0:8.1f} "
                    f"{cv.get('loop_lag_ms_p95') or 0:7.1f} / {cv.get('loop_lag_ms_max') or 0:6.1f} "
                    f"{cv.get('cpu_percent_max') or 0:6.1f} {host.get('foreign_cores', 0):6.2f}"
                )
        reference = pairs["nice 0"]
        print("\nper level: pair, server throughput vs nice 0 (baseline; spec), spec-k4 speed-up within the pair")
        for level in sorted(rates[reference[0]]):
            for label, (base, spec) in pairs.items():
                cost_base = block_ratio_ci(rates[base][level], rates[reference[0]][level])
                cost_spec = block_ratio_ci(rates[spec][level], rates[reference[1]][level])
                speedup = block_ratio_ci(rates[spec][level], rates[base][level])
                print(
                    f"  level {level:>3g} {label:<14} baseline {ratio_text(cost_base):<22} "
                    f"spec {ratio_text(cost_spec):<22} speed-up {ratio_text(speedup)}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())

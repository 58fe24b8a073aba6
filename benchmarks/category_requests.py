"""Per content category and variant, what a run's requests did, by the client's clock and by llama-server's own
per-request timings, whatever the steps' status: a description of the requests, not a verdict.

The report's "What the gain depends on" compares categories only on levels measured cleanly (a step too noisy to
tell steady from drifting stays out of every verdict). On a noisy host every level of a mixed-length workload can
be kept out (``scenarios/real-cpu.yaml`` on a shared 2-core VM: docs/workloads.md, "The real model"); this prints
what was measured anyway, per level, category and variant: successful steady requests, output tokens, mean decode
tok/s by the client ((tokens - 1) / (last - first token)) and by the server (``timings.predicted_per_second``: tokens /
predicted_ms), drafted and accepted tokens (``timings.draft_n`` / ``draft_n_accepted``) and their ratio, and each
variant's mean client decode rate over the baseline's. No interval: the steps' own status says why none is claimed.

    python benchmarks/category_requests.py RUN_DIR [--baseline NAME]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from locust_llm.analysis.documents.summary import Summary  # noqa: E402
from locust_llm.analysis.metrics import request_metrics  # noqa: E402
from locust_llm.rundir import load_run  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--baseline", default=None, help="the variant the ratios divide by (default: the run's)")
    args = parser.parse_args()
    run = load_run(args.run_dir)
    baseline = args.baseline or run.env.baseline
    frame = run.requests
    # The analysis's own per-request figures (docs/metrics.md): decode_tps, server_decode_tps, drafts.
    figures = request_metrics(frame).join(frame[["level", "bucket", "variant", "phase"]])
    ok = figures[figures["output_tokens"].notna() & (figures["phase"] == "steady")]
    table = ok.groupby(["level", "bucket", "variant"]).agg(
        requests=("output_tokens", "size"),
        tokens=("output_tokens", "mean"),
        client_tps=("decode_tps", "mean"),
        server_tps=("server_decode_tps", "mean"),
        drafted=("draft_n", "sum"),
        accepted=("draft_accepted", "sum"),
    )
    table["acceptance"] = table["accepted"] / table["drafted"].where(table["drafted"] > 0)
    base = table.xs(baseline, level="variant")["client_tps"]
    table["vs_baseline"] = table["client_tps"] / base.reindex(table.index.droplevel("variant")).to_numpy()
    summary = Summary.model_validate_json((args.run_dir / "summary.json").read_text())
    statuses: dict[tuple[str, float], list[str]] = {}
    for name, entry in summary.variants.items():
        for step in entry.steps:
            statuses.setdefault((name, step.level), []).append(step.status)
    print(f"run {args.run_dir.name}, baseline {baseline}; steps' status per variant and level:")
    for (name, level), found in sorted(statuses.items()):
        print(f"  {name} @ {level:g}: {', '.join(found)}")
    with pd.option_context("display.width", 250, "display.max_rows", 500, "display.max_columns", 20):
        print(table.round({"tokens": 0, "client_tps": 1, "server_tps": 1, "acceptance": 2, "vs_baseline": 2}))


if __name__ == "__main__":
    main()

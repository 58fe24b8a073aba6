"""Single-stream decode speed of the tiny demo pair on the CPU: baseline vs draft-model speculation.

Both servers run at once and requests alternate between them (one at a time), so machine noise
hits both sides alike. Decode tok/s per request = (n_tokens - 1) / (t_end - t_first), from the
streaming client's per-token timestamps; acceptance = sum(draft_n_accepted) / sum(draft_n).

    python benchmarks/cpu_spec_speedup.py [--scenario scenarios/tiny-cpu.yaml] [--rounds 8] [--max-tokens 256]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

from locust_llm.client.stream import RequestSpec, StreamingClient
from locust_llm.records import RequestRecord
from locust_llm.scenario import load_scenario
from locust_llm.servers import launch_variant


def decode_tps(record: RequestRecord) -> float:
    return (record.output_tokens - 1) / (record.t_end - record.t_first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="scenarios/tiny-cpu.yaml")
    parser.add_argument("--baseline", default=None)
    parser.add_argument("--variant", default=None, help="default: the first non-baseline variant")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args()

    scenario = load_scenario(args.scenario)
    baseline = args.baseline or scenario.baseline_variant
    variant = args.variant or next(v for v in scenario.variants if v != baseline)
    prompts = [f"the {w} of the day is" for w in ("rest", "sum", "end", "test", "form", "cost", "note", "run")]
    results: dict[str, list[RequestRecord]] = {baseline: [], variant: []}
    with tempfile.TemporaryDirectory() as logs:
        servers = {name: launch_variant(scenario, name, log_dir=logs) for name in (baseline, variant)}
        try:
            clients = {name: StreamingClient(server.base_url) for name, server in servers.items()}
            for round_no in range(args.rounds + 1):
                for name in (baseline, variant) if round_no % 2 == 0 else (variant, baseline):
                    spec = RequestSpec(prompt=prompts[round_no % len(prompts)], max_tokens=args.max_tokens)
                    record = clients[name].stream(spec, RequestRecord())
                    if record.error_class:
                        raise SystemExit(f"{name}: request failed: {record.error_class}: {record.error_message}")
                    if round_no > 0:  # round 0 warms both servers up
                        results[name].append(record)
        finally:
            for server in servers.values():
                server.stop()

    medians = {name: statistics.median(decode_tps(r) for r in recs) for name, recs in results.items()}
    spec_records = results[variant]
    drafted = sum(r.draft_n or 0 for r in spec_records)
    accepted = sum(r.draft_accepted or 0 for r in spec_records)
    print(
        f"scenario {scenario.name}: {args.rounds} alternating requests per variant, "
        f"{args.max_tokens} output tokens, one stream at a time"
    )
    for name, recs in results.items():
        values = sorted(decode_tps(r) for r in recs)
        print(f"  {name:<12} decode tok/s median {medians[name]:7.1f}   (min {values[0]:.1f}, max {values[-1]:.1f})")
    print(f"  speed-up {variant} / {baseline}: {medians[variant] / medians[baseline]:.2f}x")
    if drafted:
        print(f"  acceptance rate {accepted / drafted:.1%} ({accepted} of {drafted} draft tokens)")
    same = all(a.output_tokens == b.output_tokens for a, b in zip(results[baseline], results[variant], strict=False))
    print(f"  output lengths identical: {same}")


if __name__ == "__main__":
    main()

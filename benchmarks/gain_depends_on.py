"""What the gain of speculative decoding depends on, on the CPU default pair: content categories, and the position
in a long answer. Each part is a real headless run of its scenario, then prints its figures from ``summary.json``.

* ``--part categories`` (``scenarios/tiny-cpu-categories.yaml``: the default's pair and ladder over the project's
  task-category prompt set, about 12 minutes on 2 cores): the category x level table of paired decode tok/s
  speed-ups with 95% intervals, acceptance and output share, each category's advice, and whether any category's
  gain clearly differs from another's.
* ``--part conversation`` (``scenarios/tiny-cpu-conversation.yaml``: 3-turn chats at 1 and 4 users, about 6
  minutes): per variant, level and turn the prompt tokens, cached prompt tokens, TTFT and decode tok/s, and the
  paired speed-ups by turn.
* ``--part trace`` (``scenarios/tiny-cpu-trace.yaml``: a bursty Mooncake trace at 0.5x, 1x and 2x, about 6
  minutes): per speed the replay's arrival error, TTFT from the trace's time, output tok/s and the speed-up.
* ``--part long`` (``scenarios/tiny-cpu-long.yaml``: 2,048 output tokens per request at 4 streams, about 10
  minutes): decode tok/s per 256 output tokens per variant with intervals over requests, the speed-up and
  acceptance by position, and the one-line answer ("decode speed at tokens 1,792-2,048 is 0.93x of tokens
  0-256, 95% CI ...").

    python benchmarks/gain_depends_on.py --part categories|conversation|trace|long [--scenario FILE] [--run-dir DIR]

``--run-dir`` prints the figures of a run that exists already (no new run).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from locust_llm.analysis.documents.summary import Summary  # noqa: E402
from tests.helpers import run_locust  # noqa: E402

SCENARIOS = {
    "categories": "scenarios/tiny-cpu-categories.yaml",
    "long": "scenarios/tiny-cpu-long.yaml",
    "conversation": "scenarios/tiny-cpu-conversation.yaml",
    "trace": "scenarios/tiny-cpu-trace.yaml",
}


def with_contention(scenario: Path, cores: float, folder: Path) -> Path:
    """A copy of ``scenario`` beside the runs with ``load.contention_cores`` set (its dataset path made absolute)."""
    data = yaml.safe_load(scenario.read_text())
    data["load"]["contention_cores"] = cores
    if data["load"].get("dataset"):
        data["load"]["dataset"] = str((scenario.parent / data["load"]["dataset"]).resolve())
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / f"{scenario.stem}-contention-{cores:g}.yaml"
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    print(f"load.contention_cores {cores:g} for this run (the scenario's default is 0.25): {copy}")
    return copy


def interval(ci) -> str:
    return f"[{ci[0]:.2f}-{ci[1]:.2f}]" if ci else "[no CI]"


def statuses(summary: Summary) -> None:
    for name, entry in summary.variants.items():
        for s in entry.steps:
            print(f"  {name} step {s.step} at {s.level:g}: {s.status} {'; '.join(s.status_reasons)}")
    for comp in summary.comparisons:
        print(f"{comp.variant} vs {comp.baseline}: {comp.recommendation}")


def categories(summary: Summary) -> None:
    if not summary.categories:
        print("no category table: no level was measured cleanly on both sides (see the statuses above)")
    for comp in summary.categories:
        levels = sorted({e.level for e in comp.levels})
        print(f"\n{comp.variant} vs {comp.baseline}: {comp.basis}, 95% CI; acceptance; share of output tokens")
        print(f"{'category':<10} " + " | ".join(f"level {level:g}".ljust(46) for level in levels))
        for category in comp.categories:
            cells = []
            for level in levels:
                e = next(x for x in comp.levels if x.level == level and x.category == category)
                rate = e.acceptance.rate if e.acceptance and e.acceptance.rate is not None else None
                value = e.decode_tps_speedup.value
                speedup = "n/m" if value is None else f"{value:.2f}x {interval(e.decode_tps_speedup.ci95)}"
                cells.append(
                    f"{speedup} acc {'n/m' if rate is None else f'{rate:.0%}'} share {e.output_share or 0:.0%} "
                    f"pairs={e.pairs}"
                )
            print(f"{category:<10} " + " | ".join(c.ljust(46) for c in cells))
        print(comp.text)
        for category, advice in comp.recommendations.items():
            print(f"  {category}: {advice}")


def long_answer(summary: Summary) -> None:
    if summary.positions is None:
        print("no curve: no level was measured cleanly, or no request completed a bin")
        return
    speed = {(c.variant, c.level): c for c in summary.positions.comparisons}
    for curve in summary.positions.curves:
        compared = speed.get((curve.variant, curve.level))
        print(f"\n{curve.variant} at {curve.level:g}: decode tok/s per {summary.positions.bin_tokens} output tokens")
        for k, b in enumerate(curve.bins):
            line = f"  {b.first_token:>5}-{b.last_token + 1:<5} n={b.requests:<3} {b.decode_tps:7.1f} tok/s "
            line += interval(b.decode_tps_ci95)
            if b.acceptance_rate is not None:
                line += f"  acceptance {b.acceptance_rate:.1%} {interval(b.acceptance_rate_ci95)}"
            if compared is not None and k < len(compared.bins):
                line += f"  speed-up {compared.bins[k].value:.2f}x {interval(compared.bins[k].ci95)}"
            print(line)
        print(f"  {curve.text}")


def ratio(r) -> str:
    return "n/m" if r.value is None else f"{r.value:.2f}x {interval(r.ci95)}"


def ms(value) -> str:
    return "n/m" if value is None else f"{value:.1f} ms"


def conversation(summary: Summary) -> None:
    turns = summary.conversations
    if turns is None or not turns.levels:
        print("no turn table: no level was measured cleanly (see the statuses above)")
        return
    print("\nvariant   level turn  req  prompt tok  cached tok  TTFT P50   TPOT P50   decode tok/s")
    for t in turns.levels:
        cached = "n/r" if t.cached_tokens is None else f"{t.cached_tokens:.0f}"
        print(
            f"{t.variant:<9} {t.level:>5g} {t.turn:>4} {t.requests:>4} {t.prompt_tokens or 0:>11.0f} {cached:>11} "
            f"{ms(t.ttft_p50_ms):>10} {ms(t.tpot_p50_ms):>10} {t.decode_tps or 0:>10.1f}"
        )
    print("\nspeed-ups by turn (paired: the same conversation's turn), 95% CI")
    for c in turns.comparisons:
        print(
            f"  {c.variant} at {c.level:g}, turn {c.turn}: decode tok/s {ratio(c.decode_tps_speedup)}; "
            f"TTFT P50 {ratio(c.ttft_p50_speedup)}; TPOT P50 {ratio(c.tpot_p50_speedup)}"
        )
    for h in turns.histories:
        print(f"  {h.text}")


def trace(summary: Summary) -> None:
    for name, entry in summary.variants.items():
        for s in entry.steps:
            if s.trace is not None:
                sched = s.ttft_sched_ms
                print(
                    f"{name} at {s.level:g} req/s: {s.trace.text}; TTFT from the trace's time P50 "
                    f"{ms(sched and sched.p50)} P95 {ms(sched and sched.p95)}; {s.output_tps or 0:.1f} out tok/s; "
                    f"{s.status}"
                )
    for comp in summary.comparisons:
        for step in comp.steps:
            verdict = ratio(getattr(step, f"{comp.metric}_speedup"))
            print(
                f"{comp.variant} at {step.level:g} req/s: {comp.metric_name} {verdict}, decode tok/s "
                f"{ratio(step.decode_tps_speedup)} ({step.status}: {step.verdict_basis})"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=sorted(SCENARIOS), required=True)
    parser.add_argument("--scenario", default=None, help="default: the part's scenario")
    parser.add_argument("--report-dir", default="reports")
    parser.add_argument("--run-dir", default=None)
    parser.add_argument(
        "--contention-cores",
        type=float,
        default=None,
        help="load.contention_cores for this run (on a shared machine; the output says so)",
    )
    args = parser.parse_args()
    run_dir = Path(args.run_dir) if args.run_dir else None
    if run_dir is None:
        report_dir = Path(args.report_dir).resolve()
        run_id = time.strftime(f"{args.part}-%Y%m%d-%H%M%S")
        scenario = Path(args.scenario or SCENARIOS[args.part]).resolve()
        if args.contention_cores is not None:
            scenario = with_contention(scenario, args.contention_cores, report_dir)
        # a long answer outlasts Locust's default stop timeout (60 s): let every request finish in the drain
        done = run_locust(
            report_dir, "--scenario", str(scenario), "--run-id", run_id, "--stop-timeout", "1800", timeout=3600
        )
        print(done.stdout[-3000:], done.stderr[-1500:], sep="\n")
        run_dir = report_dir / run_id
    summary = Summary.model_validate_json((run_dir / "summary.json").read_text())
    print(f"run {run_dir}")
    statuses(summary)
    {"categories": categories, "long": long_answer, "conversation": conversation, "trace": trace}[args.part](summary)


if __name__ == "__main__":
    main()

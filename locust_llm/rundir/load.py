"""A run directory -> ``RunData``: everything the analysis reads, typed, in one place.

Reads the merged files, or the part files of a run that was killed before its merge. ``columns`` limits
``requests.parquet`` to what a caller needs (the per-chunk lists are the bulk of a large run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..records import REQUESTS_SCHEMA
from . import layout
from .parts import read_table

__all__ = ["RunData", "load_requests", "load_run", "load_telemetry"]

TELEMETRY_COLUMNS = ["t", "variant", "source", "metric", "labels", "value"]


@dataclass
class RunData:
    """One run directory's contents (or several merged)."""

    requests: pd.DataFrame
    steps: list[dict]
    events: list[dict] = field(default_factory=list)
    env: dict = field(default_factory=dict)
    client: pd.DataFrame = field(default_factory=pd.DataFrame)
    consistency: dict = field(default_factory=dict)
    telemetry: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=TELEMETRY_COLUMNS))
    telemetry_meta: dict = field(default_factory=dict)
    run_dir: Path | None = None


def load_requests(run_dir: Path, columns: list[str] | None = None) -> pd.DataFrame:
    table = read_table(run_dir, layout.REQUESTS, layout.REQUEST_PARTS, columns)
    if table is None:
        names = columns or REQUESTS_SCHEMA.names
        return REQUESTS_SCHEMA.empty_table().select(names).to_pandas()
    return table.to_pandas()


def load_telemetry(run_dir: Path) -> pd.DataFrame:
    table = read_table(run_dir, layout.TELEMETRY, layout.TELEMETRY_PARTS)
    return table.to_pandas() if table is not None else pd.DataFrame(columns=TELEMETRY_COLUMNS)


def load_run(run_dir: Path, columns: list[str] | None = None) -> RunData:
    run_dir = Path(run_dir)
    steps_doc = layout.read_json(run_dir / layout.STEPS)
    client = run_dir / layout.CLIENT
    return RunData(requests=load_requests(run_dir, columns), steps=list(steps_doc.get("steps", [])),
                   events=list(steps_doc.get("events", [])), env=layout.read_json(run_dir / layout.ENV),
                   client=pd.read_parquet(client) if client.exists() else pd.DataFrame(),
                   consistency=layout.read_json(run_dir / layout.CONSISTENCY),
                   telemetry=load_telemetry(run_dir), telemetry_meta=layout.read_json(run_dir / layout.TELEMETRY_META),
                   run_dir=run_dir)

"""Several run directories as one comparison: variants keep their names unless two runs share one. Pure."""

from __future__ import annotations

import pandas as pd

from ..rundir.load import ChunkLists, RunData
from ..rundir.telemetry_meta import TelemetryMeta

__all__ = ["merge_runs"]


def merge_runs(runs: list[RunData], run_ids: list[str]) -> RunData:
    """One RunData holding every run's variants; the first run's baseline is the baseline.

    A variant name that occurs in more than one run becomes ``<run_id>:<variant>`` in all of them,
    so a baseline measured last week can be compared with today's speculative variant.
    """
    seen: dict[str, int] = {}
    for run in runs:
        for name in {step.variant for step in run.steps}:
            seen[name] = seen.get(name, 0) + 1

    def rename(run_id: str, name: str) -> str:
        return f"{run_id}:{name}" if seen.get(name, 0) > 1 else name

    frames, lists, steps, events, clients, hosts, telemetry, consistency = [], [], [], [], [], [], [], {}
    meta = TelemetryMeta()
    for run, run_id in zip(runs, run_ids, strict=False):
        if len(run.requests):
            frame = run.requests.copy()
            frame["variant"] = frame["variant"].map(lambda v, r=run_id: rename(r, v))
            frames.append(frame)
            lists.append(run.lists)
        steps += [step.model_copy(update={"variant": rename(run_id, step.variant)}) for step in run.steps]
        events += [event.of_run(run_id) for event in run.events]
        if len(run.client):
            clients.append(run.client)
        if len(run.host):
            hosts.append(run.host)
        consistency.update({rename(run_id, k): v for k, v in run.consistency.items()})
        if len(run.telemetry):
            rows = run.telemetry.copy()
            rows["variant"] = rows["variant"].map(lambda v, r=run_id: rename(r, v))
            telemetry.append(rows)
        theirs = run.telemetry_meta
        meta.attachments += [a.model_copy(update={"variant": rename(run_id, a.variant)}) for a in theirs.attachments]
        meta.gaps += [g.model_copy(update={"variant": rename(run_id, g.variant)}) for g in theirs.gaps]
        meta.notes += theirs.notes
    first = runs[0]
    env = first.env.model_copy(
        update={
            "run_id": "+".join(run_ids),
            # an absent baseline is "" (a null one stays null)
            "baseline": None
            if first.env.baseline is None and "baseline" in first.env.model_fields_set
            else rename(run_ids[0], first.env.baseline or ""),
            "merged_from": run_ids,
        }
    )
    meta.interval_s, meta.timeout_s, meta.gpu = (
        first.telemetry_meta.interval_s,
        first.telemetry_meta.timeout_s,
        first.telemetry_meta.gpu,
    )
    present = [t for t in lists if t is not None]  # the lists are read only when every run kept its own
    return RunData(
        requests=pd.concat(frames, ignore_index=True) if frames else first.requests.iloc[0:0],
        lists=ChunkLists.concat(present) if lists and len(present) == len(lists) else None,
        steps=steps,
        events=events,
        env=env,
        client=pd.concat(clients, ignore_index=True) if clients else pd.DataFrame(),
        host=pd.concat(hosts, ignore_index=True) if hosts else pd.DataFrame(),
        consistency=consistency,
        telemetry=pd.concat(telemetry, ignore_index=True) if telemetry else first.telemetry.iloc[0:0],
        telemetry_meta=meta,
    )

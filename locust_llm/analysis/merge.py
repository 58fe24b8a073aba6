"""Several run directories as one comparison: variants keep their names unless two runs share one. Pure."""

from __future__ import annotations

import pandas as pd

from .summary import RunData


def merge_runs(runs: list[RunData], run_ids: list[str]) -> RunData:
    """One RunData holding every run's variants; the first run's baseline is the baseline.

    A variant name that occurs in more than one run becomes ``<run_id>:<variant>`` in all of them,
    so a baseline measured last week can be compared with today's speculative variant.
    """
    seen: dict[str, int] = {}
    for run in runs:
        for name in {step["variant"] for step in run.steps}:
            seen[name] = seen.get(name, 0) + 1

    def rename(run_id: str, name: str) -> str:
        return f"{run_id}:{name}" if seen.get(name, 0) > 1 else name

    frames, steps, events, clients, consistency, server_variants = [], [], [], [], {}, {}
    for run, run_id in zip(runs, run_ids):
        if len(run.requests):
            frame = run.requests.copy()
            frame["variant"] = frame["variant"].map(lambda v, r=run_id: rename(r, v))
            frames.append(frame)
        steps += [{**step, "variant": rename(run_id, step["variant"])} for step in run.steps]
        events += [{**event, "run_id": run_id} for event in run.events]
        if len(run.client):
            clients.append(run.client)
        consistency.update({rename(run_id, k): v for k, v in run.consistency.items()})
        for name, figures in (run.server.get("variants") or {}).items():
            server_variants[rename(run_id, name)] = figures
    first = runs[0]
    env = {**first.env, "run_id": "+".join(run_ids), "baseline": rename(run_ids[0], first.env.get("baseline", "")),
           "merged_from": run_ids}
    return RunData(requests=pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(), steps=steps,
                   events=events, env=env, client=pd.concat(clients, ignore_index=True) if clients else pd.DataFrame(),
                   consistency=consistency, server={**first.server, "variants": server_variants})

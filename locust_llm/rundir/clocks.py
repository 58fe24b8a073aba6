"""Worker clocks onto the master's: offsets from NTP-style exchanges (``runtime.clocksync``), and records moved
by them before anything is assigned to a step window. Pure.

A sample's offset is exact when both legs of its exchange took equally long, and off by at most half its round
trip otherwise; the sample with the shortest round trip bounds the error best. Clocks also drift (NTP slews
them), so a worker's offset is followed over time: the samples whose round trip is close to the shortest,
interpolated at each record's time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

__all__ = ["ClockSample", "TIME_COLUMNS", "UNCERTAINTY_MAX_S", "align", "estimate", "samples_of", "track"]

# Above this, a worker's requests near a window edge may land in the wrong window: the report warns.
UNCERTAINTY_MAX_S = 0.005
# Samples whose round trip is within this much of a worker's shortest follow its drift.
RTT_SLACK_S = 0.002
TIME_COLUMNS = ("t_intended", "t_slot", "t_connect", "t_send", "t_first", "t_end", "t_done")


@dataclass(frozen=True)
class ClockSample:
    worker: int
    t: float  # master time the answer arrived
    t0: float  # master sent the ping
    t1: float  # worker received it
    t2: float  # worker answered
    t3: float  # master received the answer

    @property
    def offset(self) -> float:
        """Worker clock minus master clock."""
        return ((self.t1 - self.t0) + (self.t2 - self.t3)) / 2.0

    @property
    def rtt(self) -> float:
        return (self.t3 - self.t0) - (self.t2 - self.t1)

    def to_dict(self) -> dict:
        return asdict(self)


def samples_of(rows: list[dict]) -> list[ClockSample]:
    return [ClockSample(**row) for row in rows]


def track(samples: list[ClockSample]) -> list[ClockSample]:
    best = min(s.rtt for s in samples)
    return sorted((s for s in samples if s.rtt <= best + RTT_SLACK_S), key=lambda s: s.t)


def estimate(samples: list[ClockSample]) -> dict[int, dict]:
    """Per worker index: the offset of the shortest exchange, its uncertainty (half that round trip), how far
    the offset moved over the run (drift), and the number of exchanges."""
    out = {}
    for worker in sorted({s.worker for s in samples}):
        mine = [s for s in samples if s.worker == worker]
        best = min(mine, key=lambda s: s.rtt)
        offsets = [s.offset for s in track(mine)]
        out[worker] = {
            "offset_s": best.offset,
            "uncertainty_s": max(best.rtt, 0.0) / 2.0,
            "rtt_s": best.rtt,
            "drift_s": max(offsets) - min(offsets),
            "exchanges": len(mine),
        }
    return out


def align(
    frame: pd.DataFrame,
    samples: list[ClockSample],
    columns=TIME_COLUMNS,
    worker_column="worker",
) -> pd.DataFrame:
    """``frame`` with every time column of each measured worker's rows moved onto the master's clock (its
    offset at that time subtracted); rows of workers without samples are left as they are."""
    if not samples or frame.empty or worker_column not in frame:
        return frame
    frame = frame.copy()
    present = [c for c in columns if c in frame]
    for worker in {s.worker for s in samples}:
        rows = (frame[worker_column] == worker).to_numpy()
        if not rows.any():
            continue
        kept = track([s for s in samples if s.worker == worker])
        times = np.array([s.t for s in kept])
        offsets = np.array([s.offset for s in kept])
        for column in present:
            values = frame.loc[rows, column].to_numpy(dtype=float)
            # The offset is looked up at the stamp's own time; the few ms between clocks do not matter for that.
            frame.loc[rows, column] = values - np.interp(values, times, offsets)
    return frame

"""Worker clocks onto the master's: offsets from hand-made exchanges with known delays, and records moved."""

import numpy as np
import pandas as pd
import pytest

from locust_llm.rundir.clocks import ClockSample, align, estimate


def exchange(worker, t0, offset, out_s, back_s, turn_s=0.0001):
    """An exchange whose legs took ``out_s`` and ``back_s``; the worker's clock is ``offset`` ahead."""
    t1 = t0 + out_s + offset
    t2 = t1 + turn_s
    t3 = t2 - offset + back_s
    return ClockSample(worker=worker, t=t3, t0=t0, t1=t1, t2=t2, t3=t3)


def test_the_shortest_exchange_gives_the_offset_and_half_its_round_trip_bounds_the_error():
    samples = [
        exchange(1, 100.0, 0.2, 0.004, 0.001),  # lopsided and slow: 1.5 ms off
        exchange(1, 105.0, 0.2, 0.0003, 0.0002),  # fast: 0.05 ms off
        exchange(0, 100.0, -0.01, 0.001, 0.001),
    ]
    est = estimate(samples)
    assert est[1]["offset_s"] == pytest.approx(0.2 + (0.0003 - 0.0002) / 2)
    assert est[1]["rtt_s"] == pytest.approx(0.0005) and est[1]["uncertainty_s"] == pytest.approx(0.00025)
    assert abs(est[1]["offset_s"] - 0.2) <= est[1]["uncertainty_s"]
    assert est[0]["offset_s"] == pytest.approx(-0.01) and est[1]["exchanges"] == 2


def test_records_move_by_their_workers_offset_followed_over_time():
    # worker 1's clock drifts from +200 ms to +204 ms over 100 s; worker 0 has no exchanges and stays as it is
    samples = [exchange(1, t, 0.2 + 0.00004 * (t - 1000.0), 0.0002, 0.0002) for t in np.arange(1000.0, 1101.0, 5.0)]
    frame = pd.DataFrame(
        {
            "worker": [1, 1, 0],
            "t_send": [1000.2, 1050.202, 1050.0],
            "t_first": [1000.3, np.nan, 1050.1],
            "t_end": [1000.4, 1050.5, 1050.2],
        }
    )
    moved = align(frame, samples)
    assert moved["t_send"].tolist() == pytest.approx([1000.0, 1050.0, 1050.0], abs=1e-4)
    assert moved["t_end"].iloc[1] == pytest.approx(1050.5 - 0.202, abs=1e-4)
    assert np.isnan(moved["t_first"].iloc[1]) and moved["t_first"].iloc[2] == 1050.1
    assert frame["t_send"].iloc[0] == 1000.2  # the caller's frame is not changed

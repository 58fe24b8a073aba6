"""Synthetic run directories with known answers, written as the run would write them.

Each builder writes the raw files only (``requests.parquet``, ``steps.json``, ``env.json`` and, where it
matters, telemetry and consistency outputs); tests run the pipeline on them, never reuse its output as truth.
"""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from locust_llm.records import REQUESTS_SCHEMA, RequestRecord

PAYLOAD = "<script>alert(1)</script>"
PAYLOAD_TITLE = "<script>document.title='pwned'</script>"
PAYLOAD_IMG = '"><img src=x onerror=alert(2)>'
EVIL_VARIANT = 'spec"><svg onload=alert(4)>'


def records_table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=REQUESTS_SCHEMA)


def write_requests(path: Path, rows: list[dict]) -> None:
    pq.write_table(records_table(rows), Path(path) / "requests.parquet")


WINDOW_S = 20.0
TOKENS = 50
LEVELS = [1, 2, 4, 8]
# Per-token time (s) of each variant at each level: spec-k4 is 2x faster at 1 and 2, 0.8x from 8.
TPOT_S = {"baseline": {1: 0.010, 2: 0.010, 4: 0.012, 8: 0.016}, "spec-k4": {1: 0.005, 2: 0.005, 4: 0.010, 8: 0.020}}
TTFT_S = 0.050


def synthetic_run(path, rng):
    """Closed loop: `level` streams back to back per step; jittered per-token gaps of known mean."""
    rows, steps, t = [], [], 1_000_000.0
    for variant, per_level in TPOT_S.items():
        for step, level in enumerate(LEVELS):
            steady = t + 2.0
            steps.append(
                {
                    "variant": variant,
                    "step": step,
                    "level": level,
                    "mode": "closed",
                    "users": level,
                    "t_start": t,
                    "t_steady": steady,
                    "t_end": steady + WINDOW_S,
                }
            )
            for stream in range(level):
                send = t + 0.01 * stream
                while send < steady + WINDOW_S:
                    gaps = rng.uniform(0.5, 1.5, TOKENS - 1) * per_level[level]
                    offsets = TTFT_S + np.concatenate([[0.0], np.cumsum(gaps)])
                    phase = "steady" if steady <= send < steady + WINDOW_S else "warmup"
                    rows.append(
                        RequestRecord(
                            run_id="synthetic",
                            variant=variant,
                            level=level,
                            step=step,
                            phase=phase,
                            user=stream,
                            request_id=f"{variant}-{step}-{len(rows)}",
                            output_tokens=TOKENS,
                            token_source="usage_deltas",
                            t_send=send,
                            t_first=send + offsets[0],
                            t_end=send + offsets[-1],
                            chunk_offsets=offsets.tolist(),
                            chunk_tokens=[1] * TOKENS,
                            finish_reason="length",
                            http_status=200,
                        ).to_dict()
                    )
                    send += offsets[-1]
            t = steady + WINDOW_S + 5.0
    # one failure at level 1 of the baseline: it must be counted, not dropped
    rows.append(
        RequestRecord(
            run_id="synthetic",
            variant="baseline",
            level=1,
            step=0,
            phase="steady",
            request_id="failed",
            t_send=steps[0]["t_steady"] + 1.0,
            error_class="http_error",
            http_status=500,
        ).to_dict()
    )
    write_requests(path, rows)
    (path / "steps.json").write_text(json.dumps({"steps": steps, "events": []}))
    (path / "env.json").write_text(
        json.dumps({"run_id": "synthetic", "baseline": "baseline", "scenario": {"slo": {"tpot_ms": 15.0}}})
    )


def closed_loop_requests(
    run_id: str, variants: dict, levels: list, t: float, rng, window: float = 6.0, fail: dict | None = None
) -> tuple[list, list]:
    """Closed-loop streams per level; ``variants`` maps name -> per-token seconds. Returns (rows, steps)."""
    rows, steps = [], []
    for variant, tpot in variants.items():
        for step, level in enumerate(levels):
            steady = t + 1.0
            steps.append(
                {
                    "variant": variant,
                    "step": step,
                    "level": float(level),
                    "mode": "closed",
                    "users": level,
                    "t_start": t,
                    "t_steady": steady,
                    "t_end": steady + window,
                }
            )
            failing = (fail or {}).get((variant, level))
            for stream in range(level):
                send = t + 0.01 * stream
                while send < steady + window:
                    phase = "steady" if steady <= send < steady + window else "warmup"
                    if failing:
                        rows.append(
                            RequestRecord(
                                run_id=run_id,
                                variant=variant,
                                level=level,
                                step=step,
                                phase=phase,
                                user=stream,
                                request_id=f"{variant}-{step}-{len(rows)}",
                                t_send=send,
                                error_class="connect_error",
                                error_message=failing,
                            ).to_dict()
                        )
                        send += 0.5
                        continue
                    gaps = rng.uniform(0.5, 1.5, 19) * tpot * (1 + 0.3 * math.log2(level))
                    offsets = 0.02 + np.concatenate([[0.0], np.cumsum(gaps)])
                    rows.append(
                        RequestRecord(
                            run_id=run_id,
                            variant=variant,
                            level=level,
                            step=step,
                            phase=phase,
                            user=stream,
                            request_id=f"{variant}-{step}-{len(rows)}",
                            output_tokens=20,
                            token_source="server_events",
                            t_send=send,
                            t_first=send + offsets[0],
                            t_end=send + offsets[-1],
                            chunk_offsets=offsets.tolist(),
                            chunk_tokens=[1] * 20,
                            finish_reason="length",
                            http_status=200,
                            draft_n=16 if variant != "baseline" else None,
                            draft_accepted=12 if variant != "baseline" else None,
                        ).to_dict()
                    )
                    send += offsets[-1]
            t = steady + window + 2.0
    return rows, steps


def hostile_run(path: Path) -> Path:
    """Two variants, telemetry with a gap, a server exit, errors and a consistency defect, and
    server-supplied strings that try to inject markup everywhere they surface."""
    rng = np.random.default_rng(3)
    variants = {"baseline": 0.010, EVIL_VARIANT: 0.006}
    rows, steps = closed_loop_requests("hostile", variants, [1, 2, 4], 1_800_000_000.0, rng, window=20.0)
    rows.append(
        RequestRecord(
            run_id="hostile",
            variant=EVIL_VARIANT,
            level=2,
            step=1,
            phase="steady",
            request_id="failed-1",
            t_send=steps[4]["t_steady"] + 0.5,
            error_class="http_error",
            error_message=f"upstream said {PAYLOAD} {PAYLOAD_IMG}",
            http_status=500,
        ).to_dict()
    )
    write_requests(path, rows)
    events = [
        {
            "kind": "server_exited",
            "t": steps[-1]["t_end"] - 1,
            "variant": EVIL_VARIANT,
            "log_tail": f"fatal: {PAYLOAD}\nlast line {PAYLOAD_TITLE}",
        }
    ]
    (path / "steps.json").write_text(json.dumps({"steps": steps, "events": events}))
    server = {
        "engine": "llamacpp",
        "version": f"version: 1.0 {PAYLOAD}",
        "model": f"/models/{PAYLOAD}.gguf",
        "served_model": f"evil{PAYLOAD}{PAYLOAD_TITLE}",
        "command": ["llama-server", "--alias", PAYLOAD_IMG],
        "launched": True,
    }
    env = {
        "run_id": "hostile",
        "baseline": "baseline",
        "variants": list(variants),
        "scenario": {
            "name": f"scenario {PAYLOAD}",
            "slo": {"ttft_ms": None, "tpot_ms": None, "e2e_ms": None},
            "variants": {"baseline": {}, EVIL_VARIANT: {"speculative": {"type": PAYLOAD, "n_max": 4}}},
        },
        "load": {
            "mode": "closed",
            "ladder": [1, 2, 4],
            "step_duration_s": 6.0,
            "warmup_s": 1.0,
            "prompt_tokens": 32,
            "max_tokens": 20,
            "api": "completions",
            "seed": 0,
        },
        "servers": {
            "baseline": dict(server, variant="baseline", speculative=None),
            EVIL_VARIANT: dict(server, variant=EVIL_VARIANT, speculative={"type": PAYLOAD, "n_max": 4}),
        },
        "host": {"hostname": f"host{PAYLOAD}", "cpu_count": 2, "gpu": PAYLOAD_IMG},
        "seed": 0,
    }
    (path / "env.json").write_text(json.dumps(env))
    outputs = [
        {"prompt_id": f"p/{i}", "max_tokens": 8, "text": f"text {i} {PAYLOAD}", "tokens": [1, 2, 3, i]}
        for i in range(3)
    ]
    diverged = [dict(o) for o in outputs]
    diverged[1] = dict(diverged[1], text=f"other {PAYLOAD_TITLE}", tokens=[1, 2, 9, 1])
    (path / "consistency.json").write_text(json.dumps({"baseline": outputs, EVIL_VARIANT: diverged}))
    telemetry = []
    for s in steps:
        for t in np.arange(s["t_start"], s["t_end"], 1.0):
            if s["variant"] == EVIL_VARIANT and s["step"] == 1 and t > s["t_steady"] + 2:
                continue  # a gap
            k = t - steps[0]["t_start"]
            telemetry += [
                (t, s["variant"], "scrape", "requests_running", "{}", float(s["users"])),
                (t, s["variant"], "process", "process_cpu_cores", "{}", 1.2),
                (t, s["variant"], "scrape", "generation_tokens", "{}", 100.0 * k),
                (t, s["variant"], "scrape", "spec_draft_tokens", "{}", 40.0 * k),
                (t, s["variant"], "scrape", "spec_accepted_tokens", "{}", 30.0 * k),
            ]
    pd.DataFrame(telemetry, columns=["t", "variant", "source", "metric", "labels", "value"]).to_parquet(
        path / "telemetry.parquet"
    )
    (path / "telemetry.json").write_text(
        json.dumps({"gaps": [], "notes": [{"kind": "x", "t": 0, "message": f"note {PAYLOAD}"}]})
    )
    return path


def minimal_run(path: Path) -> Path:
    """One variant, no telemetry, no client samples, no consistency check; every request of level 2 failed."""
    rng = np.random.default_rng(5)
    rows, steps = closed_loop_requests(
        "minimal", {"baseline": 0.01}, [1, 2], 1_800_000_000.0, rng, fail={("baseline", 2): "connection refused"}
    )
    write_requests(path, rows)
    (path / "steps.json").write_text(json.dumps({"steps": steps, "events": []}))
    (path / "env.json").write_text(json.dumps({"run_id": "minimal", "baseline": "baseline"}))
    return path


def stream_record(
    run_id: str, variant: str, level: float, step: int, send: float, ttft: float, tpot: float, tokens: int, **fields
) -> dict:
    """A successful stream with one token per chunk: first after ``ttft``, then one every ``tpot`` seconds."""
    offsets = ttft + tpot * np.arange(tokens)
    fields.setdefault("phase", "steady")
    return RequestRecord(
        run_id=run_id,
        variant=variant,
        level=level,
        step=step,
        output_tokens=tokens,
        token_source="usage_deltas",
        t_send=send,
        t_first=send + offsets[0],
        t_end=send + offsets[-1],
        t_done=send + offsets[-1] + 0.001,
        chunk_offsets=offsets.tolist(),
        chunk_tokens=[1] * tokens,
        finish_reason="length",
        http_status=200,
        **fields,
    ).to_dict()


def back_to_back(
    run_id: str,
    variant: str,
    level: float,
    step: int,
    start: float,
    seconds: float,
    ttft: float,
    tpot: float,
    tokens: int,
    rng,
    stream: int = 0,
    **fields,
) -> list[dict]:
    """One closed-loop stream over ``[start, start + seconds)``: requests sent back to back, each with its
    per-token time ``tpot`` jittered by up to 3%."""
    rows, send, seq = [], start + 0.003 * stream, 0
    while send < start + seconds:
        jittered = tpot * rng.uniform(0.97, 1.03)
        rows.append(
            stream_record(
                run_id,
                variant,
                level,
                step,
                send,
                ttft,
                jittered,
                tokens,
                worker=stream,
                user=0,
                seq=seq,
                request_id=f"{variant}-{step}-{stream}-{seq}",
                **fields,
            )
        )
        send += ttft + jittered * (tokens - 1) + 0.001
        seq += 1
    return rows


def patch_env(path: Path, section: str, **values) -> Path:
    """Set keys of one section of a written run's ``env.json``."""
    env = json.loads((path / "env.json").read_text())
    env.setdefault(section, {}).update(values)
    (path / "env.json").write_text(json.dumps(env))
    return path


def write_run(
    path: Path,
    rows: list[dict],
    steps: list[dict],
    mode: str = "closed",
    gates: dict | None = None,
    slo: dict | None = None,
    baseline: str = "baseline",
    first_token_s: float = 120.0,
) -> Path:
    write_requests(path, rows)
    (path / "steps.json").write_text(json.dumps({"steps": steps, "events": []}))
    env = {
        "run_id": path.name,
        "baseline": baseline,
        "load": {"mode": mode, "timeouts": {"first_token_s": first_token_s}},
        "scenario": {"slo": slo or {}},
        "gates": gates or {},
    }
    (path / "env.json").write_text(json.dumps(env))
    return path


def window(variant: str, step: int, level: float, start: float, length: float, mode: str = "closed") -> dict:
    return {
        "variant": variant,
        "step": step,
        "level": level,
        "mode": mode,
        "users": int(level),
        "t_start": start - 1.0,
        "t_steady": start,
        "t_end": start + length,
    }


WARMUP_S = 2.0


def open_loop_run(
    path: Path,
    lag_s: dict | None = None,
    tpot_s: dict | None = None,
    seconds: float = 20.0,
    slo: dict | None = None,
    gates: dict | None = None,
    seed: int = 0,
) -> Path:
    """Constant arrivals, one step per rate in ``lag_s`` (rate -> how late each request is sent); each variant
    streams 20 tokens at its TPOT. Request k of every variant has the same intended time (the pairing). Arrivals
    begin 2 s before the window (a warm-up), so the window opens on a server already in its steady state."""
    rng = np.random.default_rng(seed)
    tpot_s = tpot_s or {"baseline": 0.010}
    lag_s = lag_s or {10.0: 0.0}
    rows, steps, t = [], [], 1_700_000_000.0
    for variant, tpot in tpot_s.items():
        for step, (rate, lag) in enumerate(lag_s.items()):
            steps.append(window(variant, step, rate, t, seconds, "open"))
            for k in range(-int(rate * WARMUP_S), int(rate * seconds)):
                intended = t + k / rate
                ttft = 0.030 * rng.uniform(0.9, 1.1)
                rows.append(
                    stream_record(
                        path.name,
                        variant,
                        rate,
                        step,
                        intended + lag,
                        ttft,
                        tpot * rng.uniform(0.9, 1.1),
                        20,
                        mode="open",
                        phase="steady" if k >= 0 else "warmup",
                        t_intended=intended,
                        seq=k,
                        request_id=f"{variant}-{step}-{k}",
                    )
                )
            t += seconds + 5.0
    return write_run(path, rows, steps, mode="open", slo=slo, gates=gates)


def write_client(path: Path, start: float, seconds: int, workers=(0,), cpu: float = 5.0, lag_ms=None) -> Path:
    """``client.parquet``: one sample per load process and second from ``start``, ``cpu`` % of a core, and the
    event-loop lag of second i ``lag_ms(i)``: ``(worst, mean)`` in ms (0.5 ms both by default)."""
    lag_ms = lag_ms or (lambda i: (0.5, 0.5))
    rows = [
        {
            "t": start + i + 1.0,
            "worker": worker,
            "cpu_percent": cpu,
            "loop_lag_ms_max": float(lag_ms(i)[0]),
            "loop_lag_ms_mean": float(lag_ms(i)[1]),
        }
        for worker in workers
        for i in range(-2, seconds + 2)
    ]
    frame = pd.DataFrame(rows).astype({"worker": "int32"})
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), Path(path) / "client.parquet")
    return path

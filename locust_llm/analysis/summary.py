"""``summary.json`` from the run directory's files alone (requests.parquet, steps.json, env.json)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .metrics import inter_chunk_ms, per_token_itl_ms, request_metrics, stats, tokens_in_window

LATENCY_FIELDS = ("ttft_ms", "ttft_sched_ms", "tpot_ms", "e2e_ms", "e2e_sched_ms", "decode_tps", "e2e_tps",
                  "schedule_lag_ms")


def load_requests(run_dir: Path) -> pd.DataFrame:
    run_dir = Path(run_dir)
    path = run_dir / "requests.parquet"
    if path.exists():
        return pd.read_parquet(path)
    parts = sorted((run_dir / "requests.parts").glob("part-*.parquet"))
    if parts:  # a run that died before its final merge
        return pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)
    return pd.DataFrame()


def read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def step_summary(variant_frame: pd.DataFrame, step: dict) -> dict:
    """Figures of one ladder step: requests sent in its steady window, tokens arriving in it."""
    start, end = step["t_steady"], step["t_end"]
    window = end - start if (math.isfinite(start) and math.isfinite(end)) else math.nan
    sent = variant_frame[(variant_frame["step"] == step["step"]) & (variant_frame["phase"] == "steady")]
    derived = request_metrics(sent) if len(sent) else pd.DataFrame(columns=LATENCY_FIELDS)
    failed = sent["error_class"].notna()
    itl, icl = [], []
    for offsets, tokens, error in zip(sent["chunk_offsets"], sent["chunk_tokens"], sent["error_class"]):
        if error is None or (isinstance(error, float) and math.isnan(error)):
            itl.extend(per_token_itl_ms(offsets, tokens))
            icl.extend(inter_chunk_ms(offsets))
    tokens = tokens_in_window(variant_frame, start, end) if window and window > 0 else 0
    summary = {
        "step": step["step"], "level": step["level"], "mode": step["mode"], "users": step.get("users"),
        "window_s": window, "requests": int(len(sent)), "errors": int(failed.sum()),
        "error_rate": float(failed.mean()) if len(sent) else None,
        "errors_by_class": {str(k): int(v) for k, v in sent.loc[failed, "error_class"].value_counts().items()},
        "output_tokens": int(sent.loc[~failed, "output_tokens"].sum()),
        "output_tps": tokens / window if window and window > 0 else None,
        "request_rate": len(sent) / window if window and window > 0 else None,
        "itl_ms": stats(itl), "icl_ms": stats(icl),
        "token_sources": {str(k): int(v) for k, v in sent["token_source"].value_counts().items()},
    }
    for name in LATENCY_FIELDS:
        summary[name] = stats(derived[name]) if name in derived else stats([])
    if step["mode"] == "open":
        summary["offered_rate"] = step["level"]
        summary["achieved_rate"] = summary["request_rate"]
    else:
        for name in ("ttft_sched_ms", "e2e_sched_ms", "schedule_lag_ms"):
            summary.pop(name)
    drafted = sent["draft_n"].dropna().sum() if "draft_n" in sent else 0
    if drafted:
        accepted = sent["draft_accepted"].dropna().sum()
        summary["acceptance_client"] = {"rate": float(accepted / drafted), "draft_tokens": int(drafted),
                                        "accepted_tokens": int(accepted), "source": "client (per-request timings)"}
    return summary


def build_summary(run_dir: Path) -> dict:
    run_dir = Path(run_dir)
    frame = load_requests(run_dir)
    steps_doc = read_json(run_dir / "steps.json")
    env = read_json(run_dir / "env.json")
    variants: dict[str, dict] = {}
    for step in steps_doc.get("steps", []):
        step = {**step, "t_steady": _num(step.get("t_steady")), "t_end": _num(step.get("t_end"))}
        variant_frame = frame[frame["variant"] == step["variant"]] if len(frame) else frame
        entry = variants.setdefault(step["variant"], {"steps": []})
        if len(variant_frame):
            entry["steps"].append(step_summary(variant_frame, step))
        else:
            entry["steps"].append({"step": step["step"], "level": step["level"], "mode": step["mode"],
                                   "requests": 0, "errors": 0})
    return {
        "run_id": env.get("run_id", run_dir.name), "generated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "baseline": env.get("baseline"), "records": int(len(frame)),
        "variants": variants, "events": steps_doc.get("events", []),
    }


def _num(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _json_safe(value):
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


def write_summary(run_dir: Path) -> Path:
    run_dir = Path(run_dir)
    path = run_dir / "summary.json"
    tmp = path.with_name("summary.json.tmp")
    tmp.write_text(json.dumps(_json_safe(build_summary(run_dir)), indent=2))
    tmp.replace(path)
    return path

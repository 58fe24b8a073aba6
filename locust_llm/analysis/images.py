"""What images add to TTFT (``Summary.images``): per variant, image bucket and level, TTFT P50 of the requests that
carried the bucket's images against its text-only twins (the same bucket, so texts of the same length), and the
difference with a bootstrap 95% CI. Present only for runs whose scenario gave a bucket ``images``. Pure.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..fmt import lvl, num
from ..rundir.load import RunData
from .metrics import request_metrics
from .stats import bootstrap_distribution, mean_of, percentile_interval, percentile_of, percentile_stat

__all__ = [
    "image_overhead",
]

N_BOOT = 1000
METHOD = (
    "TTFT P50 of a bucket's steady, successful requests with images minus that of its text-only twins (half the "
    "bucket's requests, drawn from the same texts, so the text length is the same); 95% CI: "
    "percentile bootstrap of the difference, each side resampled on its own"
)


def image_overhead(run: RunData, variants: dict[str, dict]) -> dict | None:
    """The figures of every image bucket, or None when no request belonged to one (runs without images, or
    recorded before the ``images`` column existed)."""
    frame = run.requests
    if "images" not in frame or not frame["images"].notna().any():
        return None
    status = {(name, s["step"]): s["status"] for name, entry in variants.items() for s in entry["steps"]}
    rows = frame[frame["images"].notna() & (frame["phase"] == "steady") & frame["error_class"].isna()]
    ttft = request_metrics(rows)["ttft_ms"]
    order = {name: i for i, name in enumerate(variants)}
    groups = sorted(
        rows.groupby(["variant", "bucket", "level"]),
        key=lambda kv: (order.get(kv[0][0], len(order)), kv[0][1], kv[0][2]),
    )
    levels = [
        _level(str(variant), str(bucket), float(level), group, ttft[group.index], status)
        for (variant, bucket, level), group in groups
    ]
    return {"method": METHOD, "levels": levels}


def _level(variant: str, bucket: str, level: float, group: pd.DataFrame, ttft: pd.Series, status: dict) -> dict:
    shown = (group["images"] > 0).to_numpy()
    with_images, without = ttft[shown].to_numpy(dtype=float), ttft[~shown].to_numpy(dtype=float)
    p50_with, p50_without = percentile_of(with_images, 50), percentile_of(without, 50)
    steps = sorted(int(s) for s in group["step"].unique())
    figures = {
        "variant": variant,
        "bucket": bucket,
        "level": level,
        "mode": str(group["mode"].iloc[0]),
        "steps": steps,
        "clean": all(status.get((variant, s)) == "clean" for s in steps),
        "with_images": int(np.isfinite(with_images).sum()),
        "without_images": int(np.isfinite(without).sum()),
        "images_per_request": mean_of(group.loc[shown, "images"]),
        "image_bytes": mean_of(group.loc[shown, "image_bytes"]),
        "prompt_tokens_with": percentile_of(group.loc[shown, "prompt_tokens"], 50),
        "prompt_tokens_without": percentile_of(group.loc[~shown, "prompt_tokens"], 50),
        "ttft_p50_with_ms": p50_with,
        "ttft_p50_without_ms": p50_without,
        "overhead_ms": p50_with - p50_without if p50_with is not None and p50_without is not None else None,
        "overhead_ci95": difference_ci(with_images, without),
    }
    figures["text"] = _words(figures)
    return figures


def difference_ci(with_images: np.ndarray, without: np.ndarray) -> list[float] | None:
    """95% interval of P50(with) - P50(without): the two sides are independent samples, resampled separately."""
    if np.isfinite(with_images).sum() < 2 or np.isfinite(without).sum() < 2:
        return None
    median = percentile_stat(50)
    replicates = bootstrap_distribution(with_images, median, N_BOOT, rng=1) - bootstrap_distribution(
        without, median, N_BOOT, rng=2
    )
    interval = percentile_interval(replicates)
    return list(interval) if interval else None


def _words(f: dict) -> str:
    unit = "req/s" if f["mode"] == "open" else ("user" if f["level"] == 1 else "users")
    where = f"{f['variant']} at {lvl(f['level'])} {unit}, bucket {f['bucket']}"
    if f["overhead_ms"] is None:
        return (
            f"{where}: not measured ({f['with_images']} requests with images and {f['without_images']} without "
            "had a TTFT)"
        )
    kb = num((f["image_bytes"] or 0) / 1000)
    ci = f["overhead_ci95"]
    interval = f" (95% CI {ci[0]:+.1f} to {ci[1]:+.1f})" if ci else " (no CI: too few requests)"
    caveat = "" if f["clean"] else "; not every step was clean"
    return (
        f"{where}: {num(f['images_per_request'])} image(s), {kb} kB per request, add {f['overhead_ms']:+.1f} "
        f"ms to TTFT P50{interval}: {f['ttft_p50_with_ms']:.1f} ms with, {f['ttft_p50_without_ms']:.1f} ms "
        f"without, same text length (n = {f['with_images']} / {f['without_images']}){caveat}"
    )

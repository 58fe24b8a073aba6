"""Variants side by side (``report.side_by_side``) from a hand-built summary and env: each variant's own model file
and KV cache types as its server's command and files say, its peak memory, its speed-up per level with the status
that kept a level out, and its quality against references."""

from locust_llm.analysis.documents.quality import PassRate, QualitySummary, VariantQuality
from locust_llm.analysis.documents.server import MemoryTrend
from locust_llm.analysis.documents.summary import VariantFigures
from locust_llm.report.html import render_html
from locust_llm.report.side_by_side import kv_cache_types, side_by_side
from tests.unit.report.documents import compared, comparison, ratio, summary, view

MIB = 2**20


def test_kv_cache_types_are_read_from_either_spelling_with_llamacpps_default_for_the_other():
    assert (
        kv_cache_types(["llama-server", "-m", "m.gguf", "-ctk", "q8_0", "--cache-type-v", "q4_0"]) == "K q8_0, V q4_0"
    )
    assert kv_cache_types(["llama-server", "-ctv", "q8_0"]) == "K f16, V q8_0"
    assert kv_cache_types(["llama-server", "-m", "m.gguf"]) == "K f16, V f16"
    assert kv_cache_types(None) is None


def trend(peak: float) -> MemoryTrend:
    return MemoryTrend(
        metric="process_rss_mib",
        unit="MiB/min",
        source="process",
        start_mib=100,
        end_mib=peak,
        peak_mib=peak,
        n=40,
        window_s=600,
    )


def quality_of(variant: str, passed: int, eligible: bool = True) -> VariantQuality:
    return VariantQuality(
        variant=variant,
        answered=True,
        greedy=PassRate(answers=17, passed=passed, rate=passed / 17, rate_ci95=[0.2, 0.6]),
        eligible=eligible,
        reason=None if eligible else "its drop's interval lies beyond 10 points",
    )


def test_each_variant_shows_its_model_file_kv_cache_memory_speedups_and_quality():
    doc = summary(
        {"base": [], "q8": [], "kv": []},
        [
            comparison([compared(1.0, ratio(0.91, 0.85, 0.97)), compared(4.0, ratio(1.0, None, None))], variant="q8"),
            comparison(
                [compared(1.0, ratio(1.02, 0.98, 1.06)), compared(4.0, ratio(1.1, 1.0, 1.2), status="unsteady")],
                variant="kv",
            ),
        ],
    )
    doc.variants = {
        name: VariantFigures(memory_trend=trend(peak) if peak else None)
        for name, peak in (("base", 310), ("q8", 352), ("kv", None))
    }
    doc.quality = QualitySummary(
        tasks="real-tasks.jsonl",
        items=17,
        temperature=0.7,
        max_drop_pct=10,
        method="m",
        text="t",
        variants={"base": quality_of("base", 7), "q8": quality_of("q8", 7), "kv": quality_of("kv", 3, eligible=False)},
    )
    files = {
        "base": {
            "role": "target",
            "path": "/m/SmolLM2.Q4_1.gguf",
            "sha256": "b179c9523d0e" + "0" * 52,
            "source": "the wheel",
            "size_bytes": 92 * MIB + MIB // 10,
        },
        "q8": {
            "role": "target",
            "path": "/m/requantized-Q8_0.gguf",
            "sha256": "a" * 64,
            "source": "requantized to Q8_0",
            "size_bytes": 138 * MIB,
        },
    }
    env = {
        "servers": {
            "base": {
                "engine": "llamacpp",
                "command": ["llama-server", "-m", "/m/SmolLM2.Q4_1.gguf"],
                "model_files": [files["base"]],
            },
            "q8": {
                "engine": "llamacpp",
                "command": ["llama-server", "-m", "/m/requantized-Q8_0.gguf"],
                "model_files": [files["q8"]],
            },
            "kv": {
                "engine": "llamacpp",
                "command": ["llama-server", "-m", "/m/SmolLM2.Q4_1.gguf", "-ctk", "q8_0", "-ctv", "q8_0"],
                "model_files": [files["base"]],
            },
        }
    }
    run = view(doc, env)
    base, q8, kv = side_by_side(run)
    assert (base.variant, base.baseline, base.speedups) == ("base", True, [])
    assert base.model == "SmolLM2.Q4_1.gguf, 92.1 MiB, sha256 b179c9523d0e" and base.kv_cache == "K f16, V f16"
    assert (
        q8.model == "requantized-Q8_0.gguf, 138.0 MiB, sha256 aaaaaaaaaaaa" and q8.model_source == "requantized to Q8_0"
    )
    assert (base.peak_memory, q8.peak_memory, kv.peak_memory) == (
        "310 MiB (server RSS, 40 samples)",
        "352 MiB (server RSS, 40 samples)",
        None,
    )
    assert q8.speedups == ["1: 0.91x [0.85x\u20130.97x]", "4: 1.00x"]
    assert kv.speedups == ["1: 1.02x [0.98x\u20131.06x]", "4: unsteady"]
    assert kv.kv_cache == "K q8_0, V q8_0"
    assert q8.quality == "greedy 7/17 (41%, 20.0\u201360.0%)"
    assert kv.quality == "greedy 3/17 (18%, 20.0\u201360.0%); not eligible: its drop's interval lies beyond 10 points"
    html = render_html(run)
    assert 'id="side-by-side"' in html and "requantized-Q8_0.gguf, 138.0 MiB" in html


def test_a_run_of_one_variant_has_no_side_by_side():
    assert side_by_side(view(summary({"base": []}))) == []
    assert 'id="side-by-side"' not in render_html(view(summary({"base": []})))

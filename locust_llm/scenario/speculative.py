"""Speculative-decoding settings per engine, validated, and sweeps: a list given for one setting expands a
variant into one variant per value (``spec`` with ``n_max: [1, 2, 4]`` -> ``spec-k1``, ``spec-k2``, ``spec-k4``).
"""

from __future__ import annotations

import re
import reprlib
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import Field, model_validator

from .base import Strict

__all__ = [
    "SPECULATIVE_MODELS",
    "LlamaCppSpeculative",
    "SglangSpeculative",
    "Sweep",
    "VllmSpeculative",
    "expand_sweeps",
]


class LlamaCppSpeculative(Strict):
    """llama.cpp speculative flags (``--spec-type``, ``-md``, ``--spec-draft-*``, ``--spec-ngram-mod-*``).

    Unset numbers keep the server's defaults. Random-weight models have flat distributions, so any
    p_min above ~0.1 means no drafts at all; the tiny scenarios set 0.
    """

    type: Literal[
        "draft-simple",
        "draft-eagle3",
        "draft-mtp",
        "draft-dflash",
        "draft-dspark",
        "ngram-simple",
        "ngram-map-k",
        "ngram-map-k4v",
        "ngram-mod",
        "ngram-cache",
    ] = "draft-simple"
    # Path to the draft GGUF; omitted with a tiny_model, the generated draft is used.
    draft_model: str | None = None
    n_max: int | None = Field(default=None, ge=1)
    n_min: int | None = Field(default=None, ge=0)
    p_min: float | None = Field(default=None, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _flags_exist_for_type(self) -> LlamaCppSpeculative:
        if not self.type.startswith("draft-"):
            if self.draft_model or self.p_min is not None:
                raise ValueError(f"type {self.type!r} drafts from n-grams: draft_model and p_min do not apply")
            if self.type != "ngram-mod" and (self.n_max is not None or self.n_min is not None):
                raise ValueError(
                    f"type {self.type!r} has no n_max/n_min flags; pass its --spec-ngram-* flags in the variant's args"
                )
        return self


# vLLM's ``SpeculativeMethod`` and its keys, read from vllm/config/speculative.py (vllm-project/vllm at 002e77c1,
# recorded in tests/fixtures/vllm/speculative-config.json; a test compares both with vLLM's class when installed).
VLLM_MTP_METHODS = (
    "deepseek_mtp",
    "dots3_note_mtp",
    "mimo_mtp",
    "mimo_v2_mtp",
    "glm4_moe_mtp",
    "glm4_moe_lite_mtp",
    "glm_ocr_mtp",
    "ernie_mtp",
    "nemotron_h_mtp",
    "exaone_moe_mtp",
    "exaone4_5_mtp",
    "qwen3_next_mtp",
    "qwen4_exp_mtp",
    "qwen3_5_mtp",
    "longcat_flash_mtp",
    "bailing_hybrid_v3_mtp",
    "minimax_m3_mtp",
    "bailing_hybrid_mtp",
    "mtp",
    "kimi_k3_mtp",
    "pangu_ultra_moe_mtp",
    "step3p5_mtp",
    "hy_v3_mtp",
    "hy_v4_mtp",
    "gemma4_mtp",
    "inkling_mtp",
    "glm5_next_mtp",
)
VLLM_METHODS = (
    "ngram",
    "ngram_gpu",
    "medusa",
    "mlp_speculator",
    "draft_model",
    "suffix",
    "custom_class",
    "eagle",
    "eagle3",
    "extract_hidden_states",
    "dflash",
    "dspark",
    *VLLM_MTP_METHODS,
)
VLLM_NEEDS_MODEL = ("draft_model", "eagle", "eagle3", "medusa", "mlp_speculator", "dflash", "dspark")


class VllmSpeculative(Strict):
    """Keys of vLLM's ``--speculative-config`` JSON (vllm/config/speculative.py): every key a user may set. Left out:
    the configs vLLM fills in itself (``target_model_config``, ``draft_model_config``, their parallel configs) and
    ``tensor_parallel_size``, which vLLM keeps only to tell users to write ``draft_tensor_parallel_size``."""

    method: Literal[VLLM_METHODS] | None = None  # type: ignore[valid-type]
    # Without it, vLLM takes the draft model's own number; a batch-size schedule sets it per batch size.
    num_speculative_tokens: int | None = Field(default=None, ge=1)
    num_speculative_tokens_per_batch_size: list[tuple[int, int, int]] | None = None
    model: str | None = None
    draft_tensor_parallel_size: int | None = Field(default=None, ge=1)
    max_model_len: int | None = Field(default=None, ge=1)
    quantization: str | None = None
    moe_backend: str | None = None
    revision: str | None = None
    code_revision: str | None = None
    index_share_for_mtp_iteration: bool | None = None
    prompt_lookup_min: int | None = Field(default=None, ge=1)
    prompt_lookup_max: int | None = Field(default=None, ge=1)
    parallel_drafting: bool | None = None
    disable_padded_drafter_batch: bool | None = None
    disable_eagle_block_drop: bool | None = None
    use_local_argmax_reduction: bool | None = None
    draft_sample_method: Literal["greedy", "probabilistic"] | None = None
    use_heterogeneous_vocab: bool | None = None
    enforce_eager: bool | None = None
    kv_cache_dtype: str | None = None
    attention_backend: str | None = None
    draft_load_config: dict[str, Any] | None = None
    rejection_sample_method: Literal["standard", "synthetic", "block"] | None = None
    synthetic_acceptance_rates: list[float] | None = None
    synthetic_acceptance_length: float | None = None
    enable_adaptive_verification: bool | None = None
    dspark_draft_topk: int | None = Field(default=None, ge=1)
    suffix_decoding_max_tree_depth: int | None = None
    suffix_decoding_max_cached_requests: int | None = None
    suffix_decoding_max_spec_factor: float | None = None
    suffix_decoding_min_token_prob: float | None = None

    @model_validator(mode="after")
    def _model_when_needed(self) -> VllmSpeculative:
        if self.method is None and not self.model:
            raise ValueError("set 'method' (e.g. eagle3, ngram, mtp) or 'model' (vLLM then detects the method)")
        if self.method in VLLM_NEEDS_MODEL and not self.model:
            raise ValueError(f"method {self.method!r} needs 'model' (the draft or head checkpoint)")
        return self


class SglangSpeculative(Strict):
    """SGLang ``--speculative-*`` flags."""

    algorithm: Literal["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"]
    draft_model_path: str | None = None
    num_steps: int | None = Field(default=None, ge=1)
    eagle_topk: int | None = Field(default=None, ge=1)
    num_draft_tokens: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _all_or_none(self) -> SglangSpeculative:
        given = [self.num_steps, self.eagle_topk, self.num_draft_tokens]
        if any(v is not None for v in given) and not all(v is not None for v in given):
            raise ValueError("set all of num_steps, eagle_topk and num_draft_tokens, or none (SGLang's rule)")
        if self.algorithm in ("EAGLE", "EAGLE3", "STANDALONE") and not self.draft_model_path:
            raise ValueError(f"algorithm {self.algorithm} needs 'draft_model_path'")
        return self


SPECULATIVE_MODELS: dict[str, type[Strict]] = {
    "llamacpp": LlamaCppSpeculative,
    "vllm": VllmSpeculative,
    "sglang": SglangSpeculative,
}


# A list given for one of these speculative keys sweeps it; the variant expands into one variant per value.
DRAFT_LENGTH_KEYS = ("n_max", "num_speculative_tokens", "num_draft_tokens")
MODEL_KEYS = ("draft_model", "model", "draft_model_path")
MAX_SWEEP_VALUES = 32


class Sweep(Strict):
    """A variant whose speculative ``setting`` was given as a list: one variant per value, in order."""

    setting: str
    label: str  # "k" for draft lengths (the schedule reads "k = 4"), else the setting's name
    values: list[Any]
    variants: list[str]


def _sweep_name(variant: str, key: str, value: Any) -> str:
    if key in MODEL_KEYS:
        stem = Path(str(value)).name.removesuffix(".gguf") or "model"
        return f"{variant}-" + re.sub(r"[^A-Za-z0-9._-]", "-", stem)[:100]
    return f"{variant}-{'k' if key in DRAFT_LENGTH_KEYS else key}{value}"


def expand_sweeps(engine: Any, variants: Any) -> tuple[dict, dict]:
    """Variants with a list-valued speculative setting -> one variant per value, and the sweeps they form.
    Keys that are lists by nature (vLLM's synthetic_acceptance_rates) never sweep."""
    model = SPECULATIVE_MODELS.get(engine) if isinstance(engine, str) else None
    if model is None or not isinstance(variants, dict):
        return variants, {}
    expanded: dict[str, Any] = {}
    sweeps: dict[str, dict] = {}
    for name, variant in variants.items():
        spec = variant.get("speculative") if isinstance(variant, dict) else None
        lists = [
            k
            for k, v in (spec or {}).items()
            if isinstance(v, list)
            and k in model.model_fields
            and get_origin(model.model_fields[k].annotation) is not list
            and list not in [get_origin(a) for a in get_args(model.model_fields[k].annotation)]
        ]
        if not lists:
            expanded[name] = variant
            continue
        where = f"variants.{name}.speculative"
        if len(lists) > 1:
            raise ValueError(
                f"{where}: lists for {' and '.join(lists)}; a variant sweeps one setting; make the "
                "others single values or write one variant per combination"
            )
        key, values = lists[0], spec[lists[0]]
        if not 1 <= len(values) <= MAX_SWEEP_VALUES or len(set(map(repr, values))) != len(values):
            raise ValueError(
                f"{where}.{key}: a sweep needs 1 to {MAX_SWEEP_VALUES} distinct values; found {reprlib.repr(values)}"
            )
        names = []
        for value in values:
            child = _sweep_name(name, key, value)
            if child in variants or child in expanded:
                raise ValueError(
                    f"{where}.{key}: the sweep's variant {child!r} clashes with another variant; rename {name!r}"
                )
            expanded[child] = {**variant, "speculative": {**spec, key: value}}
            names.append(child)
        sweeps[name] = {
            "setting": key,
            "label": "k" if key in DRAFT_LENGTH_KEYS else key,
            "values": values,
            "variants": names,
        }
    return expanded, sweeps

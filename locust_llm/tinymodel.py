"""Generate a small seeded llama target/draft GGUF pair with genuine draft agreement.

The target is ``n_layer`` transformer blocks. Block 0 is a full-strength random block; the later
blocks write back into the residual stream through output projections scaled by
``residual_scale``, so they only nudge the logits. The draft is block 0 alone with the same
embeddings, output head and vocabulary, so under greedy decoding it predicts the target's next
token most of the time. ``residual_scale`` is the agreement knob: smaller means more agreement.

Decode on a CPU is memory-bound, so a 1-block draft costs a fraction of the target per token:
that is the same physics that makes speculative decoding pay on a GPU at low batch sizes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from .rundir.layout import atomic_write, write_text

__all__ = ["ensure", "generate"]

MANIFEST = "tiny-model.json"
SPACE = "\u2581"  # SentencePiece's word-boundary marker
CONSONANTS = "bdfghklmnprstvwz"
VOWELS = "aeiou"
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class TinyModelConfig:
    n_embd: int
    n_layer: int
    n_head: int
    n_ff: int
    n_vocab: int
    n_ctx: int
    residual_scale: float
    f16: bool


PRESETS: dict[str, TinyModelConfig] = {
    # Loads and answers in well under a second; for tests.
    "test": TinyModelConfig(
        n_embd=128, n_layer=4, n_head=4, n_ff=256, n_vocab=512, n_ctx=2048, residual_scale=0.05, f16=False
    ),
    # Big enough that decode is memory-bound on a laptop CPU, so speculation shows a real gain.
    "demo": TinyModelConfig(
        n_embd=768, n_layer=12, n_head=12, n_ff=2048, n_vocab=2048, n_ctx=4096, residual_scale=0.02, f16=True
    ),
}


def build_vocab(n_vocab: int) -> tuple[list[str], list[float], list[int]]:
    """Tokens, scores and types of an SPM vocabulary whose normal pieces are printable ASCII.

    Every multi-character piece is the concatenation of two shorter pieces in the vocabulary,
    so llama.cpp's SPM merge tokenizer can reach it; longer pieces score higher.
    """
    import gguf

    tokens = ["<unk>", "<s>", "</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [gguf.TokenType.BYTE] * 256
    pieces = [SPACE] + [chr(c) for c in range(0x21, 0x7F)]
    syllables = [c + v for c in CONSONANTS for v in VOWELS]
    pieces += syllables + [SPACE + s for s in syllables]
    # Two-syllable words, then three, until the vocabulary is full.
    words = [SPACE + a + b for a in syllables for b in syllables]
    pieces += words
    pieces += [w + s for w in words for s in syllables]
    n_normal = n_vocab - len(tokens)
    if n_normal > len(pieces):
        raise ValueError(f"n_vocab {n_vocab} is larger than the {len(tokens) + len(pieces)} pieces available")
    pieces = pieces[:n_normal]
    tokens += pieces
    types += [gguf.TokenType.NORMAL] * len(pieces)
    scores = [0.0] * (len(tokens) - len(pieces)) + [float(len(p)) - i * 1e-6 for i, p in enumerate(pieces)]
    return tokens, scores, [int(t) for t in types]


def _block_tensors(rng: np.random.Generator, cfg: TinyModelConfig, scale: float) -> dict[str, np.ndarray]:
    d, ff = cfg.n_embd, cfg.n_ff

    def normal(shape: tuple[int, int], fan_in: int) -> np.ndarray:
        return rng.standard_normal(shape, dtype=np.float32) / np.float32(np.sqrt(fan_in))

    return {
        "attn_norm.weight": np.ones(d, dtype=np.float32),
        "attn_q.weight": normal((d, d), d),
        "attn_k.weight": normal((d, d), d),
        "attn_v.weight": normal((d, d), d),
        "attn_output.weight": normal((d, d), d) * np.float32(scale),
        "ffn_norm.weight": np.ones(d, dtype=np.float32),
        "ffn_gate.weight": normal((ff, d), d),
        "ffn_up.weight": normal((ff, d), d),
        "ffn_down.weight": normal((d, ff), ff) * np.float32(scale),
    }


def _write_gguf(
    path: Path,
    name: str,
    cfg: TinyModelConfig,
    n_layer: int,
    tensors: dict[str, np.ndarray],
    vocab: tuple[list[str], list[float], list[int]],
) -> None:
    import gguf

    def write(tmp: Path) -> None:
        writer = gguf.GGUFWriter(str(tmp), "llama")
        writer.add_name(name)
        writer.add_context_length(cfg.n_ctx)
        writer.add_embedding_length(cfg.n_embd)
        writer.add_block_count(n_layer)
        writer.add_feed_forward_length(cfg.n_ff)
        writer.add_head_count(cfg.n_head)
        writer.add_head_count_kv(cfg.n_head)
        writer.add_rope_dimension_count(cfg.n_embd // cfg.n_head)
        writer.add_rope_freq_base(10000.0)
        writer.add_layer_norm_rms_eps(1e-5)
        writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if cfg.f16 else gguf.LlamaFileType.ALL_F32)
        tokens, scores, types = vocab
        writer.add_tokenizer_model("llama")
        writer.add_token_list(tokens)
        writer.add_token_scores(scores)
        writer.add_token_types(types)
        writer.add_unk_token_id(0)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
        writer.add_add_bos_token(True)
        writer.add_add_eos_token(False)
        writer.add_chat_template(CHAT_TEMPLATE)
        for tensor_name, array in tensors.items():
            # ggml keeps norms in f32; matrices follow the preset's precision.
            if cfg.f16 and array.ndim == 2:
                array = array.astype(np.float16)
            writer.add_tensor(tensor_name, array)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()

    atomic_write(path, write)


@dataclass(frozen=True)
class TinyModelPair:
    target: Path
    draft: Path
    config: TinyModelConfig
    seed: int

    def recipe(self) -> dict:
        return {"seed": self.seed, **asdict(self.config)}


def model_paths(out_dir: Path) -> tuple[Path, Path]:
    return out_dir / "target.gguf", out_dir / "draft.gguf"


def generate(
    out_dir: str | Path, preset: str = "test", seed: int = 0, residual_scale: float | None = None
) -> TinyModelPair:
    """Write ``target.gguf`` and ``draft.gguf`` into ``out_dir``; same arguments, same bytes."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    cfg = PRESETS[preset]
    if residual_scale is not None:
        if residual_scale < 0:
            raise ValueError(f"residual_scale must be >= 0, got {residual_scale}")
        cfg = replace(cfg, residual_scale=residual_scale)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    vocab = build_vocab(cfg.n_vocab)
    embd = rng.standard_normal((cfg.n_vocab, cfg.n_embd), dtype=np.float32)
    head = rng.standard_normal((cfg.n_vocab, cfg.n_embd), dtype=np.float32) / np.float32(np.sqrt(cfg.n_embd))
    # Control and byte tokens get a zero logit row: a random model then never emits them,
    # so generated text stays printable ASCII and never stops early on EOS.
    n_special = 3 + 256
    head[:n_special] = 0.0
    shared = {
        "token_embd.weight": embd,
        "output_norm.weight": np.ones(cfg.n_embd, dtype=np.float32),
        "output.weight": head,
    }
    blocks = [_block_tensors(rng, cfg, 1.0 if i == 0 else cfg.residual_scale) for i in range(cfg.n_layer)]

    def layer_tensors(n: int) -> dict[str, np.ndarray]:
        tensors = dict(shared)
        for i in range(n):
            tensors.update({f"blk.{i}.{k}": v for k, v in blocks[i].items()})
        return tensors

    target, draft = model_paths(out)
    (out / MANIFEST).unlink(missing_ok=True)
    _write_gguf(target, f"tiny-{preset}-target", cfg, cfg.n_layer, layer_tensors(cfg.n_layer), vocab)
    _write_gguf(draft, f"tiny-{preset}-draft", cfg, 1, layer_tensors(1), vocab)
    pair = TinyModelPair(target=target, draft=draft, config=cfg, seed=seed)
    # Written last: its presence says both files are complete and which recipe made them.
    write_text(out / MANIFEST, json.dumps(pair.recipe(), indent=2, sort_keys=True))
    return pair


def ensure(out_dir: str | Path, preset: str, seed: int, residual_scale: float | None = None) -> TinyModelPair:
    """Return the pair in ``out_dir``, generating it first unless a complete one of the same recipe is there."""
    out = Path(out_dir)
    target, draft = model_paths(out)
    cfg = PRESETS[preset] if residual_scale is None else replace(PRESETS[preset], residual_scale=residual_scale)
    wanted = TinyModelPair(target=target, draft=draft, config=cfg, seed=seed)
    manifest = out / MANIFEST
    if manifest.exists() and target.exists() and draft.exists() and json.loads(manifest.read_text()) == wanted.recipe():
        return wanted
    return generate(out, preset=preset, seed=seed, residual_scale=residual_scale)

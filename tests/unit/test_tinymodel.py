"""The generated tiny model pair: deterministic, printable, and its agreement knob does what it says."""

import hashlib
import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np

from locust_llm import tinymodel


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tensor(path: Path, name: str) -> np.ndarray:
    return next(t for t in gguf.GGUFReader(path).tensors if t.name == name).data


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = tinymodel.generate(tmp_path / "a", "test", seed=1)
    b = tinymodel.generate(tmp_path / "b", "test", seed=1)
    c = tinymodel.generate(tmp_path / "c", "test", seed=2)
    assert digest(a.target) == digest(b.target) and digest(a.draft) == digest(b.draft)
    assert digest(a.target) != digest(c.target)


def test_draft_is_the_targets_first_block_with_the_same_vocabulary(tmp_path):
    pair = tinymodel.generate(tmp_path, "test", seed=0)
    target, draft = gguf.GGUFReader(pair.target), gguf.GGUFReader(pair.draft)
    draft_names = {t.name for t in draft.tensors}
    assert not any(name.startswith("blk.1.") for name in draft_names)
    for name in draft_names:
        assert np.array_equal(tensor(pair.draft, name), tensor(pair.target, name)), name
    tokens = target.fields["tokenizer.ggml.tokens"]
    assert tokens.types == draft.fields["tokenizer.ggml.tokens"].types
    pieces = [bytes(tokens.parts[i]).decode() for i in tokens.data]
    normal = pieces[3 + 256 :]
    assert all(p.replace("\u2581", " ").isprintable() and p.replace("\u2581", " ").isascii() for p in normal)


def test_residual_scale_is_the_agreement_knob(tmp_path):
    small = tinymodel.generate(tmp_path / "small", "test", seed=0, residual_scale=0.01)
    large = tinymodel.generate(tmp_path / "large", "test", seed=0, residual_scale=0.5)
    name = "blk.1.ffn_down.weight"
    ratio = np.abs(tensor(large.target, name)).mean() / np.abs(tensor(small.target, name)).mean()
    assert np.isclose(ratio, 50, rtol=1e-3)
    assert digest(small.draft) == digest(large.draft)  # the first block is full strength either way


def test_ensure_regenerates_only_a_different_recipe(tmp_path):
    first = tinymodel.ensure(tmp_path, "test", seed=0)
    stamp = first.target.stat().st_mtime_ns
    assert tinymodel.ensure(tmp_path, "test", seed=0).target.stat().st_mtime_ns == stamp
    other = tinymodel.ensure(tmp_path, "test", seed=3)
    assert digest(other.target) == digest(tinymodel.generate(tmp_path / "x", "test", seed=3).target)


def test_cli_writes_the_pair(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "locust_llm.cli",
            "tiny-model",
            "--out",
            str(tmp_path),
            "--preset",
            "test",
            "--seed",
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "target.gguf").exists() and (tmp_path / "draft.gguf").exists()

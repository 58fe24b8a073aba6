"""The documents of image requests: what images add to TTFT per level."""

from __future__ import annotations

from .base import Doc, Interval

__all__ = ["ImageLevel", "ImageOverhead"]


class ImageLevel(Doc):
    """One variant, image bucket and level: its steps pooled."""

    variant: str
    """The variant."""
    bucket: str
    """The prompt bucket whose scenario entry has ``images``."""
    level: float
    """Load level, as ``mode`` says."""
    mode: str
    """closed (level = users) or open (level = requests/s)."""
    steps: list[int]
    """The steps pooled."""
    clean: bool
    """Every pooled step was clean; otherwise the figures stand, to be read with the steps' status."""
    with_images: int
    """Requests with images whose TTFT was measured."""
    without_images: int
    """Text-only twins whose TTFT was measured."""
    images_per_request: float | None = None
    """Images per request that carried them."""
    image_bytes: float | None = None
    """Mean bytes of images per request that carried them (files, before base64)."""
    prompt_tokens_with: float | None = None
    """Median prompt tokens of the requests with images, as the server counted them (vLLM counts image tokens)."""
    prompt_tokens_without: float | None = None
    """Median prompt tokens of the text-only twins."""
    ttft_p50_with_ms: float | None = None
    """Median TTFT from the actual send of the steady, successful requests with images, ms."""
    ttft_p50_without_ms: float | None = None
    """Median TTFT from the actual send of their text-only twins, ms."""
    overhead_ms: float | None = None
    """TTFT P50 with images minus without: what encoding the images costs before the first token."""
    overhead_ci95: Interval = None
    """Percentile-bootstrap 95% interval of the difference (null with fewer than 2 requests on a side)."""
    text: str
    """The figure in words."""


class ImageOverhead(Doc):
    method: str
    """How the figures are computed."""
    levels: list[ImageLevel] = []
    """Per variant (run order), bucket and level."""

"""The reference server's reading of chat messages in OpenAI's content format: text parts and image parts.

A message's ``content`` is a string, or a list of parts, each ``{"type": "text", "text": str}`` or
``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}``. Image URLs must be base64 data URLs
(the server fetches nothing) whose bytes start with a PNG or JPEG header of the declared type; anything else is a
``BadContent`` error, which the server answers with a 400 and an OpenAI-style error body.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from ..scenario.images import image_header

__all__ = ["BadContent", "chat_content", "image_delay_s", "request_text"]


class BadContent(ValueError):
    """A chat message the OpenAI content format does not allow; the message names the part."""


PART_SHAPES = "{'type': 'text', 'text': str} or {'type': 'image_url', 'image_url': {'url': 'data:image/...'}}"


def request_text(api: str, body: dict) -> tuple[str, list[dict]]:
    """The prompt text of a completion request, or the text and images of a chat request."""
    if api != "chat":
        return str(body.get("prompt", "")), []
    return chat_content(body.get("messages") or [])


def chat_content(messages: Any) -> tuple[str, list[dict]]:
    """The text of a chat request's messages (joined by spaces) and, per image part, what it held:
    ``{"mime", "bytes" (decoded), "width", "height"}``."""
    if not isinstance(messages, list):
        raise BadContent(f"'messages' must be a list of messages, got {type(messages).__name__}")
    texts, images = [], []
    for i, message in enumerate(messages):
        content = message.get("content", "") if isinstance(message, dict) else None
        if isinstance(content, str):
            texts.append(content)
            continue
        if not isinstance(content, list):
            raise BadContent(f"messages[{i}]: expected an object whose 'content' is a string or a list of parts")
        for j, part in enumerate(content):
            where = f"messages[{i}].content[{j}]"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif kind == "image_url":
                images.append(_image(part.get("image_url"), where))
            else:
                raise BadContent(f"{where}: expected {PART_SHAPES}")
    return " ".join(texts), images


def _image(obj: Any, where: str) -> dict:
    url = obj.get("url") if isinstance(obj, dict) else None
    if not isinstance(url, str) or not url.startswith("data:"):
        raise BadContent(f"{where}.image_url.url: expected a data: URL (the reference server fetches nothing)")
    head, comma, payload = url.partition(",")
    if not comma or not head.endswith(";base64"):
        raise BadContent(f"{where}.image_url.url: expected data:<type>;base64,<data>")
    try:
        data = base64.b64decode(payload, validate=True)
    except binascii.Error:
        raise BadContent(f"{where}.image_url.url: the data is not valid base64") from None
    try:
        mime, width, height = image_header(data, f"{where}.image_url.url")
    except ValueError as exc:
        raise BadContent(str(exc)) from None
    if head[len("data:") : -len(";base64")] != mime:
        raise BadContent(f"{where}.image_url.url: declared {head[5:-7]!r}, but the data is {mime}")
    return {"mime": mime, "bytes": len(data), "width": width, "height": height}


def image_delay_s(images: list[dict], ms_per_kpx: float) -> float:
    """The known encode cost the server adds before the first token: ``ms_per_kpx`` per thousand pixels."""
    return ms_per_kpx * sum(image["width"] * image["height"] for image in images) / 1e6

"""Secrets never reach a run file: passwords in URLs, values of secret-looking options, arguments and
environment variables are replaced by ``***`` everywhere a file is written (the report is shared), and in every
log record (``mask_log_records``). Pure, but for that one switch."""

from __future__ import annotations

import logging
import re
from typing import Any

__all__ = ["MASK", "mask_log_records", "redact", "redact_args", "redact_text", "remember", "secret_name"]

MASK = "***"
# Secret values this process knows (the API key, values given to secret flags or variables): masked wherever
# they appear, whatever the format around them (a server's own log prints its arguments its own way).
_KNOWN: set[str] = set()
_KEY_VALUE = re.compile(
    r"""(?i)(['"]?(?:api[_-]?key|[a-z_]*token|secret|password|passwd)['"]?\s*[:=]\s*['"]?)"""
    r"""([^'",\s}]+)"""
)
_SECRET_NAME = re.compile(
    r"(^|[-_.])(api[-_]?key|key|token|secret|password|passwd|pwd|auth|authorization|"
    r"credentials?)$",
    re.IGNORECASE,
)
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]+")
# A flag starts a word: "--api-key x" is one, "256-token prompts" is not.
_FLAG_VALUE = re.compile(r"(?<![\w.-])(?P<flag>--?[A-Za-z0-9_.-]+)(?P<sep>[= ])(?P<value>\S+)")


def secret_name(name: str) -> bool:
    """``HF_TOKEN``, ``--api-key``, ``password``: yes; ``max_tokens``, ``tokenizer``: no."""
    return bool(_SECRET_NAME.search(str(name).lstrip("-")))


def remember(*values: str | None) -> None:
    """Values to mask everywhere from now on (too short a value would mask ordinary text, so it is not kept)."""
    _KNOWN.update(v for v in values if v and len(v) >= 4)


def redact_text(text: str) -> str:
    """Known secrets, userinfo of URLs, bearer tokens, ``--secret-flag value`` and ``api_key: value`` in text."""
    for secret in _KNOWN:
        text = text.replace(secret, MASK)
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    text = _KEY_VALUE.sub(lambda m: f"{m[1]}{MASK}" if not m[2].isdigit() else m[0], text)
    text = _BEARER.sub(lambda m: f"{m[1]}{MASK}", text)
    return _FLAG_VALUE.sub(lambda m: f"{m['flag']}{m['sep']}{MASK}" if secret_name(m["flag"]) else m[0], text)


def redact_args(argv: list[str]) -> list[str]:
    """A command line with the value after (or in) every secret-looking flag masked."""
    out, mask_next = [], False
    for arg in map(str, argv):
        if mask_next:
            out.append(MASK)
            mask_next = False
            continue
        flag, eq, _ = arg.partition("=")
        if arg.startswith("-") and secret_name(flag):
            if eq:
                out.append(f"{flag}={MASK}")
            else:
                out.append(arg)
                mask_next = True
            continue
        out.append(redact_text(arg))
    return out


def redact(value: Any, key: str = "") -> Any:
    """A JSON-like document with every secret masked: values under secret-looking keys, command lines (lists
    under ``command``/``argv``/``args``), and URLs with passwords in any string."""
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if key in ("command", "argv", "args") and all(isinstance(v, str) for v in value):
            return redact_args(list(value))
        return [redact(v) for v in value]
    if isinstance(value, str):
        return MASK if secret_name(key) and value else redact_text(value)
    return value


def mask_log_records() -> None:
    """Mask secrets in every log record as it is made: the console, ``--logfile`` and the web UI's ``/logs`` show
    what the records say, and messages quote URLs (``--host``'s password) and errors. Installing it twice is fine."""
    make = logging.getLogRecordFactory()
    if getattr(make, "masks_secrets", False):
        return

    def masked(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001  (a bad format string: logging reports it when the record is handled)
            return record
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, ()
        if record.exc_info:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
        return record

    masked.masks_secrets = True  # type: ignore[attr-defined]  # a marker on the factory, for a second install
    logging.setLogRecordFactory(masked)

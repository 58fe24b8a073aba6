"""Secrets never reach a run file: passwords in URLs, values of secret-looking options, arguments and
environment variables are masked where they are written as secrets (``redact``: by structure, the keys and
shape of a document never change), in text (``redact_text``: URL passwords, ``--secret-flag value``,
``api_key: value``, bearer tokens), and in every log record (``mask_log_records``). Pure, but for that one switch.

Masking never edits data: a username is not a secret (``http://alice:***@host``), and a secret value is searched
for as a literal elsewhere (a server's own log prints its arguments its own way) only when it cannot be a word of
the run's own files: at least ``MIN_KNOWN`` characters and not made of lowercase letters and underscores alone (the
shape of every key and enum value the run writes). Every pattern is linear in the text's length (bounded
repetitions, anchored at the start of a word), and a log message over ``MAX_LOG_MESSAGE`` characters is cut
before it is masked, so no line, however long, costs the event loop more than a bounded time."""

from __future__ import annotations

import logging
import re
from typing import Any

__all__ = [
    "MASK",
    "MAX_LOG_MESSAGE",
    "MIN_KNOWN",
    "mask_log_records",
    "redact",
    "redact_args",
    "redact_text",
    "remember",
    "secret_name",
]

MASK = "***"
MIN_KNOWN = 8
MAX_LOG_MESSAGE = 4000
# Secret values this process knows (the API key, values given to secret flags or variables): masked wherever
# they appear, whatever the format around them. Only those no run file could contain as a word (``remember``).
_KNOWN: set[str] = set()
_SCHEMA_WORD = re.compile(r"[a-z_]+")
_KEY_VALUE = re.compile(
    r"""(?i)(?<![A-Za-z0-9_])(['"]?(?:api[_-]?key|[a-z_]{0,40}token|secret|password|passwd)['"]?\s{0,8}[:=]"""
    r"""\s{0,8}['"]?)([^'",\s}]{1,4096})"""
)
_SECRET_NAME = re.compile(
    r"(^|[-_.])(api[-_]?key|key|token|secret|password|passwd|pwd|auth|authorization|"
    r"credentials?)$",
    re.IGNORECASE,
)
# A scheme starts a word; a userinfo with a colon is user:password (only the password is masked), one without is
# a token on its own (``https://TOKEN@host``) and masked whole.
_USERINFO = re.compile(
    r"(?<![a-zA-Z0-9+.-])(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]{0,31}://)(?P<user>[^/@:\s]{0,256})(?P<password>:[^/@\s]{0,1024})?@"
)
_BEARER = re.compile(r"(?i)\b(bearer\s{1,8})[A-Za-z0-9._~+/=-]{1,4096}")
# A flag starts a word: "--api-key x" is one, "256-token prompts" is not.
_FLAG_VALUE = re.compile(r"(?<![\w.-])(?P<flag>--?[A-Za-z0-9_.-]{1,64})(?P<sep>[= ])(?P<value>\S{1,4096})")


def secret_name(name: str) -> bool:
    """``HF_TOKEN``, ``--api-key``, ``password``: yes; ``max_tokens``, ``tokenizer``: no."""
    return bool(_SECRET_NAME.search(str(name).lstrip("-")))


def remember(*values: str | None) -> None:
    """Values to mask everywhere from now on; a short one, or one shaped like a word of the run's files, would mask
    ordinary text (a key of ``steps.json``), so it is masked only where it is written as a secret."""
    _KNOWN.update(v for v in values if v and len(v) >= MIN_KNOWN and not _SCHEMA_WORD.fullmatch(v))


def _userinfo(match: re.Match[str]) -> str:
    if match["password"] is None:
        return f"{match['scheme']}{MASK}@" if match["user"] else match[0]
    return f"{match['scheme']}{match['user']}:{MASK}@"


def redact_text(text: str) -> str:
    """Known secrets, URL passwords, bearer tokens, ``--secret-flag value`` and ``api_key: value`` in text."""
    for secret in _KNOWN:
        text = text.replace(secret, MASK)
    text = _USERINFO.sub(_userinfo, text)
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
    """A JSON-like document with every secret masked in its values: values under secret-looking keys, command
    lines (lists under ``command``/``argv``/``args``), and secrets in any string. Keys are never changed."""
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if key in ("command", "argv", "args") and all(isinstance(v, str) for v in value):
            return redact_args(list(value))
        return [redact(v) for v in value]
    if isinstance(value, str):
        return MASK if secret_name(key) and value else redact_text(value)
    return value


def cut(message: str, limit: int = MAX_LOG_MESSAGE) -> str:
    """``message`` cut to ``limit`` characters, saying how many were left out."""
    if len(message) <= limit:
        return message
    return f"{message[:limit]}... ({len(message) - limit} more characters cut)"


def mask_log_records() -> None:
    """Mask secrets in every log record as it is made: the console, ``--logfile`` and the web UI's ``/logs`` show
    what the records say, and messages quote URLs (``--host``'s password) and errors. A message over
    ``MAX_LOG_MESSAGE`` characters is cut first (a path a page sent, a form value). Installing it twice is fine."""
    make = logging.getLogRecordFactory()
    if getattr(make, "masks_secrets", False):
        return

    def masked(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001  (a bad format string: logging reports it when the record is handled)
            return record
        clean = redact_text(cut(message))
        if clean != message:
            record.msg, record.args = clean, ()
        if record.exc_info:
            record.exc_text = redact_text(cut(logging.Formatter().formatException(record.exc_info), 64_000))
        return record

    masked.masks_secrets = True  # type: ignore[attr-defined]  # a marker on the factory, for a second install
    logging.setLogRecordFactory(masked)

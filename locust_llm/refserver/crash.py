"""A crash on demand for the reference server (``--exit-on TEXT``): the process exits at once, without answering,
when a request's body holds ``TEXT``, as a server that dies on one bad input would. The probe suite's tests use
it to check that a crash is caught (verdict ``server-failed``, exit code 6)."""

from __future__ import annotations

import io
import os

__all__ = ["EXIT_CODE", "exit_on"]

EXIT_CODE = 70  # EX_SOFTWARE: an internal error, as a crashed server would report it


def exit_on(app, marker: bytes):
    """``app`` with a check in front: a body holding ``marker`` ends the process; others pass through untouched."""

    def wrapped(environ, start_response):
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        body = environ["wsgi.input"].read(length) if length else b""
        if marker in body:
            os._exit(EXIT_CODE)  # no answer, no clean-up: a crash
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        return app(environ, start_response)

    return wrapped

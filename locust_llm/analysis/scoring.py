"""How an answer is scored against a quality task's reference, per ``match`` type. Pure.

* ``exact``: the answer equals the reference, leading and trailing whitespace ignored;
* ``regex``: Python's ``re.search`` finds the reference pattern in the answer;
* ``number``: the first number in the answer (``-12``, ``3.5``, ``1,234``, ``6e23``) equals the reference;
* ``json_keys``: the answer holds a JSON object (the first one that parses, code fences and prose around it
  allowed) with every key the reference lists.
"""

from __future__ import annotations

import json
import math
import re

__all__ = ["expectation", "first_json_object", "first_number", "passes"]

# Thousands separators only in groups of three ("1,234"); "1,2" is two numbers.
NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+")
MAX_JSON_STARTS = 200  # "{" positions tried: an answer is at most a few thousand tokens


def first_number(text: str) -> float | None:
    found = NUMBER.search(text)
    return float(found.group().replace(",", "")) if found else None


def first_json_object(text: str) -> dict | None:
    decoder = json.JSONDecoder()
    start = text.find("{")
    for _ in range(MAX_JSON_STARTS):
        if start < 0:
            return None
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def passes(match: str, reference, text: str) -> bool:
    """Whether ``text`` answers a task of type ``match`` whose reference is ``reference``."""
    if match == "exact":
        return text.strip() == str(reference).strip()
    if match == "regex":
        return re.search(reference, text) is not None
    if match == "number":
        got = first_number(text)
        return got is not None and math.isclose(got, float(reference), rel_tol=1e-9, abs_tol=1e-9)
    if match == "json_keys":
        found = first_json_object(text)
        return found is not None and all(key in found for key in reference)
    raise ValueError(f"unknown match type {match!r}")


def expectation(match: str, reference) -> str:
    """What would have passed, in words."""
    if match == "regex":
        return f"matches the regular expression {reference}"
    if match == "number":
        return f"first number = {reference:g}" if isinstance(reference, float) else f"first number = {reference}"
    if match == "json_keys":
        return "a JSON object with the keys " + ", ".join(map(str, reference))
    return str(reference)

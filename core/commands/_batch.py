"""The JSON-lines batch mode shared by the inspection commands (``url``, ``robots check``, ``links``):
one JSON object per input line on stdin, one JSON object per output line on stdout, so a whole
conformance suite runs in one process. A line that is not a JSON object, or lacks a field, gets
``{"line": N, "error": "..."}`` and the command exits 2 after the rest."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Callable
from typing import Any, TextIO


class BadRequest(ValueError):
    """One batch line is unusable; the message says why."""


def add_options(parser, json_help: str, batch_help: str) -> None:
    """The ``--json`` (one JSON object per answer) and ``--batch`` (JSON lines on stdin) options."""
    parser.add_argument("--json", action="store_true", help=json_help)
    parser.add_argument("--batch", action="store_true", help="JSON lines on stdin: " + batch_help)


def field(obj: dict[str, Any], name: str, default: Any = ...) -> Any:
    """``obj[name]``, or ``default``; BadRequest when it is missing and has no default."""
    if name in obj:
        return obj[name]
    if default is ...:
        raise BadRequest(f"missing field {name!r}")
    return default


def text_or_b64(obj: dict[str, Any], name: str) -> bytes:
    """A byte field given as text (``name``, UTF-8) or as base64 (``name_b64``)."""
    if f"{name}_b64" in obj:
        try:
            return base64.b64decode(obj[f"{name}_b64"], validate=True)
        except (ValueError, TypeError) as exc:
            raise BadRequest(f"{name}_b64 is not base64: {exc}") from None
    value = field(obj, name)
    if not isinstance(value, str):
        raise BadRequest(f"{name} must be a string")
    return value.encode("utf-8")


def run(answer: Callable[[dict[str, Any]], dict[str, Any]], lines: TextIO = sys.stdin,
        out: TextIO = sys.stdout) -> int:
    """Answer every line; exit code 2 if any line was bad, else 0."""
    bad = 0
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise BadRequest("not a JSON object")
            reply = answer(obj)
        except (BadRequest, json.JSONDecodeError) as exc:
            bad += 1
            reply = {"line": n, "error": str(exc)}
        out.write(json.dumps(reply, ensure_ascii=False) + "\n")
    out.flush()
    return 2 if bad else 0

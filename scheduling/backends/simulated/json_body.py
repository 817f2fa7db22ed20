"""The JSON object a request carries, for the simulated cluster's stand-alone HTTP servers (standard library
only): a clear 4xx for a bad length, an oversized body, text that is not JSON or JSON that is not an object."""

from __future__ import annotations

import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any


def read_json_object(handler: BaseHTTPRequestHandler, max_body: int, error: Callable[[int, str], Exception], *,
                     empty: bytes = b"") -> dict[str, Any]:
    """`error(status, message)` makes the exception raised; `empty` is what a request with no body means."""
    try:
        length = int(handler.headers.get("Content-Length", "0"))
    except ValueError:
        raise error(400, "Content-Length is not a number") from None
    if length > max_body:
        raise error(413, f"the body is over {max_body} bytes")
    raw = handler.rfile.read(length) if length > 0 else empty
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise error(400, "the body is not JSON") from None
    if not isinstance(body, dict):
        raise error(400, "the body must be a JSON object")
    return body

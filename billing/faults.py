"""A fault that would repeat on every request is logged once per process and cause, not per request."""

from __future__ import annotations

import logging

LOGGED: set[tuple] = set()  # causes already logged in this process


def exception_once(logger: logging.Logger, cause: tuple, message: str, *args) -> None:
    """`logger.exception(message, *args)` the first time `cause` is seen; nothing after."""
    if cause not in LOGGED:
        LOGGED.add(cause)
        logger.exception(message, *args)

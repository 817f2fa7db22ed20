"""The platform's one clock: every part of the code that reads the time asks `now()`.

Tests set it (`set_now`) so that a quote, a submit and a scheduling cycle all see the same
instant, whatever the hour on the machine that runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from django.utils import timezone

_source: Callable[[], datetime] | None = None


def now() -> datetime:
    return _source() if _source is not None else timezone.now()


def set_source(source: Callable[[], datetime] | None) -> None:
    """Read the time from `source` (a callable returning an aware datetime); None: the system clock."""
    global _source
    _source = source


@contextmanager
def reading(source: Callable[[], datetime]) -> Iterator[None]:
    """Read the time from `source` inside the block, then from whatever was read before it (a test's
    clock, or the system's), even when the block fails."""
    global _source
    previous, _source = _source, source
    try:
        yield
    finally:
        _source = previous

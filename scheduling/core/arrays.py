"""Array jobs: one role run once per index, at most `parallelism` at a time (pure).

An array's indices are written as ranges and single numbers ("0-99", "0-9,20,30-39"); its children are
made in index order, lazily, so that no more than `parallelism` are unfinished at once: a 1,000-index
array holds `parallelism` jobs in the scheduler, never 1,000.
"""

from __future__ import annotations

import re

MAX_INDEX = 999_999
MAX_INDICES = 10_000

_PART = re.compile(r"^\s*(\d{1,6})\s*(?:-\s*(\d{1,6})\s*)?$")


class IndicesError(ValueError):
    """What is wrong with an indices text: `code` is one of syntax, backwards, repeated, too_many, empty."""

    def __init__(self, code: str, part: str = "") -> None:
        super().__init__(code)
        self.code, self.part = code, part


def parse_indices(text: str) -> tuple[int, ...]:
    """ "0-9,20,30-39" -> (0, 1, ..., 9, 20, 30, ..., 39), ascending; IndicesError when it is not that."""
    out: list[int] = []
    seen: set[int] = set()
    for part in text.split(","):
        found = _PART.match(part)
        if found is None:
            raise IndicesError("syntax" if part.strip() else "empty", part.strip())
        low = int(found.group(1))
        high = int(found.group(2)) if found.group(2) is not None else low
        if high < low:
            raise IndicesError("backwards", part.strip())
        if len(out) + high - low + 1 > MAX_INDICES:
            raise IndicesError("too_many", part.strip())
        for index in range(low, high + 1):
            if index in seen:
                raise IndicesError("repeated", str(index))
            seen.add(index)
            out.append(index)
    return tuple(sorted(out))


def normalise_indices(indices: tuple[int, ...]) -> str:
    """The shortest text of ascending indices: (0, 1, 2, 5) -> "0-2,5"."""
    parts: list[str] = []
    start = prev = None
    for index in indices:
        if prev is not None and index == prev + 1:
            prev = index
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = index
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(parts)


def next_indices(indices: tuple[int, ...], made: int, parallelism: int, unfinished: int) -> tuple[int, ...]:
    """The indices whose children to make now: the next ones in order, as many as keep the array's
    unfinished children within `parallelism`."""
    room = parallelism - unfinished
    if room <= 0 or made >= len(indices):
        return ()
    return indices[made : made + room]

"""The releases listed in releases.txt at the repository root."""

from __future__ import annotations

from pathlib import Path

RELEASES = Path(__file__).resolve().parents[2] / "releases.txt"


def releases(path: Path = RELEASES) -> list[tuple[str, str]]:
    """(commit, version) per release, oldest first."""
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) != 2:
            raise ValueError(f"{path.name}:{number}: expected '<commit> <version>', got {line!r}")
        out.append((words[0], words[1]))
    return out


def last_release(path: Path = RELEASES) -> tuple[str, str]:
    listed = releases(path)
    if not listed:
        raise ValueError(f"{path.name} lists no release")
    return listed[-1]

"""How a simulated replica's process finds its volumes: SIM_MOUNTS in its environment maps each mount path
in the replica (/data) to a folder on this machine (scheduling.storage.host_mapping writes it). Standard
library only: the servers run it without Django."""

from __future__ import annotations

import json
import os
import posixpath
from pathlib import Path

ENV = "SIM_MOUNTS"


def from_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    try:
        mapping = json.loads((environ if environ is not None else os.environ).get(ENV) or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in mapping.items()} if isinstance(mapping, dict) else {}


def local_path(path: str, mounts: dict[str, str]) -> Path | None:
    """The file on this machine that `path` in the replica is (the longest mount path that holds it), None
    when no mount holds it or it would leave the mount."""
    path = posixpath.normpath("/" + path.lstrip("/"))
    for mount in sorted(mounts, key=len, reverse=True):
        if path == mount or path.startswith(mount.rstrip("/") + "/"):
            root = Path(mounts[mount]).resolve()
            target = (root / path[len(mount):].lstrip("/")).resolve()
            return target if target == root or root in target.parents else None
    return None

"""A role's `volumes`: the workspace's volumes and dataset versions it mounts (pure; no Django models).

    volumes:
      - {name: imagenet, mountPath: /data, readOnly: true}      # a volume of the job's workspace
      - {dataset: imagenet@v3, mountPath: /ref}                  # a dataset version, always read-only

What the document alone can say is checked here (paths, duplicates, names); whether the volume or the
dataset version exists, and may be mounted by the workspace, is checked against the database by
`scheduling.storage.check_mounts`, which names the entry's line and column kept in `VolumeMount.where`.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from django.utils.translation import gettext as _

from scheduling.spec.load import Path
from scheduling.spec.model import VolumeMount
from scheduling.spec.read import DNS_HINT, DNS_LABEL, Reader, show

MOUNT_KEYS = ("name", "dataset", "mountPath", "readOnly")
MAX_MOUNTS = 16
# A dataset reference: [owner-workspace/]name@vN
DATASET_REF = re.compile(r"^(?:(?P<owner>[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)/)?"
                         r"(?P<name>[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)@v(?P<version>[1-9][0-9]{0,8})$")
MOUNT_PATH_RE = re.compile(r"^/[A-Za-z0-9._\-/]{0,1023}$")
# The container's own file systems: a volume mounted there would hide or replace them.
RESERVED_PATHS = ("/proc", "/sys", "/dev")


def parse_dataset_ref(ref: str) -> tuple[str | None, str, int] | None:
    """'team/imagenet@v3' -> ('team', 'imagenet', 3); None when it is not a dataset reference."""
    match = DATASET_REF.fullmatch(ref)
    if match is None:
        return None
    return match["owner"], match["name"], int(match["version"])


def mount_path_problem(path: str) -> str | None:
    if not path.startswith("/"):
        return _("must be an absolute path such as /data, not %(value)s") % {"value": show(path)}
    if not MOUNT_PATH_RE.fullmatch(path) or ".." in path.split("/"):
        return _("%(value)s is not a valid path: letters, digits, '.', '_', '-' and '/', no '..'") % {
            "value": show(path)}
    normal = posixpath.normpath(path)
    if normal == "/":
        return _("cannot be / (the container's root)")
    for reserved in RESERVED_PATHS:
        if normal == reserved or normal.startswith(reserved + "/"):
            return _("cannot be under %(reserved)s (the container's own file system)") % {"reserved": reserved}
    return None


def read_volumes(r: Reader, mapping: dict[str, Any], path: Path) -> tuple[VolumeMount, ...] | None:
    """`mapping`'s `volumes` list (a role, or a notebook's or service's document); None when invalid."""
    value = mapping.get("volumes")
    if value is None:
        return ()
    list_path = (*path, "volumes")
    if not isinstance(value, list):
        r.error(list_path, _("%(name)s must be a list of mounts, e.g. [{name: data, mountPath: /data}], "
                             "not %(value)s") % {"name": r.namer(list_path), "value": show(value)})
        return None
    if len(value) > MAX_MOUNTS:
        r.error(list_path, _("%(name)s has %(count)s entries; at most %(most)s") % {
            "name": r.namer(list_path), "count": len(value), "most": MAX_MOUNTS})
        return None
    before = len(r.issues)
    mounts: list[VolumeMount] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(value):
        mount = _read_mount(r, raw, (*list_path, i))
        if mount is None:
            continue
        normal = posixpath.normpath(mount.mount_path)
        if normal in seen:
            r.error((*list_path, i, "mountPath"), _("%(path)s is mounted twice (also %(other)s)") % {
                "path": normal, "other": r.namer((*list_path, seen[normal]))})
            continue
        seen[normal] = i
        mounts.append(mount)
    return tuple(mounts) if len(r.issues) == before else None


def _read_mount(r: Reader, raw: Any, path: Path) -> VolumeMount | None:
    entry = r.mapping(raw, path, _("name (or dataset), mountPath and readOnly"))
    if entry is None:
        return None
    before = len(r.issues)
    r.check_keys(entry, path, MOUNT_KEYS, where=r.namer(path))
    given = [k for k in ("name", "dataset") if entry.get(k) is not None]
    if len(given) != 1:
        r.error((*path, given[1]) if len(given) == 2 else path,
                _("%(name)s needs exactly one of name (a volume) and dataset (name@vN)") % {"name": r.namer(path)})
        return None
    volume = r.text(entry, path, "name", pattern=DNS_LABEL, hint=DNS_HINT)
    dataset = r.text(entry, path, "dataset")
    if isinstance(dataset, str) and parse_dataset_ref(dataset) is None:
        r.error((*path, "dataset"), _("%(name)s %(value)s is not a dataset version such as imagenet@v3 "
                                      "(or owner-workspace/imagenet@v3)") % {
            "name": r.namer((*path, "dataset")), "value": show(dataset)})
    mount_path = r.text(entry, path, "mountPath", required=True)
    if isinstance(mount_path, str):
        problem = mount_path_problem(mount_path)
        if problem:
            r.error((*path, "mountPath"), f"{r.namer((*path, 'mountPath'))} {problem}")
    read_only = r.boolean(entry, path, "readOnly", default=dataset is not None)
    if dataset is not None and read_only is False:
        r.error((*path, "readOnly"), _("%(name)s: a dataset is always mounted read-only") % {
            "name": r.namer((*path, "readOnly"))})
    if len(r.issues) != before:
        return None
    pos = r.pos((*path, "name") if volume else (*path, "dataset"))
    line, column = pos if pos else (None, None)
    field = r.namer((*path, "name" if volume else "dataset"))
    return VolumeMount(mount_path=posixpath.normpath(mount_path), volume=volume, dataset=dataset,
                       read_only=bool(read_only), where=(field, line, column))


def mounts_to_list(mounts: tuple[VolumeMount, ...]) -> list[dict[str, Any]]:
    """The clean form's `volumes` list of a role (read_volumes reads it back)."""
    out: list[dict[str, Any]] = []
    for mount in mounts:
        entry: dict[str, Any] = {"name": mount.volume} if mount.volume else {"dataset": mount.dataset}
        entry["mountPath"] = mount.mount_path
        entry["readOnly"] = mount.read_only
        out.append(entry)
    return out

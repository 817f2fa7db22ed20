"""A role's `buckets`: the workspace's registered S3-compatible buckets its replicas read and write (pure; no
Django models).

    buckets:
      - {name: raw-data}        # a bucket the workspace registered (gpuctl bucket add raw-data ...)
      - {name: raw-data, mountPath: /data/raw}   # where a pool with a bucket CSI driver mounts it

Each replica gets the bucket as the environment every S3 client reads: AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY (from the workspace's secrets the bucket names), AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_S3,
AWS_REGION, AWS_DEFAULT_REGION, S3_BUCKET and S3_PREFIX; on a Kubernetes pool with a bucket CSI driver
(NodePool.bucket_csi_driver) the bucket is also mounted, at `mountPath` (default /buckets/<name>, never a
volume's mountPath). One set of those variables holds one bucket, so a role names at most one; the list leaves
room for more (each with a variable prefix of its own) later. Whether the workspace has the bucket is checked
against the database by `scheduling.buckets.check_spec`.
"""

from __future__ import annotations

import posixpath
from typing import Any

from django.utils.translation import gettext as _

from scheduling.spec.load import Path
from scheduling.spec.model import BucketUse
from scheduling.spec.read import DNS_HINT, DNS_LABEL, Reader, show
from scheduling.spec.volumes import mount_path_problem

ENTRY_KEYS = ("name", "mountPath")
DEFAULT_MOUNT_ROOT = "/buckets"
MAX_BUCKETS = 1
SECRET_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
PLAIN_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION", "S3_BUCKET",
                   "S3_PREFIX")
VARIABLES = (*SECRET_VARIABLES, *PLAIN_VARIABLES)


def read_buckets(r: Reader, mapping: dict[str, Any], path: Path) -> tuple[BucketUse, ...] | None:
    """`mapping`'s `buckets` list (a role, or a notebook's or service's document); None when invalid."""
    value = mapping.get("buckets")
    if value is None:
        return ()
    list_path = (*path, "buckets")
    if not isinstance(value, list):
        r.error(list_path, _("%(name)s must be a list such as [{name: raw-data}], not %(value)s") % {
            "name": r.namer(list_path), "value": show(value)})
        return None
    if len(value) > MAX_BUCKETS:
        r.error(list_path, _("%(name)s has %(count)s entries; a role reads at most %(most)s bucket: its "
                             "replicas' AWS_* variables hold one set of credentials") % {
            "name": r.namer(list_path), "count": len(value), "most": MAX_BUCKETS})
        return None
    before = len(r.issues)
    uses = []
    for i, raw in enumerate(value):
        item_path = (*list_path, i)
        entry = r.mapping(raw, item_path, _("name: a bucket the workspace registered"))
        if entry is None:
            continue
        r.check_keys(entry, item_path, ENTRY_KEYS, where=r.namer(item_path))
        name = r.text(entry, item_path, "name", required=True, pattern=DNS_LABEL, hint=DNS_HINT)
        mount_path = r.text(entry, item_path, "mountPath")
        if isinstance(mount_path, str):
            problem = mount_path_problem(mount_path)
            if problem:
                r.error((*item_path, "mountPath"), f"{r.namer((*item_path, 'mountPath'))} {problem}")
                continue
            mount_path = posixpath.normpath(mount_path)
        if isinstance(name, str) and mount_path_of(name, mount_path or "") in _volume_paths(mapping):
            r.error((*item_path, "mountPath") if mount_path else item_path,
                    _("%(name)s: %(path)s is also a volume's mountPath; give the bucket its own mountPath") % {
                        "name": r.namer(item_path), "path": mount_path_of(name, mount_path or "")})
            continue
        if isinstance(name, str) and DNS_LABEL.fullmatch(name):
            pos = r.pos((*item_path, "name"))
            line, column = pos if pos else (None, None)
            uses.append(BucketUse(name, (r.namer((*item_path, "name")), line, column),
                                  mount_path if isinstance(mount_path, str) else ""))
    env = mapping.get("env")
    if uses and isinstance(env, dict):
        for variable in env:
            if variable in VARIABLES:
                r.error((*path, "env", variable), _("%(name)s is set from the bucket %(bucket)s; remove it from "
                                                    "env") % {"name": variable, "bucket": uses[0].name}, key=True)
    return tuple(uses) if len(r.issues) == before else None


def buckets_to_list(uses: tuple[BucketUse, ...]) -> list[dict[str, Any]]:
    """The clean form's `buckets` list of a role (read_buckets reads it back)."""
    return [{"name": use.name, **({"mountPath": use.mount_path} if use.mount_path else {})} for use in uses]


def mount_path_of(use_name: str, mount_path: str) -> str:
    """Where the bucket is mounted: the entry's mountPath, or /buckets/<name>."""
    return mount_path or f"{DEFAULT_MOUNT_ROOT}/{use_name}"


def _volume_paths(mapping: dict[str, Any]) -> set[str]:
    volumes = mapping.get("volumes")
    return {posixpath.normpath(v["mountPath"]) for v in volumes if isinstance(v, dict)
            and isinstance(v.get("mountPath"), str) and v["mountPath"].startswith("/")} if isinstance(volumes, list) \
        else set()

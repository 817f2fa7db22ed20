"""A role's `buckets`: the workspace's registered S3-compatible buckets its replicas read and write (pure; no
Django models).

    buckets:
      - {name: raw-data}        # a bucket the workspace registered (gpuctl bucket add raw-data ...)

Each replica gets the bucket as the environment every S3 client reads: AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY (from the workspace's secrets the bucket names), AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_S3,
AWS_REGION, AWS_DEFAULT_REGION, S3_BUCKET and S3_PREFIX. One set of those variables holds one bucket, so a role
names at most one; the list leaves room for more (each with a variable prefix of its own) later. Whether the
workspace has the bucket is checked against the database by `scheduling.buckets.check_spec`.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from scheduling.spec.load import Path
from scheduling.spec.model import BucketUse
from scheduling.spec.read import DNS_HINT, DNS_LABEL, Reader, show

ENTRY_KEYS = ("name",)
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
        if isinstance(name, str) and DNS_LABEL.fullmatch(name):
            pos = r.pos((*item_path, "name"))
            line, column = pos if pos else (None, None)
            uses.append(BucketUse(name, (r.namer((*item_path, "name")), line, column)))
    env = mapping.get("env")
    if uses and isinstance(env, dict):
        for variable in env:
            if variable in VARIABLES:
                r.error((*path, "env", variable), _("%(name)s is set from the bucket %(bucket)s; remove it from "
                                                    "env") % {"name": variable, "bucket": uses[0].name}, key=True)
    return tuple(uses) if len(r.issues) == before else None

"""A job's graceful stop and its checkpoints (pure; no Django models):

    terminationGracePeriod: 120s                      # SIGTERM, then this long before the kill (default 30s)
    checkpoint: {path: /ckpt, volume: runs, every: 30m}

`checkpoint.volume` (a volume of the job's workspace, mounted at `path`) makes the job resumable; whether the
workspace has it is checked against the database by `scheduling.storage.check_checkpoint`, at the line and
column kept in `CheckpointSpec.where`. The older `checkpointPath: TEXT` reads as `checkpoint.path` without a
volume (a location the job writes to itself) and no known interval.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from scheduling.spec.model import DEFAULT_CHECKPOINT_EVERY_S, DEFAULT_GRACE_S, CheckpointSpec
from scheduling.spec.read import DNS_HINT, DNS_LABEL, MISSING, Reader
from scheduling.spec.units import format_duration, parse_duration
from scheduling.spec.volumes import mount_path_problem

CHECKPOINT_KEYS = ("path", "volume", "every")
MAX_GRACE_S = 24 * 3600  # the spec's own bound; a queue's maximum is usually far lower
MIN_EVERY_S = 60


def read_grace(r: Reader, doc: dict[str, Any]) -> int | None:
    """`terminationGracePeriod` in seconds (default 30); None when wrong (an issue said)."""
    if doc.get("terminationGracePeriod") == 0:
        return 0  # no grace at all: killed at once
    seconds = r.quantity(doc, (), "terminationGracePeriod", parse_duration, DEFAULT_GRACE_S)
    if isinstance(seconds, int) and seconds > MAX_GRACE_S:
        r.error(
            ("terminationGracePeriod",),
            _("%(name)s (%(value)s) must be at most %(most)s")
            % {
                "name": r.namer(("terminationGracePeriod",)),
                "value": format_duration(seconds),
                "most": format_duration(MAX_GRACE_S),
            },
        )
        return None
    return seconds


def read_checkpoint(r: Reader, doc: dict[str, Any]) -> Any:
    """`checkpoint` or the older `checkpointPath`: a CheckpointSpec, None when neither is given, MISSING
    when wrong (an issue said)."""
    old, new = doc.get("checkpointPath"), doc.get("checkpoint")
    if old is not None and new is not None:
        r.error(
            ("checkpointPath",),
            _("checkpointPath is the older spelling of checkpoint.path; give one of them"),
            key=True,
        )
        return MISSING
    if old is not None:
        path = r.text(doc, (), "checkpointPath")
        return MISSING if path is None else CheckpointSpec(path=path, every_s=None)
    if new is None:
        return None
    found = r.mapping(
        new, ("checkpoint",), _("path, volume and every, e.g. {path: /ckpt, volume: runs, every: 30m}")
    )
    if found is None:
        return MISSING
    before = len(r.issues)
    r.check_keys(found, ("checkpoint",), CHECKPOINT_KEYS, where="checkpoint")
    path = r.text(found, ("checkpoint",), "path", required=True)
    volume = r.text(found, ("checkpoint",), "volume", pattern=DNS_LABEL, hint=DNS_HINT)
    every = r.quantity(found, ("checkpoint",), "every", parse_duration, DEFAULT_CHECKPOINT_EVERY_S)
    if isinstance(every, int) and every < MIN_EVERY_S:
        r.error(
            ("checkpoint", "every"),
            _("%(name)s (%(value)s) must be at least %(least)s")
            % {
                "name": r.namer(("checkpoint", "every")),
                "value": format_duration(every),
                "least": format_duration(MIN_EVERY_S),
            },
        )
    if volume is not None and isinstance(path, str):  # mounted there: a path in the container
        problem = mount_path_problem(path)
        if problem:
            r.error(("checkpoint", "path"), f"{r.namer(('checkpoint', 'path'))} {problem}")
    if len(r.issues) != before:
        return MISSING
    pos = r.pos(("checkpoint", "volume")) if volume else None
    line, column = pos if pos else (None, None)
    return CheckpointSpec(
        path=path, volume=volume, every_s=every, where=(r.namer(("checkpoint", "volume")), line, column)
    )


def checkpoint_to_dict(checkpoint: CheckpointSpec) -> tuple[str, Any]:
    """The clean-form field of a checkpoint: the older `checkpointPath` stays written as it was given."""
    if checkpoint.every_s is None and checkpoint.volume is None:
        return "checkpointPath", checkpoint.path
    out: dict[str, Any] = {"path": checkpoint.path}
    if checkpoint.volume is not None:
        out["volume"] = checkpoint.volume
    out["every"] = format_duration(checkpoint.every_s or DEFAULT_CHECKPOINT_EVERY_S)
    return "checkpoint", out

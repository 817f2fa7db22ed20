"""A job's TensorBoard (pure; no Django models):

    tensorboard: {logdir: /ckpt/tb}

The platform runs TensorBoard beside the job's first replica, reading `logdir` (a path in the replica:
usually under a mounted volume, so the events outlive the run). It is reached from the job's page on the
notebook origin (portal.notebook_origin), never the portal's own.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from scheduling.spec.model import TensorBoardSpec
from scheduling.spec.read import MISSING, Reader
from scheduling.spec.volumes import mount_path_problem

TENSORBOARD_KEYS = ("logdir",)


def read_tensorboard(r: Reader, doc: dict[str, Any]) -> Any:
    """`tensorboard`: a TensorBoardSpec, None when not given, MISSING when wrong (an issue said)."""
    given = doc.get("tensorboard")
    if given is None:
        return None
    found = r.mapping(given, ("tensorboard",), _("logdir, e.g. {logdir: /ckpt/tb}"))
    if found is None:
        return MISSING
    before = len(r.issues)
    r.check_keys(found, ("tensorboard",), TENSORBOARD_KEYS, where="tensorboard")
    logdir = r.text(found, ("tensorboard",), "logdir", required=True)
    if isinstance(logdir, str):
        problem = mount_path_problem(logdir)
        if problem:
            r.error(("tensorboard", "logdir"), f"{r.namer(('tensorboard', 'logdir'))} {problem}")
    if len(r.issues) != before or not isinstance(logdir, str):
        return MISSING
    return TensorBoardSpec(logdir=logdir)


def tensorboard_to_dict(spec: TensorBoardSpec) -> dict[str, Any]:
    return {"logdir": spec.logdir}

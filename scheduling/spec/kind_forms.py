"""The image form's notebook and inference tabs: their fields, the clean-form document each builds, and
the fields read back from a spec (the other way, so that a tab follows the YAML).

A tab's form is a flat mapping of text values (blank: the default), posted with `kind`. Each field
has a place in the kind's top-level document (`kinds.py`), and errors name the field, as the
training tab's do, in the active language (gettext).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from django.utils.translation import gettext as _

from scheduling.spec.load import Path
from scheduling.spec.model import JobSpec, SpecIssue
from scheduling.spec.units import format_cpu, format_duration, format_gpu_milli, format_memory
from scheduling.spec.workloads import TARGET_METRICS

if TYPE_CHECKING:
    from scheduling.kinds.base import Kind

# The fields every tab has, by their place in the kind's document (a kind's `form_fields` add its own).
SLICE_FIELDS: dict[str, Path] = {
    "gpus": ("resources", "gpu"),
    "sharing": ("sharing",),
    "gpuMemory": ("resources", "gpuMemory"),
    "mig": ("resources", "mig"),
    "cpu": ("resources", "cpu"),
    "memory": ("resources", "memory"),
    "vendor": ("vendor",),
    "gpuModel": ("gpuModel",),
    "nodePool": ("nodePool",),
}
JOB_FIELDS: dict[str, Path] = {
    "name": ("name",),
    "queue": ("queue",),
    "priority": ("priority",),
    "expectedDuration": ("expectedDuration",),
}
_WHOLE = {"priority", "minReplicas", "maxReplicas", "port"}


def form_namer(kind: Kind) -> Callable[[Path], str]:
    """A reader's namer for a kind's tab: a path in the document -> the form field that sets it."""
    names = {path: name for name, path in (kind.form_fields or {}).items() if name != "targetMetric"}
    names.update(kind.form_extra_names)

    def namer(path: Path) -> str:
        return names.get(path) or ".".join(str(p) for p in path)

    return namer


def slug(text: str) -> str:
    """The last part of an image or model reference as a DNS label: hf.co/meta/Llama-3:1 -> llama-3."""
    base = re.split(r"[:@]", text.rstrip("/").rsplit("/", 1)[-1])[0].lower()
    return re.sub(r"[^a-z0-9-]+", "-", base).strip("-")[:63].strip("-")


def _coerce(key: str, value: str, bad: Callable[[str, str], None]) -> Any:
    """Text as posted -> what the spec reader expects."""
    if key in _WHOLE:
        if not re.fullmatch(r"[0-9]{1,6}", value):
            bad(key, _("'%(value)s' is not a whole number") % {"value": value})
            return None
        return int(value)
    if key in ("gpus", "targetValue"):
        try:
            number = Decimal(value)
        except InvalidOperation:
            number = None
        if number is None or not number.is_finite():
            bad(key, (_("'%(value)s' is not a number of GPUs (e.g. 1 or 0.5)") if key == "gpus"
                      else _("'%(value)s' is not a number")) % {"value": value})
            return None
        return int(number) if number == number.to_integral_value() else float(number)
    if key == "command":
        try:
            return shlex.split(value)
        except ValueError as exc:
            bad(key, _("cannot split the command: %(error)s") % {"error": exc})
            return None
    return value


def kind_form_document(kind: Kind, form: Mapping[str, Any]) -> tuple[dict[str, Any], list[SpecIssue]]:
    """The clean-form document a kind's tab (a notebook's, a service's) stands for, or the problems with its
    fields (unknown ones, text that is not a number): those come before the spec reader's."""
    fields = kind.form_fields or {}
    issues: list[SpecIssue] = []

    def bad(key: str, message: str) -> None:
        issues.append(SpecIssue(None, None, key, f"{key}: {message}"))

    values: dict[str, Any] = {}
    for key, value in form.items():
        if key == "kind":
            continue
        if key not in fields:
            bad(key, _("unknown field '%(key)s' for kind %(kind)s") % {"key": key, "kind": kind.name})
            continue
        if isinstance(value, str):
            value = value.strip()
            if value == "":
                continue
            value = _coerce(key, value, bad)
        if value is not None:
            values[key] = value
    metric = values.pop("targetMetric", None)
    if metric is not None and metric not in TARGET_METRICS:
        bad("targetMetric", _("'%(value)s' is not one of %(choices)s") % {"value": metric,
                                                                          "choices": ", ".join(TARGET_METRICS)})
    doc: dict[str, Any] = {"kind": kind.name, "name": values.pop("name", None) or kind.form_default_name(values)}
    target = values.pop("targetValue", None)
    if target is not None:
        doc["target"] = {metric or "concurrency": target}
    for key, value in values.items():
        place = doc
        for part in fields[key][:-1]:
            place = place.setdefault(part, {})
        place[fields[key][-1]] = value
    return doc, issues


def form_number(value: float) -> str:
    """A number as a tab's field shows it (no ".0" on a whole number)."""
    return str(int(value)) if float(value).is_integer() else str(value)


def kind_form_values(kind: Kind, spec: JobSpec) -> tuple[dict[str, str], list[str]]:
    """A kind's tab fields as text (blank: the default), and what of the spec the tab cannot show: the
    fields every tab has, then the kind's own (its `form_values`)."""
    role = spec.roles[0]
    hidden = []
    if role.env:
        hidden.append("env")
    if role.volumes:
        hidden.append("volumes")
    if role.buckets:
        hidden.append("buckets")
    if spec.preemptible:
        hidden.append("preemptible: true")
    if role.vendor != "nvidia":  # the tab has no vendor field
        hidden.append(f"vendor: {role.vendor}")
    if role.sharing == "mig":
        gpus = ""
    elif role.sharing == "fraction":
        gpus = str(format_gpu_milli(role.gpu_milli))
    else:
        gpus = str(role.num_gpus)
    values = {
        "kind": spec.kind,
        "name": spec.name,
        "queue": spec.queue or "",
        "priority": str(spec.priority),
        "expectedDuration": format_duration(spec.expected_duration_s),
        "gpus": gpus,
        "sharing": role.sharing,
        "gpuMemory": format_memory(role.gpu_mem_mib) if role.sharing == "fraction" and role.gpu_mem_mib else "",
        "mig": role.mig_profile or "" if role.sharing == "mig" else "",
        "cpu": str(format_cpu(role.cpu_milli)),
        "memory": format_memory(role.mem_mib),
        "vendor": role.vendor,
        "gpuModel": role.gpu_model or "",
        "nodePool": role.node_pool or "",
    }
    values.update(kind.form_values(spec))
    return values, hidden

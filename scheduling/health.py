"""Node health: the GPU figures of the agents' heartbeats, and nodes whose agent went silent.

A node whose agent reported at least once and then stays silent for NODE_NOT_READY_AFTER_S is
NotReady (`Node.agent_silent`): the scheduler treats it as lost, so its replicas are evicted with
reason node-lost and placed elsewhere, and nothing new lands there. The next cycle after a
heartbeat makes it ready again. A node whose agent never reported (no agents deployed, the
simulated cluster without them, tests) is never judged by its heartbeats.

Two cases are not taken for a silent node, because the fault is more likely the platform's own:
- the platform itself was away (no cycle checked for longer than the window: a restart, a worker
  outage): silences are counted from when it came back (`HeartbeatWatch`);
- every reporting node is silent at once (the agents' endpoint down, a network cut): no node
  changes, as Kubernetes' node controller stops evicting in a fully disrupted zone. A single
  reporting node is therefore never marked silent.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from scheduling import clock, signals
from scheduling.core.units import model_family
from scheduling.models import HeartbeatWatch, Node

log = logging.getLogger(__name__)

MAX_VERSION = 64
MAX_MODEL = 64
MAX_MEMORY_MIB = 2**31 - 1


def not_ready_after() -> timedelta:
    return timedelta(seconds=settings.NODE_NOT_READY_AFTER_S)


# --------------------------------------------------------------------------- heartbeat figures


@dataclass
class HealthReport:
    """What a heartbeat's health figures came to: per GPU index the fields to store, and the refused ones."""

    agent_version: str | None = None
    gpus: dict[int, dict] = field(default_factory=dict)
    rejected: list[dict] = field(default_factory=list)


def _whole(value, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value != int(value):
        raise ValueError(f"must be a whole number from {low} to {high}")
    if not low <= value <= high:
        raise ValueError(f"{value} is outside {low}..{high}")
    return int(value)


def _number(value, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"must be a number from {low} to {high}")
    if not low <= value <= high:
        raise ValueError(f"{value} is outside {low}..{high}")
    return float(value)


def _text(value, high: int) -> str:
    if not isinstance(value, str) or len(value) > high or not value.isprintable():
        raise ValueError(f"must be printable text of at most {high} characters")
    return value


# Per-GPU health fields of a heartbeat: the field, how it is checked, the Gpu column it fills.
GPU_FIELDS = {
    "model": (lambda v: _text(v, MAX_MODEL), "model"),
    "util_pct": (lambda v: _number(v, 0, 100), "util_pct"),
    "memory_used_mib": (lambda v: _whole(v, 0, MAX_MEMORY_MIB), "memory_used_mib"),
    "temperature_c": (lambda v: round(_number(v, -50, 200)), "temperature_c"),
    "ecc_uncorrected": (lambda v: _whole(v, 0, 2**62), "ecc_uncorrected"),
    "xid_count": (lambda v: _whole(v, 0, 2**31 - 1), "xid_count"),
    "xid_last": (lambda v: _whole(v, 0, 2**31 - 1), "xid_last"),
}


def read_health(payload: dict, gpus: list[dict]) -> HealthReport:
    """The health figures of a heartbeat, each checked on its own: a bad one is refused (and stored as
    unknown), the rest are kept. A field left out keeps what was stored (older agents send none);
    null means the device cannot tell."""
    report = HealthReport()
    if "agent_version" in payload:
        try:
            report.agent_version = _text(payload["agent_version"] or "", MAX_VERSION)
        except ValueError as error:
            report.rejected.append({"gpu": None, "field": "agent_version", "reason": f"agent_version {error}"})
    for gpu in gpus:
        values = {}
        for name, (check, column) in GPU_FIELDS.items():
            if name not in gpu:
                continue
            raw = gpu[name]
            if raw is None:
                values[column] = "" if column == "model" else None
                continue
            try:
                values[column] = check(raw)
            except (ValueError, OverflowError) as error:
                values[column] = "" if column == "model" else None
                report.rejected.append({"gpu": gpu["index"], "field": name, "reason": f"{name} {error}"})
        if values:
            report.gpus[gpu["index"]] = values
    return report


# --------------------------------------------------------------------------- the pool's model

# Cards of one model differ a little in the memory NVML reports (ECC, reserved regions); another card of the
# same family (A100 40 GB against 80 GB) differs by far more.
MODEL_MEMORY_TOLERANCE = 0.1


def model_differs(reported: str, memory_mib: int, pool_model: str, pool_memory_mib: int) -> bool:
    """Whether a GPU, as its agent reports it, is not of its pool's model: another family, or memory more
    than MODEL_MEMORY_TOLERANCE from the pool's. An unreported name, or one that names no family, is not
    taken for another model."""
    family, pool_family = model_family(reported or ""), model_family(pool_model)
    if family is None or pool_family is None:
        return False
    if family != pool_family:
        return True
    return bool(memory_mib and pool_memory_mib) and abs(memory_mib - pool_memory_mib) > MODEL_MEMORY_TOLERANCE * pool_memory_mib


# --------------------------------------------------------------------------- silent agents


@dataclass(frozen=True)
class ReadinessChange:
    node: Node
    silent: bool
    last_heartbeat: datetime
    silent_for: timedelta


def watching_since(now: datetime, window: timedelta) -> datetime:
    """Since when heartbeats have been checked without a gap longer than `window` (now, after one).
    Written at most every quarter window, so an unchanged cluster costs no write per cycle."""
    watch = HeartbeatWatch.objects.select_for_update().filter(pk=1).first()
    if watch is None:
        HeartbeatWatch.objects.create(pk=1, since=now, checked=now)
        return now
    if now < watch.checked or now - watch.checked > window:  # the platform was away (or its clock went back)
        watch.since = watch.checked = now
        watch.save(update_fields=["since", "checked"])
    elif now - watch.checked >= window / 4:
        watch.checked = now
        watch.save(update_fields=["checked"])
    return watch.since


@transaction.atomic
def update_agent_silence(now: datetime | None = None) -> list[ReadinessChange]:
    """Mark the nodes whose agent went silent, and ready again those that reported since; returns
    the changes (also sent as `node_readiness_changed`)."""
    now = now or clock.now()
    window = not_ready_after()
    since = watching_since(now, window)
    reporting = list(Node.objects.filter(last_heartbeat__isnull=False).only(
        "pk", "name", "last_heartbeat", "agent_silent"))
    silent = {n.pk for n in reporting if now - max(n.last_heartbeat, since) > window}
    if reporting and len(silent) == len(reporting):
        if any(not n.agent_silent for n in reporting):
            log.warning("no node agent has reported for %s s: the platform may not be receiving heartbeats; "
                        "no node is marked not ready for it", int(window.total_seconds()))
        silent = {n.pk for n in reporting if n.agent_silent}  # nothing changes
    changes = [ReadinessChange(n, n.pk in silent, n.last_heartbeat, now - n.last_heartbeat)
               for n in reporting if (n.pk in silent) != n.agent_silent]
    for value in (True, False):
        pks = [c.node.pk for c in changes if c.silent is value]
        if pks:
            Node.objects.filter(pk__in=pks).update(agent_silent=value)
    for change in changes:
        change.node.agent_silent = change.silent
        if change.silent:
            log.warning("node %s is not ready: its agent has not reported for %d s", change.node.name,
                        change.silent_for.total_seconds())
        else:
            log.info("node %s is ready again: its agent reports", change.node.name)
    if changes:
        signals.node_readiness_changed.send(sender=None, changes=changes)
    return changes

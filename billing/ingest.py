"""Usage samples from node agents: check each one, store the good ones once, say why for the rest.

Idempotent by sample id: a batch sent twice stores nothing twice and answers the same.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from billing.models import UsageSample
from scheduling.models import Node, Replica

MAX_BATCH = 5000
MAX_CLOCK_SKEW = timedelta(minutes=10)
MAX_AGE = timedelta(days=35)


class BatchError(ValueError):
    """The whole batch is unusable (not just some samples)."""


@dataclass
class IngestResult:
    accepted: list[str] = field(default_factory=list)
    rejected: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"accepted": self.accepted, "rejected": self.rejected}


def _number(sample: dict, key: str, *, low: float, high: float, optional: bool = False) -> float | None:
    value = sample.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{key} must be a number, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{key} {value} is outside {low}..{high}")
    return float(value)


def check_sample(raw: object, node: Node, now: datetime) -> UsageSample:
    """One sample as a row to store, or ValueError with a reason that names the field."""
    if not isinstance(raw, dict):
        raise ValueError("a sample must be an object")
    if raw.get("node") not in (None, node.name):
        raise ValueError(f"node {raw.get('node')!r} is not this token's node {node.name!r}")
    try:
        ts = datetime.fromisoformat(str(raw.get("ts")))
    except ValueError:
        raise ValueError(f"ts {raw.get('ts')!r} is not an ISO 8601 time") from None
    if ts.tzinfo is None:
        raise ValueError("ts must carry a time zone (e.g. +00:00)")
    if ts > now + MAX_CLOCK_SKEW:
        raise ValueError(f"ts {ts.isoformat()} is in the future (node clock skew?)")
    if ts < now - MAX_AGE:
        raise ValueError(f"ts {ts.isoformat()} is older than the {MAX_AGE.days}-day retention")
    gpu_uuid = raw.get("gpu_uuid")
    if not isinstance(gpu_uuid, str) or not gpu_uuid or len(gpu_uuid) > 80:
        raise ValueError("gpu_uuid must be a non-empty string")
    gpu_index = _number(raw, "gpu_index", low=0, high=64)
    if gpu_index != int(gpu_index):
        raise ValueError(f"gpu_index must be a whole number, got {raw.get('gpu_index')!r}")
    pod_uid = raw.get("pod_uid") or ""
    if not isinstance(pod_uid, str) or len(pod_uid) > 64:
        raise ValueError("pod_uid must be a string of at most 64 characters or null")
    return UsageSample(
        id=uuid.UUID(str(raw.get("id"))), node=node, ts=ts, gpu_uuid=gpu_uuid, gpu_index=int(gpu_index),
        pod_uid=pod_uid, gpu_util_pct=_number(raw, "gpu_util_pct", low=0, high=100, optional=True),
        mem_used_mib=int(_number(raw, "mem_used_mib", low=0, high=10**7)),
        interval_s=_number(raw, "interval_s", low=0.001, high=3600),
    )


def ingest(node: Node, payload: object, *, now: datetime | None = None) -> IngestResult:
    now = now or timezone.now()
    if not isinstance(payload, dict) or not isinstance(payload.get("samples"), list):
        raise BatchError('the body must be an object with a "samples" list')
    if payload.get("node") not in (None, node.name):
        raise PermissionError(f"this token reports for node {node.name!r}, not {payload.get('node')!r}")
    samples = payload["samples"]
    if len(samples) > MAX_BATCH:
        raise BatchError(f"a batch holds at most {MAX_BATCH} samples, got {len(samples)}")
    result = IngestResult()
    rows: list[UsageSample] = []
    for raw in samples:
        sample_id = raw.get("id") if isinstance(raw, dict) else None
        try:
            rows.append(check_sample(raw, node, now))
        except ValueError as error:
            reason = str(error) if sample_id is None or _is_uuid(sample_id) else f"id {sample_id!r} is not a UUID"
            result.rejected.append({"id": str(sample_id) if sample_id is not None else None, "reason": reason})
    replicas = dict(Replica.objects.filter(uid__in={_uid(r.pod_uid) for r in rows if _uid(r.pod_uid)})
                    .values_list("uid", "pk"))
    for row in rows:
        uid = _uid(row.pod_uid)
        row.replica_id = replicas.get(uid) if uid else None
    UsageSample.objects.bulk_create(rows, ignore_conflicts=True, batch_size=1000)
    result.accepted = [str(row.id) for row in rows]
    return result


def _is_uuid(value: object) -> bool:
    try:
        uuid.UUID(str(value))
        return True
    except ValueError:
        return False


def _uid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value) if value else None
    except ValueError:
        return None

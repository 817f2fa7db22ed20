"""Usage samples from node agents: check each one, store the good ones once, say why for the rest.

Idempotent by sample id: a batch sent twice stores nothing twice and answers the same.
"""

from __future__ import annotations

import functools
import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import connection

from billing import metrics
from billing.ledger.posting import post_ledger
from billing.metering.storage import record_kubelet_volumes
from billing.models import UsageSample
from billing.reports.services import check_budgets
from scheduling.api import DomainError, Forbidden, clock
from scheduling.models import Node, Replica

MAX_BATCH = 5000
MAX_CLOCK_SKEW = timedelta(minutes=10)
MAX_AGE = timedelta(days=35)


class BatchError(DomainError):
    """The whole batch is unusable (not just some samples)."""


@dataclass(slots=True)
class SampleRow:
    """One checked sample, not yet a model instance: building 500 of those per batch costs more
    than checking them."""

    id: uuid.UUID
    ts: datetime
    gpu_uuid: str
    gpu_index: int
    pod_uid: str
    gpu_util_pct: float | None
    mem_used_mib: int
    interval_s: float


@dataclass
class IngestResult:
    accepted: list[str] = field(default_factory=list)
    rejected: list[dict] = field(default_factory=list)
    volumes: dict[str, int] | None = None  # the kubelet volume stats kept: recorded and unknown claims

    def refuse(self, index: int, raw: object, reason: str) -> None:
        sample_id = raw.get("id") if isinstance(raw, dict) else None
        if sample_id is not None:  # echoed for the agent to match; NUL would break the answer's logs
            sample_id = str(sample_id)[:64].replace("\x00", "\\x00")
        self.rejected.append({"index": index, "id": sample_id, "reason": reason})

    def to_json(self) -> dict:
        answer = {"accepted": self.accepted, "rejected": self.rejected}
        if self.volumes is not None:
            answer["volumes"] = self.volumes
        return answer


def _number(sample: dict, key: str, *, low: float, high: float, optional: bool = False) -> float | None:
    value = sample.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{key} must be a number, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{key} {value} is outside {low}..{high}")
    return float(value)


def _text(raw: dict, key: str, *, max_length: int, optional: bool = False) -> str:
    value = raw.get(key)
    if optional and value in (None, ""):
        return ""
    if not isinstance(value, str) or not value or len(value) > max_length or "\x00" in value:
        raise ValueError(f"{key} must be a string of 1..{max_length} characters without NUL"
                         + (" or null" if optional else ""))
    return value


def check_sample(raw: object, node: Node, now: datetime) -> SampleRow:
    """One sample as a row to store, or ValueError with a reason that names the field."""
    if not isinstance(raw, dict):
        raise ValueError("a sample must be an object")
    if raw.get("node") not in (None, node.name):
        raise ValueError(f"node {_shown(raw.get('node'))} is not this token's node {node.name!r}")
    sample_id = _uid(_text(raw, "id", max_length=36))
    if sample_id is None:
        raise ValueError(f"id {_shown(raw.get('id'))} is not a UUID")
    try:
        ts = datetime.fromisoformat(_text(raw, "ts", max_length=40))
    except ValueError:
        raise ValueError(f"ts {_shown(raw.get('ts'))} is not an ISO 8601 time") from None
    if ts.tzinfo is None:
        raise ValueError("ts must carry a time zone (e.g. +00:00)")
    if ts > now + MAX_CLOCK_SKEW:
        raise ValueError(f"ts {ts.isoformat()} is in the future (node clock skew?)")
    if ts < now - MAX_AGE:
        raise ValueError(f"ts {ts.isoformat()} is older than the {MAX_AGE.days}-day retention")
    gpu_uuid = _text(raw, "gpu_uuid", max_length=80)
    gpu_index = _number(raw, "gpu_index", low=0, high=64)
    if gpu_index != int(gpu_index):
        raise ValueError(f"gpu_index must be a whole number, got {_shown(raw.get('gpu_index'))}")
    pod_uid = _text(raw, "pod_uid", max_length=64, optional=True)
    return SampleRow(
        id=sample_id, ts=ts, gpu_uuid=gpu_uuid, gpu_index=int(gpu_index),
        pod_uid=pod_uid, gpu_util_pct=_number(raw, "gpu_util_pct", low=0, high=100, optional=True),
        mem_used_mib=int(_number(raw, "mem_used_mib", low=0, high=10**7)),
        interval_s=_number(raw, "interval_s", low=0.001, high=3600),
    )


def _shown(value: object) -> str:
    """A client's value inside a reason: short, and without NUL (PostgreSQL and logs refuse it)."""
    return repr(value)[:60].replace("\x00", "\\x00")


def ingest(node: Node, payload: object, *, now: datetime | None = None) -> IngestResult:
    """Per sample: good ones are stored, bad ones refused with their index and why; only a body
    that is not a batch at all is refused whole."""
    now = now or clock.now()
    if not isinstance(payload, dict) or not isinstance(payload.get("samples"), list):
        raise BatchError('the body must be an object with a "samples" list')
    if payload.get("node") not in (None, node.name):
        raise Forbidden(f"this token reports for node {node.name!r}, not {_shown(payload.get('node'))}", field="node")
    samples = payload["samples"]
    if len(samples) > MAX_BATCH:
        raise BatchError(f"a batch holds at most {MAX_BATCH} samples, got {len(samples)}")
    result = IngestResult()
    if payload.get("volumes") is not None:  # the kubelet's volume stats, for storage billed by use
        try:
            result.volumes = record_kubelet_volumes(payload["volumes"], now=now)
        except ValueError as error:
            raise BatchError(str(error), field="volumes") from None
    checked: list[tuple[int, SampleRow]] = []
    for index, raw in enumerate(samples):
        try:
            checked.append((index, check_sample(raw, node, now)))
        except (ValueError, TypeError, OverflowError) as error:
            result.refuse(index, raw, str(error))
    pod_uids = {row.pod_uid: _uid(row.pod_uid) for _, row in checked if row.pod_uid}
    replicas = {uid: (pk, node_id, job_id) for uid, pk, node_id, job_id in Replica.objects.filter(
        uid__in={u for u in pod_uids.values() if u}).values_list("uid", "pk", "node_id", "job_id")}
    rows: list[SampleRow] = []
    replica_ids: list[int | None] = []
    job_ids: set[int] = set()
    for index, row in checked:
        replica_id, replica_node, job_id = replicas.get(pod_uids.get(row.pod_uid), (None, None, None))
        if replica_id is not None and replica_node != node.pk:
            result.refuse(index, samples[index], f"pod {row.pod_uid} is not bound to node {node.name!r}")
            continue
        rows.append(row)
        replica_ids.append(replica_id)
        if job_id is not None:
            job_ids.add(job_id)
    if rows:
        store = _insert_json if connection.vendor == "postgresql" else _insert_models
        store(node, rows, replica_ids)
    result.accepted = [str(row.id) for row in rows]
    metrics.count_ingest(result)
    _post_usage(job_ids, now)
    return result


def _post_usage(job_ids: set[int], now: datetime) -> None:
    """The batch's jobs get their open lines recomputed and their workspaces' budgets checked at
    once, so a budget crossing fires within the ingest that crossed it."""
    if not job_ids:
        return
    posted = post_ledger(now=now, job_ids=job_ids)
    check_budgets(now=now, workspace_ids=posted.workspace_ids)


# Checked samples go to PostgreSQL as one JSON document that the database unpacks into rows: the ORM's
# bulk_create prepared every field of every row in Python, which cost more than the insert itself.
_ROW_FIELDS = ("id", "ts", "gpu_uuid", "gpu_index", "pod_uid", "replica", "gpu_util_pct", "mem_used_mib", "interval_s")


@functools.cache
def _json_insert_sql() -> str:
    meta = UsageSample._meta
    fields = [meta.get_field(name) for name in _ROW_FIELDS]
    quote = connection.ops.quote_name
    record = ", ".join(f"{quote(f.column)} {f.rel_db_type(connection) if f.is_relation else f.db_type(connection)}"
                       for f in fields)
    columns = ", ".join(quote(f.column) for f in [*fields, meta.get_field("node"), meta.get_field("received")])
    return (f"INSERT INTO {quote(meta.db_table)} ({columns}) SELECT r.*, %s, %s FROM json_to_recordset(%s::json) "
            f"AS r({record}) ON CONFLICT ({quote(meta.pk.column)}) DO NOTHING")


def _insert_json(node: Node, rows: list[SampleRow], replica_ids: list[int | None]) -> None:
    document = json.dumps([
        {"id": str(r.id), "ts": r.ts.isoformat(), "gpu_uuid": r.gpu_uuid, "gpu_index": r.gpu_index,
         "pod_uid": r.pod_uid, "replica_id": replica_id, "gpu_util_pct": r.gpu_util_pct,
         "mem_used_mib": r.mem_used_mib, "interval_s": r.interval_s}
        for r, replica_id in zip(rows, replica_ids, strict=True)])
    with connection.cursor() as cursor:
        cursor.execute(_json_insert_sql(), [node.pk, clock.now(), document])


def _insert_models(node: Node, rows: list[SampleRow], replica_ids: list[int | None]) -> None:
    UsageSample.objects.bulk_create(
        [UsageSample(id=r.id, node=node, ts=r.ts, gpu_uuid=r.gpu_uuid, gpu_index=r.gpu_index, pod_uid=r.pod_uid,
                     replica_id=replica_id, gpu_util_pct=r.gpu_util_pct, mem_used_mib=r.mem_used_mib,
                     interval_s=r.interval_s)
         for r, replica_id in zip(rows, replica_ids, strict=True)],
        ignore_conflicts=True, batch_size=1000)


def _uid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value) if value else None
    except ValueError:
        return None


def purge_samples(older_than_days: int, *, now: datetime) -> int:
    """Raw samples are kept for a while; the ledger lines they fed are kept for good."""
    deleted, _ = UsageSample.objects.filter(ts__lt=now - timedelta(days=older_than_days)).delete()
    return deleted

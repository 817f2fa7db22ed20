"""The job list's rows as plain dicts: the same JSON as JobListOutput (which stays the schema), built without
DRF's serializer walking 31 fields and 11 per replica for each of up to 500 jobs, which was most of the API
job list's CPU. Decimals and times go through the same DRF fields' to_representation, so their text cannot
drift from the job detail's."""

from __future__ import annotations

from django.utils import timezone
from rest_framework import serializers

from billing.api import currency_at
from scheduling.api import checkpoint_fields, grace_of, has_ssh, job_reason, lost_of

_MONEY = serializers.DecimalField(max_digits=14, decimal_places=2)
_GPU_HOURS = serializers.DecimalField(max_digits=14, decimal_places=4)
_TIME = serializers.DateTimeField()


def _text(value):
    return None if value is None else str(value)


def _number(value):
    return None if value is None else int(value)


def _money(value):
    return None if value is None else _MONEY.to_representation(value)


def _time(value, zone):
    """DRF's DateTimeField text: the time in the active zone (TimeZoneMiddleware's), ISO 8601 with Z for UTC;
    the zone looked up once per list, not per field."""
    if value is None:
        return None
    if not timezone.is_aware(value):
        return _TIME.to_representation(value)
    text = value.astimezone(zone).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def replica_row(replica, zone) -> dict:
    node = replica.node
    return {
        "role": _text(replica.role),
        "index": _number(replica.index),
        "state": _text(replica.state),
        "node": None if node is None or node.name is None else str(node.name),
        "gpus": replica.gpu_indices,
        "slice": replica.slice,
        "slice_label": _text(replica.slice_label),
        "started": _time(replica.started, zone),
        "ended": _time(replica.ended, zone),
        "lost_gpu_hours": None
        if replica.lost_gpu_hours is None
        else _GPU_HOURS.to_representation(replica.lost_gpu_hours),
    }


def job_row(job, running_totals: dict, zone=None) -> dict:
    """One job of the API's list (JobListOutput's fields in its order); running_totals: job id -> (cost, ...)
    from billing's job_totals for the page's started, unfinished jobs; zone: the active time zone, if known."""
    zone = zone or timezone.get_current_timezone()
    replicas = job.replicas.all()
    if job.is_final or not job.started:
        cost_so_far = None
    else:
        total = running_totals.get(job.pk)
        cost_so_far = str(total[0]) if total else "0.00"
    return {
        "id": _number(job.id),
        "name": _text(job.name),
        "workspace": _text(job.workspace.slug),
        "queue": _text(job.queue.name),
        "state": _text(job.state),
        "pending_reason": _text(job.pending_reason),
        "pending_reason_text": job_reason(job) if job.pending_reason or job.pending_code else "",
        "pending_code": _text(job.pending_code),
        "pending_params": job.pending_params,
        "type": _text(job.job_type),
        "kind": _text(job.kind),
        "ssh": has_ssh(job),
        "priority": _number(job.priority),
        "preemptible": None if job.preemptible is None else bool(job.preemptible),
        "reduce_cost": None if job.reduce_cost is None else bool(job.reduce_cost),
        "expected_duration_s": _number(job.expected_duration_s),
        "replicas": [replica_row(replica, zone) for replica in replicas],
        "quote": job.quote,
        "final_cost": _money(job.final_cost),
        "currency": job.currency
        or (job.quote or {}).get("currency")
        or currency_at(job.workspace, job.created),
        "spec": job.spec,
        "created": _time(job.created, zone),
        "started": _time(job.started, zone),
        "finished": _time(job.finished, zone),
        "schedule": _number(job.schedule_id),
        "after": job.after,
        "array_parent": _number(job.array_parent_id),
        "array_index": _number(job.array_index),
        "termination_grace_s": grace_of(job.spec),
        "checkpoint": checkpoint_fields(job),
        "lost_gpu_hours": str(lost_of(replicas)),
        "cost_so_far": cost_so_far,
    }

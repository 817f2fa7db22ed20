"""Operators' actions on jobs from the console: each goes through scheduling's operator services (which
check the rule and record the job event the tenant sees) and writes its audit line in the same
transaction, so neither is kept without the other."""

from __future__ import annotations

from django.db import transaction

from portal import history_catalogue as texts
from portal.console import audit
from scheduling.api import said, services
from scheduling.models import Job, Queue


def _locked_state(job: Job) -> str:
    """The job's state now, the row locked until the action commits (the page may be stale)."""
    return Job.objects.select_for_update().values_list("state", flat=True).get(pk=job.pk)


def _said(reason: str):
    return said(texts.FOR_REASON, reason=reason) if reason else ""


@transaction.atomic
def cancel(operator, job: Job, *, reason: str = "") -> Job:
    before = _locked_state(job)
    job = services.cancel_job_as_operator(operator=operator, job=job, reason=reason)
    audit.record(operator, "cancel", job, changes={"state": [before, job.state]}, message=_said(reason))
    return job


@transaction.atomic
def requeue(operator, job: Job, *, reason: str = "") -> Job:
    before = _locked_state(job)
    job = services.requeue_job_as_operator(operator=operator, job=job, reason=reason)
    audit.record(operator, "requeue", job, changes={"state": [before, job.state]}, message=_said(reason))
    return job


@transaction.atomic
def change_priority(operator, job: Job, priority: int, *, reason: str = "") -> Job:
    job, old = services.change_job_priority(operator=operator, job=job, priority=priority, reason=reason)
    audit.record(operator, "change priority", job, changes={"priority": [old, job.priority]}, message=_said(reason))
    return job


@transaction.atomic
def move(operator, job: Job, queue: Queue, *, reason: str = "") -> Job:
    job, old = services.move_job_to_queue(operator=operator, job=job, queue=queue, reason=reason)
    audit.record(operator, "move queue", job, changes={"queue": [old, queue.name]}, message=_said(reason))
    return job

"""A job's attempts: one JobAttempt row per run, opened when the job starts running and ended with its class.

Each function reads and writes the rows of many jobs at once (the cycle ends dozens of runs together): its
queries do not grow with the number of jobs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max

from scheduling.bulk import insert_rows, update_rows
from scheduling.models import JobAttempt


@dataclass(frozen=True)
class AttemptEnd:
    job: object
    end_class: str
    counted: bool = False
    exit_code: int | None = None
    memory_mib: int | None = None


def _last_numbers(job_ids: Iterable[int]) -> dict[int, int]:
    return dict(
        JobAttempt.objects.filter(job_id__in=set(job_ids))
        .values("job_id")
        .annotate(last=Max("number"))
        .values_list("job_id", "last")
    )


def open_attempts(started: list[tuple[object, str]], now: datetime) -> None:
    """(job, nodes) of jobs whose run started now: a new attempt each (a job with one open keeps it)."""
    if not started:
        return
    ids = {job.pk for job, _ in started}
    already = set(
        JobAttempt.objects.filter(job_id__in=ids, ended__isnull=True).values_list("job_id", flat=True)
    )
    last = _last_numbers(ids)
    insert_rows(
        [
            JobAttempt(job_id=job.pk, number=last.get(job.pk, 0) + 1, started=now, node=nodes[:253])
            for job, nodes in started
            if job.pk not in already
        ]
    )


def end_attempts(ends: list[AttemptEnd], now: datetime, *, create_missing: bool = True) -> None:
    """End each job's open attempt with its class; a job that ended before it was seen running gets an
    attempt of no length (unless not `create_missing`: an eviction of a job that never ran)."""
    if not ends:
        return
    by_job = {end.job.pk: end for end in ends}
    open_rows = {row.job_id: row for row in JobAttempt.objects.filter(job_id__in=by_job, ended__isnull=True)}
    last = _last_numbers(set(by_job) - set(open_rows))
    new = []
    for job_id, end in by_job.items():
        row = open_rows.get(job_id)
        if row is None:
            if not create_missing:
                continue
            row = JobAttempt(job_id=job_id, number=last.get(job_id, 0) + 1, started=now)
            new.append(row)
        row.ended, row.end_class, row.counted = now, end.end_class, end.counted
        row.exit_code, row.memory_mib = end.exit_code, end.memory_mib
    update_rows(list(open_rows.values()), ["ended", "end_class", "counted", "exit_code", "memory_mib"])
    insert_rows(new)


def counted_failures(job_ids: Iterable[int]) -> dict[int, int]:
    """Per job, its attempts that counted against its retry limit."""
    rows = (
        JobAttempt.objects.filter(job_id__in=set(job_ids), counted=True)
        .values("job_id")
        .annotate(n=Count("pk"))
    )
    return dict(rows.values_list("job_id", "n"))

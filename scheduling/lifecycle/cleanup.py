"""Clean-up after `ttlAfterFinished`: a finished job's replicas (their rows) and any pods the cluster still
has go; the job's record, events, logs (within their retention) and ledger lines stay."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from django.db import transaction

from scheduling import history_catalogue as texts
from scheduling.history_texts import said
from scheduling.models import Job, Replica
from scheduling.services import record_events

BATCH = 500


@transaction.atomic
def clean_up_finished(backend, now: datetime) -> int:
    """Clean up the jobs whose time came (at most BATCH a cycle); returns how many."""
    jobs = list(
        Job.objects.select_for_update(skip_locked=True)
        .filter(cleanup_at__lte=now, cleaned_up__isnull=True)
        .order_by("cleanup_at")[:BATCH]
    )
    if not jobs:
        return 0
    ids = [job.pk for job in jobs]
    rows = list(Replica.objects.filter(job_id__in=ids).values_list("job_id", "role", "index"))
    keys = set(rows)   # a replica's placements share its key
    counts = Counter(job_id for job_id, *_ in rows)
    Replica.objects.filter(job_id__in=ids).delete()
    Job.objects.filter(pk__in=ids).update(cleaned_up=now)
    record_events(
        [
            (
                job,
                "cleaned-up",
                said(
                    texts.CLEANED_UP,
                    ttl=(job.spec or {}).get("ttlAfterFinished", ""),
                    count=counts.get(job.pk, 0),
                ),
                {"replicas": counts.get(job.pk, 0)},
            )
            for job in jobs
        ]
    )
    if keys:  # a pod the cluster kept (its logs were read when the job ended)
        transaction.on_commit(lambda: _forget(backend, sorted(keys)))
    return len(jobs)


def _forget(backend, keys) -> None:
    if hasattr(backend, "release_many"):
        backend.release_many([(key, None) for key in keys])
    else:
        for key in keys:
            backend.forget(key)

"""A job's cost, read from the ledger: the job page shows the cents the statement bills."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db import transaction

from billing.ledger.posting import post_ledger
from billing.ledger.selectors import as_of, job_total, workspace_currency
from billing.models import ChargeLine
from scheduling.models import Job


@dataclass(frozen=True)
class JobCost:
    total: Decimal
    currency: str
    as_of: datetime | None
    provisional: bool  # some of its lines are of an hour still open


def job_cost(job: Job) -> JobCost:
    lines = ChargeLine.objects.filter(job=job)
    return JobCost(total=job_total(job.pk), currency=workspace_currency(job.workspace), as_of=as_of(lines),
                   provisional=lines.filter(provisional=True).exists())


@transaction.atomic
def finalize_job_cost(job_id: int) -> Job:
    """Post the finished job's last lines and record their sum as its final cost (idempotent)."""
    post_ledger(job_ids=[job_id])
    job = Job.objects.select_for_update().get(pk=job_id)
    job.final_cost, job.currency = job_total(job.pk), workspace_currency(job.workspace)
    job.save(update_fields=["final_cost", "currency"])
    return job


def price_finished_job(sender, job, **kwargs) -> str:
    """Connected to scheduling's job_finished: the final cost, as a note for the job's last event."""
    priced = finalize_job_cost(job.pk)
    return f"final cost {priced.final_cost:.2f} {priced.currency}"

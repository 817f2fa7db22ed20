"""A job's cost, read from the ledger: the job page shows the cents the statement bills."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation

from django.db import transaction
from django.db.models import Sum

from billing import pricing
from billing.ledger.deadline_cap import cap_missed_deadline
from billing.ledger.posting import post_ledger
from billing.ledger.selectors import array_total, as_of, job_currency, job_total
from billing.models import ChargeLine, UsageSample
from scheduling.api import clock
from scheduling.models import Job


@dataclass(frozen=True)
class JobCost:
    total: Decimal
    currency: str
    as_of: datetime | None
    provisional: bool  # some of its lines are of an hour still open


def job_cost(job: Job) -> JobCost:
    lines = ChargeLine.objects.filter(job=job)
    return JobCost(total=job_total(job.pk), currency=job_currency(job), as_of=as_of(lines),
                   provisional=lines.filter(provisional=True).exists())


@dataclass(frozen=True)
class JobEfficiency:
    """How much of the GPU time a job held it used, from its ledger lines: used GPU-hours over
    allocated GPU-hours. The node agents' utilisation is counted against the slice held (a 0.5 GPU
    fraction at 40 % of the device uses 80 % of its slice); held time with no sample counts as unused."""

    allocated_gpu_hours: Decimal
    used_gpu_hours: Decimal
    measured: bool  # the job's GPUs reported utilisation (MIG instances do not)

    @property
    def percent(self) -> Decimal | None:
        """Used over held, in %, at most 100 (time-sliced neighbours can push a device's reading over
        the share held); None when nothing was held or nothing could be measured."""
        if not self.measured or not self.allocated_gpu_hours:
            return None
        return min(Decimal(100), self.used_gpu_hours / self.allocated_gpu_hours * 100).quantize(Decimal("0.1"))


def job_efficiency(job: Job) -> JobEfficiency:
    sums = ChargeLine.objects.filter(job=job, category=ChargeLine.Category.USAGE).aggregate(
        allocated=Sum("allocated_gpu_hours"), used=Sum("used_gpu_hours"))
    step = Decimal("0.001")  # a database sum may add digits (SQLite sums decimals as floats)
    measured = UsageSample.objects.filter(replica__job=job, gpu_util_pct__isnull=False).exists()
    return JobEfficiency(allocated_gpu_hours=Decimal(str(sums["allocated"] or 0)).quantize(step),
                         used_gpu_hours=Decimal(str(sums["used"] or 0)).quantize(step), measured=measured)


@dataclass(frozen=True)
class EstimateCheck:
    """An ended job's final cost against the estimate frozen in its quote at submission."""

    low: Decimal
    high: Decimal
    final: Decimal
    currency: str
    verdict: str  # within, below, above
    difference: Decimal  # how far outside the estimate (0 within)
    percent: Decimal | None  # the difference against the bound it passed, in %


def estimate_check(job: Job) -> EstimateCheck | None:
    """None while the job runs, or when it was submitted without a quote."""
    quote = job.quote if isinstance(job.quote, dict) else {}
    if job.final_cost is None or not quote:
        return None
    currency = job.currency or quote.get("currency") or "USD"
    if quote.get("currency", currency) != currency:  # amounts of two currencies do not compare
        return None
    try:
        low, high = Decimal(str(quote["estimate_low"])), Decimal(str(quote["estimate_high"]))
    except (KeyError, InvalidOperation):
        return None
    final = pricing.quantize_money(job.final_cost, currency)
    if final > high:
        verdict, bound = "above", high
    elif final < low:
        verdict, bound = "below", low
    else:
        verdict, bound = "within", None
    difference = abs(final - bound) if bound is not None else Decimal(0)
    percent = (difference / bound * 100).quantize(Decimal("0.1")) if bound else None
    return EstimateCheck(low=low, high=high, final=final, currency=currency, verdict=verdict,
                         difference=pricing.quantize_money(difference, currency), percent=percent)


@transaction.atomic
def finalize_job_cost(job_id: int) -> Job:
    """Post the finished job's last lines and record their sum as its final cost (idempotent)."""
    post_ledger(job_ids=[job_id])
    job = Job.objects.select_for_update().get(pk=job_id)
    cap_missed_deadline(job, clock.now())  # a deadline the platform missed: at most the quoted price
    # an array's parent holds nothing itself: its final cost is what its indices cost (each fixed its own)
    total = array_total(job.pk) if job.array_size else job_total(job.pk)
    job.final_cost, job.currency = total, job_currency(job)
    job.save(update_fields=["final_cost", "currency"])
    return job


def price_finished_job(sender, job, **kwargs) -> None:
    """Connected to scheduling's job_finished: fixes the job's final cost on its row."""
    finalize_job_cost(job.pk)

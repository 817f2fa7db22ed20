"""The promise of work priced "by the deadline": a job the platform did not finish by its deadline is billed at
most the price it was quoted.

When such a job's final cost is fixed (`jobs.finalize_job_cost`), its lines are summed; what is above the quoted
"by the deadline" estimate (the frozen option's `estimate_high`, the most it was told it could cost) comes back as
one credit line of its own, with its reason. Billed lines are never edited: the cap is a line, written once
(found again by its `sku_id`), its money rounded once. A job that ran longer than it declared (its
expectedDuration and the safety margin) overran on its own and is billed as it ran.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal, InvalidOperation

from django.conf import settings

from billing import pricing
from billing.ledger import prices
from billing.ledger.posting import hour_floor
from billing.ledger.selectors import job_currency, job_total
from billing.models import ChargeLine
from billing.time_zone import platform_tz
from scheduling.models import JobState

DEADLINE_CAP_SKU = "deadline-cap"


def quoted_cap(job) -> Decimal | None:
    """The most a deadline job was quoted at ("by the deadline" option); None: not priced so."""
    if not prices.by_deadline(job):
        return None
    try:
        return Decimal(str(job.quote["estimate_high"]))
    except (KeyError, InvalidOperation):
        return None


def missed_by_platform(job) -> bool:
    """It ended done after its deadline, and not because it ran longer than it said it would."""
    if job.state != JobState.SUCCEEDED or job.finished is None or job.complete_by is None:
        return False
    if job.finished <= job.complete_by:
        return False
    allowed = job.expected_duration_s * (1 + settings.DEADLINE_SAFETY_MARGIN)
    longest = max(((r.ended - r.started).total_seconds() * r.clock_scale
                   for r in job.replicas.filter(started__isnull=False, ended__isnull=False)), default=0.0)
    return longest <= allowed


def cap_missed_deadline(job, now: datetime) -> ChargeLine | None:
    """The credit line that caps a late deadline job's bill at its quoted price (written once), or None."""
    cap = quoted_cap(job)
    if cap is None or not missed_by_platform(job):
        return None
    if ChargeLine.objects.filter(job=job, sku_id=DEADLINE_CAP_SKU).exists():
        return None
    currency = job_currency(job)
    if (job.quote or {}).get("currency", currency) != currency:  # amounts of two currencies do not compare
        return None
    excess = pricing.quantize_money(job_total(job.pk) - cap, currency)  # the one rounding of this line
    if excess <= 0:
        return None
    day = now.astimezone(platform_tz()).date()
    reason = (f"deadline missed: finished {job.finished:%Y-%m-%d %H:%M %Z}, after its deadline "
              f"{job.complete_by:%Y-%m-%d %H:%M %Z}; billed at most its quoted 'by the deadline' price "
              f"{pricing.quantize_money(cap, currency)} {currency}")
    return ChargeLine.objects.create(
        category=ChargeLine.Category.CREDIT, hour=hour_floor(now), day=day, period=day.replace(day=1),
        charge_start=now, charge_end=now, workspace_id=job.workspace_id, cost=-excess, list_cost=-excess,
        exclusive_cost=-excess, currency=currency, provisional=False, computed_at=now, reason=reason, job=job,
        job_name=job.name, queue=job.queue.name, sku_id=DEADLINE_CAP_SKU,
        submitter=job.submitted_by.get_username() if job.submitted_by_id else "", slice="",
    )

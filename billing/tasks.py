"""Celery tasks for metering: posting usage to the ledger, budget checks, resending Excel exports
that never reached a worker, and sample retention."""

from celery import shared_task
from django.conf import settings

from billing import services as billing_services
from billing.chargeback import post_due_chargebacks
from billing.idle.services import check_idle_gpus as find_idle_gpus
from billing.ledger.posting import post_ledger
from billing.metering.ingest import purge_samples
from billing.metering.storage import sample_storage
from billing.reports import services as reports_services
from billing.reports.services import check_budgets
from scheduling.api import clock


@shared_task
def post_usage() -> int:
    """Sample this hour's stored bytes (once an hour), recompute the open hours' lines, make the ended
    ones final, post the last month's chargeback once it is final, then check budgets."""
    sample_storage()
    posted = post_ledger()
    post_due_chargebacks()
    check_budgets(workspace_ids=posted.workspace_ids)
    return posted.lines


@shared_task
def resend_waiting_exports() -> int:
    return reports_services.resend_waiting_exports(now=clock.now())


@shared_task
def purge_old_samples() -> int:
    return purge_samples(settings.USAGE_RETENTION_DAYS, now=clock.now())


@shared_task
def check_idle_gpus() -> int:
    """Flag idle GPU slices by their pools' policies, notify, and stop what the policies stop."""
    return len(find_idle_gpus().flagged)


@shared_task
def fire_schedules() -> int:
    """Make the due runs of the workspaces' schedules (each fire time once, even with two workers)."""
    return len(billing_services.fire_schedules().started)

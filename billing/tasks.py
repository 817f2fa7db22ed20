"""Celery tasks for metering: hourly rollups and the retention of raw samples."""

from datetime import timedelta

from celery import shared_task
from django.conf import settings

from billing.rollups import purge_samples, rollup_hours
from scheduling import clock


@shared_task
def rollup_recent_hours() -> int:
    """The current and the previous hour (late samples land in the previous one)."""
    now = clock.now()
    return rollup_hours(now - timedelta(hours=1), now)


@shared_task
def purge_old_samples() -> int:
    return purge_samples(settings.USAGE_RETENTION_DAYS, now=clock.now())

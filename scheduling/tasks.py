"""Celery tasks: the scheduling cycle, one at a time across all workers (a lock in Redis)."""

import logging

import redis
from celery import shared_task
from django.conf import settings

from scheduling.backends import get_backend
from scheduling.cycle.run import run_scheduling_cycle

log = logging.getLogger(__name__)
LOCK_NAME = "gpu-platform:scheduling-cycle"


@shared_task
def scheduling_cycle() -> dict | None:
    client = redis.Redis.from_url(settings.REDIS_URL)
    # The lock expires on its own if the worker holding it dies mid-cycle.
    lock = client.lock(LOCK_NAME, timeout=max(60, settings.SCHEDULER_INTERVAL_S * 10), blocking=False)
    if not lock.acquire():
        log.info("scheduling cycle skipped: another one is running")
        return None
    try:
        return run_scheduling_cycle(get_backend()).__dict__
    finally:
        try:
            lock.release()
        except redis.exceptions.LockError:
            log.warning("scheduling cycle outlived its lock")


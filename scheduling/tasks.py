"""Celery tasks: the scheduling cycle, one at a time across all workers (a lock in Redis; with the Kubernetes
backend also a Lease in the cluster, which holds even when workers see different Redis states)."""

import contextlib
import logging
import threading

import redis
from celery import shared_task
from django.conf import settings

from scheduling import forecast, logs, metrics
from scheduling.backends import get_backend
from scheduling.cycle.run import NoLongerLeading, run_scheduling_cycle

log = logging.getLogger(__name__)
LOCK_NAME = "gpu-platform:scheduling-cycle"
# Short, so a dead worker's lock frees within seconds; the live holder renews it while it runs.
LOCK_TTL_S = 10.0


def cycle_lock(client: redis.Redis, name: str = LOCK_NAME, ttl: float = LOCK_TTL_S):
    # thread_local=False: the renewal thread must see the token the acquiring thread got.
    return client.lock(name, timeout=ttl, blocking=False, thread_local=False)


@contextlib.contextmanager
def renewed(lock, every: float | None = None):
    """Keep resetting `lock`'s TTL from a background thread while the block runs."""
    stop = threading.Event()
    every = every if every is not None else lock.timeout / 3

    def renew():
        while not stop.wait(every):
            try:
                lock.reacquire()
            except redis.exceptions.LockError:
                log.warning("scheduling cycle lost its lock")
                return
            except redis.exceptions.RedisError as exc:
                log.warning("scheduling cycle lock renewal failed: %s", exc)  # try again next tick

    thread = threading.Thread(target=renew, name="cycle-lock-renewal", daemon=True)
    thread.start()
    try:
        yield lock
    finally:
        stop.set()
        thread.join()


def holds(lock) -> bool:
    """Whether the lock in Redis still carries this worker's token (no answer: assume not)."""
    try:
        return lock.owned()
    except redis.exceptions.RedisError as exc:
        log.warning("scheduling cycle cannot confirm its lock: %s", exc)
        return False


def still_leading(lock, backend) -> bool:
    """The Redis lock, and with the Kubernetes backend also the Lease, are still this worker's."""
    if not holds(lock):
        return False
    return settings.SCHEDULER_BACKEND != "kubernetes" or backend.leader.held()


def leading(backend):
    """The Kubernetes backend's Lease, held for the cycle; other backends lead always."""
    if settings.SCHEDULER_BACKEND == "kubernetes":
        return backend.leader.leading()
    return contextlib.nullcontext(True)


@shared_task
def scheduling_cycle() -> dict | None:
    # Timeouts: a Redis that stopped answering must not hang the worker.
    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=5, socket_timeout=5)
    lock = cycle_lock(client)
    try:
        acquired = lock.acquire()
    except redis.exceptions.RedisError as exc:
        # No lock, no cycle: wait for Redis (the next beat tick tries again) rather than fail.
        log.warning("scheduling cycle skipped: its lock is unreachable (%s)", exc)
        return None
    if not acquired:
        log.debug("scheduling cycle skipped: another one is running")  # routine when cycles overlap
        return None
    try:
        with renewed(lock):
            backend = get_backend()
            with leading(backend) as leads:
                if not leads:
                    log.info("scheduling cycle skipped: another worker holds the lease")
                    return None
                try:
                    report = run_scheduling_cycle(backend, still_leading=lambda: still_leading(lock, backend))
                except NoLongerLeading as exc:
                    log.warning("%s: its decisions were rolled back", exc)
                    return None
            metrics.record_cycle(report)
            return report.__dict__
    finally:
        try:
            lock.release()
        except redis.exceptions.LockError:
            log.warning("scheduling cycle outlived its lock")
        except redis.exceptions.RedisError as exc:  # the lock expires by itself
            log.warning("scheduling cycle could not release its lock: %s", exc)


@shared_task
def purge_old_job_logs() -> int:
    """Replica logs past JOB_LOG_RETENTION_DAYS."""
    return logs.purge_expired_logs()


@shared_task
def keep_first_forecasts() -> int:
    """Pending jobs' first expected starts, kept for the forecast's calibration."""
    return forecast.keep_first_forecasts()

from celery import shared_task


@shared_task
def add(x: int, y: int) -> int:
    """A trivial task that proves the worker and the result store work."""
    return x + y


@shared_task
def demo_load() -> int | None:
    """One more demo job (make run's trickle; off with DEMO_LOAD=0)."""
    from portal.demo.load import submit_demo_job

    job = submit_demo_job()
    return job.pk if job else None


@shared_task
def sample_queue_allocation() -> int:
    """Every queue's allocation, deserved quota and fair share now, for the console's 7-day chart."""
    from portal.console.services import record_queue_allocation

    return record_queue_allocation()


@shared_task
def purge_queue_allocation_history() -> int:
    """Queue allocation samples past QUEUE_HISTORY_RETENTION_DAYS."""
    from portal.console.services import purge_queue_allocation_samples

    return purge_queue_allocation_samples()

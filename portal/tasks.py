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

from celery import shared_task


@shared_task
def add(x: int, y: int) -> int:
    """A trivial task that proves the worker and the result store work."""
    return x + y

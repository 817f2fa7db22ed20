"""Work handed to the Celery workers by task name.

A service that needs a task run sends its name: task modules import services, never the reverse.
With the broker away nothing is lost: the caller keeps the work queued in the database and its
beat task sends it again, so the request that asked for it still gets its answer.
"""

from __future__ import annotations

import logging

from celery import current_app

log = logging.getLogger(__name__)


def send_task(name: str, *args) -> bool:
    """Send task `name` with `args`; False when the broker could not take it."""
    try:
        current_app.send_task(name, args=list(args))
    except Exception as error:  # kombu, redis and Celery's result store each raise their own
        log.warning("%s%r waits for the task broker: %s", name, args, error)
        return False
    return True

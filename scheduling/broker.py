"""Work handed to the Celery workers by task name.

A service that needs a task run sends its name: task modules import services, never the reverse.
With the broker away nothing is lost: the caller keeps the work queued in the database and its
beat task sends it again, so the request that asked for it still gets its answer.
"""

from __future__ import annotations

import logging

from celery import current_app

log = logging.getLogger(__name__)


def send_task(name: str, *args, task_id: str | None = None) -> bool:
    """Send task `name` with `args` (under `task_id`, to revoke it later); False when the broker could not
    take it."""
    try:
        current_app.send_task(name, args=list(args), task_id=task_id)
    except Exception as error:  # kombu, redis and Celery's result store each raise their own
        log.warning("%s%r waits for the task broker: %s", name, args, error)
        return False
    return True


def revoke_task(task_id: str) -> bool:
    """Tell the workers to drop task `task_id` if it has not started (a started one is stopped by its own
    checks, never killed); False when the broker could not take the message."""
    try:
        current_app.control.revoke(task_id)
    except Exception as error:  # as in send_task
        log.warning("revoking task %s waits for the task broker: %s", task_id, error)
        return False
    return True

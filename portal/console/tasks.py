"""Celery tasks of the operator console: the capacity planner's replays."""

from __future__ import annotations

from celery import shared_task

from portal.console.planner_services import execute_run, refresh_savings


@shared_task
def run_planner(run_id: int) -> bool:
    """Replay one queued planner run (portal/console/planner_services.py); a duplicate finds it taken."""
    return execute_run(run_id)


@shared_task
def refresh_pool_savings() -> int:
    """The operator dashboard's GPUs saved by the pool against silos, from the replay of the last 30 days."""
    return refresh_savings().pk

"""Celery tasks of the notification system (listed in CELERY_IMPORTS)."""

from __future__ import annotations

from celery import shared_task

from portal.notifications import services
from scheduling.api import clock


@shared_task
def send_notification_emails(notification_ids: list[int]) -> int:
    return services.send_emails(notification_ids)


@shared_task(bind=True, max_retries=None)
def deliver_webhook(self, delivery_id: str) -> str:
    """One attempt; a failure is tried again after the backoff (services.backoff_s) until
    WEBHOOK_MAX_ATTEMPTS. Each delivery is its own task: a failing webhook holds up no other."""
    attempt = services.attempt_delivery(delivery_id)
    if attempt.retry_in is not None:
        raise self.retry(countdown=attempt.retry_in)
    return attempt.state


@shared_task
def resend_waiting_notifications() -> list[int]:
    """E-mails and webhook deliveries whose task never reached a worker (the broker was away)."""
    return list(services.resend_waiting(now=clock.now()))

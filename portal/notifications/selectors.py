"""Reads: a user's choices and notifications, a workspace's webhook; each scoped to its owner."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import QuerySet

from portal.models import Notification, NotificationEvent, NotificationPreference, Webhook, WebhookDelivery


@dataclass(frozen=True)
class Channels:
    email: bool
    in_app: bool


E = NotificationEvent
# Without a choice of their own: in the app always; e-mail for what needs acting on (a failure, money,
# idle GPUs), which is also what was e-mailed before users could choose.
DEFAULT_CHANNELS = {
    E.JOB_STARTED: Channels(email=False, in_app=True),
    E.JOB_FINISHED: Channels(email=False, in_app=True),
    E.JOB_FAILED: Channels(email=True, in_app=True),
    E.BUDGET_ALERT: Channels(email=True, in_app=True),
    E.IDLE_NOTICE: Channels(email=True, in_app=True),
    E.JOB_DEADLINE: Channels(email=True, in_app=True),
}


def channels_for(user_ids: Iterable[int], events: Iterable[str]) -> dict[tuple[int, str], Channels]:
    """(user id, event) -> how that user is told, for every pair asked: one query."""
    user_ids, events = set(user_ids), set(events)
    chosen = {(p.user_id, p.event): Channels(email=p.email, in_app=p.in_app)
              for p in NotificationPreference.objects.filter(user_id__in=user_ids, event__in=events)}
    return {(u, e): chosen.get((u, e), DEFAULT_CHANNELS[e]) for u in user_ids for e in events}


def choices_of(user) -> list[tuple[str, str, Channels]]:
    """(event, label, channels) for every event, the user's choice or the default."""
    chosen = channels_for([user.pk], E.values)
    return [(event, label, chosen[(user.pk, event)]) for event, label in E.choices]


def notifications_of(user) -> QuerySet[Notification]:
    """The user's in-app notifications, newest first."""
    return Notification.objects.filter(user=user, in_app=True).select_related("workspace")


def unread_count(user) -> int:
    return Notification.objects.filter(user=user, in_app=True, read__isnull=True).count()


def webhook_of(workspace) -> Webhook | None:
    return Webhook.objects.filter(workspace=workspace).first()


def recent_deliveries(webhook: Webhook | None, limit: int = 20) -> list[WebhookDelivery]:
    if webhook is None:
        return []
    return list(webhook.deliveries.order_by("-created", "-id")[:limit])

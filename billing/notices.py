"""What billing tells people (a budget threshold crossed, a job holding idle GPUs), without
importing the portal, which delivers it.

`raise_notice` sends `notice_raised`; the portal connects it in its AppConfig.ready and delivers the
notice through its one notification system: by each recipient's choices (e-mail, in-app) and to
the workspace's webhook. With no receiver (billing alone), billing e-mails the recipients itself.

A notice's `subject` and `body` are English (the webhook's and the logs' record); `render` writes them
again in the active language, so the portal tells each recipient in their own (`written_in_english`
makes both from one function).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.dispatch import Signal
from django.utils import translation

log = logging.getLogger(__name__)

# Sent with `notice`; a receiver returns True once it has taken the notice over.
notice_raised = Signal()


@dataclass(frozen=True)
class Notice:
    """One thing to tell some users of a workspace: `event` is a notification event name
    (portal.models.NotificationEvent, e.g. "budget.alert"), `data` what a webhook receives, `render`
    (subject, body) in the active language (None: `subject` and `body` in every language)."""

    event: str
    workspace: Any
    users: tuple
    subject: str
    body: str
    link: str = ""
    data: dict = field(default_factory=dict)
    render: Callable[[], tuple[str, str]] | None = field(default=None, compare=False, repr=False)


def written_in_english(render: Callable[[], tuple[str, str]]) -> dict[str, Any]:
    """A Notice's subject, body and render from one function that writes (subject, body) in the active
    language: subject and body are its English."""
    with translation.override("en"):
        subject, body = render()
    return {"subject": subject, "body": body, "render": render}


def mail_subject(subject: str) -> str:
    """An e-mail's subject: the notice's, after the platform's name (the app shows the notice's alone)."""
    return f"[{settings.PLATFORM_NAME}] {subject}"


def budget_recipients(workspace) -> tuple:
    """Its owners and finance members: who is told of its budget and its account's credit."""
    members = workspace.memberships.select_related("user").order_by("user__username")
    return tuple(m.user for m in members if m.can_manage_budget)


def raise_notice(notice: Notice) -> None:
    answers = notice_raised.send(sender=None, notice=notice)
    if any(taken for _, taken in answers):
        return
    recipients = sorted({user.email for user in notice.users if user.email})
    if not recipients:
        return
    try:
        send_mail(mail_subject(notice.subject), notice.body, settings.DEFAULT_FROM_EMAIL, recipients)
    except Exception:  # a mail server away must not fail the check that raised the notice
        log.exception("notice %r could not be e-mailed", notice.subject)

"""Writes of the notification system: deliver notices, send e-mails, call webhooks, keep choices."""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.mail import send_mail
from django.core.serializers.json import DjangoJSONEncoder
from django.core.validators import URLValidator
from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext

from billing.api import Notice, mail_subject, written_in_english
from portal import history_catalogue as texts
from portal.console import audit
from portal.console.models import AuditEntry
from portal.models import (
    Membership,
    Notification,
    NotificationEvent,
    NotificationPreference,
    UserPreference,
    Webhook,
    WebhookDelivery,
)
from portal.notifications import selectors, signing
from scheduling.api import DomainError, clock, history_texts, outbound, said, send_task

log = logging.getLogger(__name__)

PING = "ping"  # the test event an owner sends from the webhook page
USER_AGENT = "gpu-platform-webhook/1"
EMAIL_RESEND_AFTER = timedelta(minutes=2)
WEBHOOK_RESEND_AFTER = timedelta(minutes=5)
# The tasks (portal/notifications/tasks.py), sent by name; with the broker away the work waits in the
# database and the beat (`resend_waiting`) sends it again.
SEND_EMAILS = "portal.notifications.tasks.send_notification_emails"
DELIVER_WEBHOOK = "portal.notifications.tasks.deliver_webhook"


# --------------------------------------------------------------------------- delivering notices


def notify(notices: Sequence[Notice], *, email_now: bool = False) -> list[Notification]:
    """One Notification per recipient who wants it in the app or by e-mail (inactive accounts
    never), and one WebhookDelivery per notice whose workspace has an active webhook.

    E-mails go out from a task after commit, or here and now with `email_now` (billing's notices,
    which were always sent at once). Webhooks always go out from a task after commit.

    Each recipient's notification (in the app and by e-mail) is written in their language (their
    preference, else the platform's LANGUAGE_CODE); the webhook gets the notice's English."""
    if not notices:
        return []
    users = {u.pk: u for n in notices for u in n.users if u is not None and u.is_active}
    chosen = selectors.channels_for(users, {n.event for n in notices})
    languages, zones = _languages(users), _time_zones(users)
    rows, now = [], clock.now()  # one time for all: the rows of a notice are e-mailed together
    for notice in notices:
        written: dict[tuple[str, str], tuple[str, str]] = {}
        for user_id in dict.fromkeys(u.pk for u in notice.users if u is not None and u.pk in users):
            user, channels = users[user_id], chosen[(user_id, notice.event)]
            wants_mail = channels.email and bool(user.email)
            if channels.in_app or wants_mail:
                reader = (languages.get(user_id, settings.LANGUAGE_CODE), zones.get(user_id, settings.TIME_ZONE))
                if reader not in written:
                    written[reader] = _written_in(notice, *reader)
                subject, body = written[reader]
                rows.append(Notification(
                    user=user, workspace=notice.workspace, event=notice.event, created=now, subject=subject[:300],
                    body=body, link=notice.link[:200], in_app=channels.in_app,
                    email_state=Notification.EmailState.PENDING if wants_mail else Notification.EmailState.NONE))
    Notification.objects.bulk_create(rows)
    to_mail = [r.pk for r in rows if r.email_state == Notification.EmailState.PENDING]
    if to_mail and email_now:
        send_emails(to_mail)
    elif to_mail:
        transaction.on_commit(lambda: send_task(SEND_EMAILS, to_mail))
    _queue_webhooks(notices)
    return rows


def _languages(users: Mapping[int, object]) -> dict[int, str]:
    """Each user's chosen language (those who chose one), in one query."""
    known = dict(settings.LANGUAGES)
    chosen = UserPreference.objects.filter(user_id__in=list(users)).exclude(language="").values_list("user_id", "language")
    return {user_id: language for user_id, language in chosen if language in known}


def _time_zones(users: Mapping[int, object]) -> dict[int, str]:
    """Each user's chosen time zone (those who chose one), in one query."""
    chosen = UserPreference.objects.filter(user_id__in=list(users)).exclude(time_zone="").values_list("user_id", "time_zone")
    return dict(chosen)


def _written_in(notice: Notice, language: str, zone: str = "") -> tuple[str, str]:
    """The notice's subject and body in `language`, its times in `zone`; as they are when the notice cannot
    say them again."""
    if notice.render is None:
        return notice.subject, notice.body
    try:
        with translation.override(language), timezone.override(zone or settings.TIME_ZONE):
            return notice.render()
    except Exception:  # a notice that cannot be written again is still told, in English
        log.exception("notice %r not written in %s", notice.subject, language)
        return notice.subject, notice.body


def send_emails(notification_ids: Sequence[int]) -> int:
    """E-mail the notifications still to send: one message per notice to all its recipients.
    Each is claimed before it is sent, so a resent task never mails twice. Returns messages sent."""
    pending = (Notification.objects.filter(pk__in=list(notification_ids), email_state=Notification.EmailState.PENDING)
               .select_related("user").order_by("pk"))
    groups: dict[tuple, list[Notification]] = defaultdict(list)
    for row in pending:
        groups[(row.event, row.workspace_id, row.subject, row.body, row.created)].append(row)
    sent = 0
    for (_, _, subject, body, _), rows in groups.items():
        pks = [r.pk for r in rows]
        if not Notification.objects.filter(pk__in=pks, email_state=Notification.EmailState.PENDING).update(
                email_state=Notification.EmailState.SENT):
            continue
        try:
            send_mail(mail_subject(subject), _with_link(body, rows[0].link), settings.DEFAULT_FROM_EMAIL,
                      sorted({r.user.email for r in rows}))
            sent += 1
        except Exception:  # the mail server away: these are lost, the next ones may go
            log.exception("notification e-mail %r could not be sent", subject)
            Notification.objects.filter(pk__in=pks).update(email_state=Notification.EmailState.FAILED)
    return sent


def _with_link(body: str, link: str) -> str:
    if not link or not settings.PORTAL_URL or link in body:
        return body
    return f"{body.rstrip()}\n\n{settings.PORTAL_URL.rstrip('/')}{link}\n"


def resend_waiting(*, now: datetime) -> tuple[int, int]:
    """E-mails and webhook deliveries whose task never reached a worker: sent again. Returns how
    many of each."""
    mails = list(Notification.objects.filter(email_state=Notification.EmailState.PENDING,
                                             created__lt=now - EMAIL_RESEND_AFTER).values_list("pk", flat=True))
    if mails:
        send_task(SEND_EMAILS, mails)
    hooks = list(WebhookDelivery.objects.filter(state=WebhookDelivery.State.PENDING,
                                                next_attempt__lt=now - WEBHOOK_RESEND_AFTER)
                 .values_list("pk", flat=True)[:1000])
    for pk in hooks:
        send_task(DELIVER_WEBHOOK, str(pk))
    return len(mails), len(hooks)


# --------------------------------------------------------------------------- job events


KIND_EVENTS = {"running": NotificationEvent.JOB_STARTED, "succeeded": NotificationEvent.JOB_FINISHED,
               "cancelled": NotificationEvent.JOB_FINISHED, "failed": NotificationEvent.JOB_FAILED,
               "deadline_missed": NotificationEvent.JOB_DEADLINE}
# Per event: the subject and the body's first line (msgids); job states stay as they are (identifiers).
JOB_TEXTS = {
    NotificationEvent.JOB_STARTED: (texts.STARTED_SUBJECT, texts.STARTED_BODY),
    NotificationEvent.JOB_FINISHED: (texts.ENDED_SUBJECT, texts.ENDED_BODY),
    NotificationEvent.JOB_FAILED: (texts.FAILED_SUBJECT, texts.FAILED_BODY),
    NotificationEvent.JOB_DEADLINE: (texts.DEADLINE_SUBJECT, texts.DEADLINE_BODY),
}


def _job_texts(event: str, figures: dict, reason: str, said=None) -> tuple[str, str]:
    """A job notice's subject and body in the active language, the event's reason too (its stored English
    when it was written before what was said was kept)."""
    subject, first = JOB_TEXTS[event]
    reason = history_texts.text(said, reason)
    figures = {**figures, "time": _local_time(figures["time"])}
    return gettext(subject) % figures, gettext(first) % figures + "\n" + (f"{reason}\n" if reason else "")


def job_notices(events: Sequence[tuple], *, now: datetime) -> list[Notice]:
    """The notices for committed job events ((job, message) pairs): a job started, ended or failed,
    told to its submitter while they are a member of its workspace (a person, not a service account), and to
    that workspace's webhook.
    An event older than NOTIFY_STALE_AFTER_S is no news (a replayed month, a catch-up after an outage)."""
    from scheduling.models import Job

    stale_before = now - timedelta(seconds=settings.NOTIFY_STALE_AFTER_S)
    wanted = [(job.pk, message) for job, message in events
              if message.get("kind") in KIND_EVENTS and _time(message) >= stale_before]
    if not wanted:
        return []
    jobs = Job.objects.select_related("workspace", "submitted_by").in_bulk({pk for pk, _ in wanted})
    # a service account's jobs are told to the webhook only: no one reads its notices
    members = set(Membership.objects.filter(workspace_id__in={j.workspace_id for j in jobs.values()},
                                            user_id__in={j.submitted_by_id for j in jobs.values()},
                                            user__service_account__isnull=True)
                  .values_list("workspace_id", "user_id"))
    notices = []
    for pk, message in wanted:
        job = jobs.get(pk)
        if job is None:
            continue
        event = KIND_EVENTS[message["kind"]]
        submitter = job.submitted_by if (job.workspace_id, job.submitted_by_id) in members else None
        state, reason = message.get("state", job.state), message.get("reason", "")
        figures = {"platform": settings.PLATFORM_NAME, "name": job.name, "job": job.pk,
                   "workspace": job.workspace.slug, "time": message.get("time", ""), "state": state}
        notices.append(Notice(
            event=event, workspace=job.workspace, users=(submitter,) if submitter else (),
            **written_in_english(partial(_job_texts, event, figures, reason, message.get("said"))),
            link=f"/jobs/{job.pk}/",
            data={"job": job.pk, "name": job.name, "state": state, "kind": message["kind"], "reason": reason,
                  "time": message.get("time"), "submitted_by": job.submitted_by.username if job.submitted_by else None}))
    return notices


def _local_time(iso: str) -> str:
    """An event's time as the reader reads times: in the active zone, to the minute, the zone named."""
    try:
        moment = datetime.fromisoformat(iso)
    except (TypeError, ValueError):
        return iso or ""
    return f"{timezone.localtime(moment):%Y-%m-%d %H:%M %Z}"


def _time(message: Mapping) -> datetime:
    try:
        return datetime.fromisoformat(message["time"])
    except (KeyError, TypeError, ValueError):
        return clock.now()


# --------------------------------------------------------------------------- webhooks


@dataclass(frozen=True)
class Attempt:
    state: str
    retry_in: float | None = None  # seconds until the next try, when there is one


def _queue_webhooks(notices: Sequence[Notice]) -> None:
    ids = {n.workspace.pk for n in notices if n.workspace is not None}
    hooks = {h.workspace_id: h for h in Webhook.objects.filter(workspace_id__in=ids, active=True)}
    deliveries = [_delivery(hooks[n.workspace.pk], n.event, n.workspace.slug, n.subject, n.link, n.data)
                  for n in notices if n.workspace is not None and n.workspace.pk in hooks]
    if deliveries:
        WebhookDelivery.objects.bulk_create(deliveries)
        pks = [str(d.pk) for d in deliveries]
        transaction.on_commit(lambda: [send_task(DELIVER_WEBHOOK, pk) for pk in pks])


def _delivery(hook: Webhook, event: str, workspace_slug: str, subject: str, link: str, data: dict) -> WebhookDelivery:
    now = clock.now()
    delivery = WebhookDelivery(webhook=hook, event=event, created=now, next_attempt=now)
    body = {"id": str(delivery.pk), "event": event, "time": now.isoformat(), "workspace": workspace_slug,
            "subject": subject, "url": f"{settings.PORTAL_URL.rstrip('/')}{link}" if link else "", "data": data}
    delivery.body = json.dumps(body, cls=DjangoJSONEncoder, separators=(",", ":"), sort_keys=True)
    return delivery


def backoff_s(attempts: int) -> float:
    """Seconds to wait after the `attempts`-th failure: 30 s, 1 min, 2 min, 4 min... (doubling)."""
    return settings.WEBHOOK_RETRY_BASE_S * 2 ** (attempts - 1)


def attempt_delivery(delivery_id) -> Attempt:
    """POST the delivery's body, signed, once, through the outbound client (never to an inside address).
    A 2xx delivers it; anything else (a status, a redirect, a timeout, no connection) is retried with
    backoff until WEBHOOK_MAX_ATTEMPTS; an inside address is refused for good. The owner is told only
    "delivered", "failed" or "refused"."""
    delivery = (WebhookDelivery.objects.select_related("webhook")
                .filter(pk=delivery_id, state=WebhookDelivery.State.PENDING).first())
    if delivery is None:  # delivered, given up, or its webhook removed
        return Attempt("gone")
    hook, body = delivery.webhook, delivery.body.encode()
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT,
               signing.SIGNATURE_HEADER: signing.signature(hook.secret, body),
               signing.EVENT_HEADER: delivery.event, signing.DELIVERY_HEADER: str(delivery.pk)}
    status, error = None, ""
    try:
        status = outbound.post(hook.url, content=body, headers=headers, timeout=settings.WEBHOOK_TIMEOUT_S).status_code
        if not 200 <= status < 300:  # a redirect too: it is not followed
            error = WebhookDelivery.FAILED_ANSWER
    except outbound.Refused as refused:  # an inside address, now: refused for good, nothing sent
        log.warning("webhook %s of %s refused: %s", hook.pk, delivery.pk, refused)
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            attempts=delivery.attempts + 1, last_status=None, last_error=WebhookDelivery.REFUSED,
            state=WebhookDelivery.State.FAILED, next_attempt=None)
        return Attempt(WebhookDelivery.State.FAILED)
    except Exception as exc:  # timed out, no connection: this delivery's failure, never the caller's
        # how it failed goes to the operator's log only: told to the owner it would make a port scanner of us
        log.info("webhook %s of %s failed: %s", hook.pk, delivery.pk, f"{type(exc).__name__}: {exc}"[:300])
        error = WebhookDelivery.FAILED_ANSWER
    now = clock.now()
    attempts = delivery.attempts + 1
    fields = {"attempts": attempts, "last_status": status, "last_error": error}
    if not error:
        fields.update(state=WebhookDelivery.State.DELIVERED, delivered=now, next_attempt=None)
        outcome = Attempt(WebhookDelivery.State.DELIVERED)
    elif attempts >= settings.WEBHOOK_MAX_ATTEMPTS:
        fields.update(state=WebhookDelivery.State.FAILED, next_attempt=None)
        outcome = Attempt(WebhookDelivery.State.FAILED)
        log.warning("webhook %s gave up on %s after %d attempts (last status %s)", hook.pk, delivery.pk, attempts,
                    status)
    else:
        wait = backoff_s(attempts)
        fields.update(next_attempt=now + timedelta(seconds=wait))
        outcome = Attempt(WebhookDelivery.State.PENDING, retry_in=wait)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(**fields)
    return outcome


_url_check = URLValidator(schemes=["http", "https"])


def _clean_url(url: str) -> str:
    url = (url or "").strip()
    max_length = Webhook._meta.get_field("url").max_length
    if not url:
        raise DomainError(gettext("give the URL the events are posted to"), field="url")
    if len(url) > max_length or "\x00" in url:
        raise DomainError(gettext("at most %(characters)s characters") % {"characters": max_length}, field="url")
    try:
        _url_check(url)
    except ValidationError:
        raise DomainError(gettext("an http:// or https:// URL, e.g. https://example.com/hooks/gpu"), field="url") from None
    if urlsplit(url).username or urlsplit(url).password:
        raise DomainError(gettext("put no user or password in the URL: the signature proves who sends"), field="url")
    try:
        outbound.check_url(url)
    except outbound.Refused as refused:
        log.info("webhook URL refused: %s", refused)
        raise DomainError(gettext("the platform does not call this address: its host is (or resolves to) a "
                                  "loopback, private, link-local or reserved address, or does not resolve; "
                                  "give a public URL"), field="url") from None
    return url


def _require_owner(user, workspace) -> None:
    membership = Membership.objects.filter(user=user, workspace=workspace).first()
    if membership is None or not membership.can_manage_members:
        raise PermissionDenied(gettext("only an owner of %(workspace)s manages its webhook") % {"workspace": workspace.slug})


@transaction.atomic
def save_webhook(user, workspace, url: str, *, active: bool = True) -> tuple[Webhook, str | None]:
    """Set the workspace's webhook URL. A new webhook gets a secret, returned once (None after)."""
    _require_owner(user, workspace)
    url = _clean_url(url)
    hook = Webhook.objects.select_for_update().filter(workspace=workspace).first()
    if hook is None:
        hook = Webhook.objects.create(workspace=workspace, url=url, active=active, secret=Webhook.new_secret())
        audit.record(user, "create", hook, changes={"url": [None, url], "active": [None, active]},
                     source=AuditEntry.Source.TENANT)
        return hook, hook.secret
    changes = audit.diff({"url": hook.url, "active": hook.active}, {"url": url, "active": active})
    if changes:
        hook.url, hook.active = url, active
        hook.save(update_fields=["url", "active"])
        audit.record(user, "change", hook, changes=changes, source=AuditEntry.Source.TENANT)
    return hook, None


@transaction.atomic
def new_webhook_secret(user, workspace) -> str:
    """A new secret for the workspace's webhook: deliveries from now on are signed with it."""
    _require_owner(user, workspace)
    hook = Webhook.objects.select_for_update().filter(workspace=workspace).first()
    if hook is None:
        raise DomainError(gettext("the workspace has no webhook yet"), field="url")
    hook.secret = Webhook.new_secret()
    hook.save(update_fields=["secret"])
    audit.record(user, "change", hook, message=said(texts.NEW_SIGNING_SECRET),
                 source=AuditEntry.Source.TENANT)
    return hook.secret


@transaction.atomic
def remove_webhook(user, workspace) -> None:
    _require_owner(user, workspace)
    hook = Webhook.objects.select_for_update().filter(workspace=workspace).first()
    if hook is not None:
        audit.record(user, "delete", hook, changes={"url": [hook.url, None]}, source=AuditEntry.Source.TENANT)
        hook.delete()


def ping_webhook(user, workspace) -> WebhookDelivery:
    """A test event to the workspace's webhook, delivered like any other."""
    _require_owner(user, workspace)
    hook = selectors.webhook_of(workspace)
    if hook is None:
        raise DomainError(gettext("the workspace has no webhook yet"), field="url")
    delivery = _delivery(hook, PING, workspace.slug, f"Test event from {workspace.slug}", "",
                         {"sent_by": user.username})
    delivery.save()
    transaction.on_commit(lambda: send_task(DELIVER_WEBHOOK, str(delivery.pk)))
    return delivery


# --------------------------------------------------------------------------- choices and reading


def save_choices(user, data: Mapping[str, str]) -> None:
    """Every event's e-mail and in-app choice from a form: `<event>:email`, `<event>:in_app`
    checkboxes (absent: off)."""
    unknown = [key for key in data if key.rsplit(":", 1)[0] not in NotificationEvent.values
               and key not in ("csrfmiddlewaretoken",)]
    if unknown:
        raise DomainError(gettext("unknown choice %(choice)s") % {"choice": repr(unknown[0][:60])}, field="")
    with transaction.atomic():
        for event in NotificationEvent.values:
            NotificationPreference.objects.update_or_create(
                user=user, event=event,
                defaults={"email": data.get(f"{event}:email") == "on", "in_app": data.get(f"{event}:in_app") == "on"})


def mark_read(user, which: str) -> int:
    """Mark one of the user's notifications ("<id>") or all of them ("all") read."""
    unread = Notification.objects.filter(user=user, in_app=True, read__isnull=True)
    if which != "all":
        if not which.isdigit() or len(which) > 18:
            raise DomainError(gettext("%(which)s is not a notification") % {"which": repr(which[:30])}, field="read")
        unread = unread.filter(pk=int(which))
    return unread.update(read=clock.now())

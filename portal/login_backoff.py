"""Failed sign-ins slow the account down rather than lock it: after LOGIN_BACKOFF_FREE_FAILURES
failures, the account waits LOGIN_BACKOFF_BASE_S, and each further failure doubles the wait, up to
LOGIN_BACKOFF_MAX_S. A try within the wait is refused without reading the password, so it neither
counts nor extends the wait; the right password from anywhere gets in once the wait is over, and a
success forgets the failures (so does LOGIN_BACKOFF_RESET_S without one). An attacker can make the
owner wait at most LOGIN_BACKOFF_MAX_S at a time, never lock them out for long.

Both sign-in forms (/login/ and /admin/login/) go through django.contrib.auth.authenticate, so both are
covered by the backend and the signal receivers here; every failure is written to the audit log, with
the client's address and never the password.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.shortcuts import render

from portal.models import LoginBackoff
from portal.ratelimit import client_address
from scheduling.api import clock

REFUSED = "_login_backoff_refused"  # set on the request: refused within a wait, the password unread
WAIT = "login_backoff_wait"  # set on the request: the seconds the account must now wait


def wait_seconds(username: str, now: datetime) -> int | None:
    """The whole seconds left of the account's wait, or None when it may try."""
    until = LoginBackoff.objects.filter(username=username, retry_after__gt=now).values_list(
        "retry_after", flat=True).first()
    return max(1, math.ceil((until - now).total_seconds())) if until else None


def delay_after(failures: int) -> int:
    """The wait after the `failures`th failure in a row (0: none yet)."""
    over = failures - settings.LOGIN_BACKOFF_FREE_FAILURES
    if over < 0:
        return 0
    return min(settings.LOGIN_BACKOFF_MAX_S, settings.LOGIN_BACKOFF_BASE_S * 2 ** min(over, 32))


def record_failure(username: str, now: datetime) -> int | None:
    """Count one failure; the seconds the account must now wait, or None. Rows past their reset time
    (names tried once and never again) are dropped on the way: the table stays small."""
    forgotten = now - timedelta(seconds=settings.LOGIN_BACKOFF_RESET_S)
    LoginBackoff.objects.filter(last_failure__lt=forgotten).exclude(username=username).delete()
    with transaction.atomic():
        row, _ = LoginBackoff.objects.select_for_update().get_or_create(
            username=username, defaults={"last_failure": now})
        if now - row.last_failure >= timedelta(seconds=settings.LOGIN_BACKOFF_RESET_S):
            row.failures = 0
        row.failures += 1
        row.last_failure = now
        delay = delay_after(row.failures)
        row.retry_after = now + timedelta(seconds=delay) if delay else None
        row.save(update_fields=["failures", "last_failure", "retry_after"])
    return delay or None


def forget(username: str) -> None:
    LoginBackoff.objects.filter(username=username).delete()


class LoginBackoffBackend:
    """First of AUTHENTICATION_BACKENDS: within the account's wait, stop authenticate() before any
    backend reads the password (PermissionDenied ends it, and Django then sends user_login_failed)."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None or not username:
            return None
        if (wait := wait_seconds(username, clock.now())) is not None:
            setattr(request, REFUSED, True)
            setattr(request, WAIT, wait)
            raise PermissionDenied
        return None
    # no get_user: it never signs anyone in (and force_login picks the first backend that has one)


def on_login_failed(sender, credentials, request=None, **kwargs) -> None:
    from portal.console import audit

    username = str(credentials.get("username") or "")[:150]
    if request is None or not username:
        return
    refused = getattr(request, REFUSED, False)
    if not refused and (wait := record_failure(username, clock.now())) is not None:
        setattr(request, WAIT, wait)
    audit.record_failed_login(get_user_model().objects.filter(username=username).first(), username,
                              client_address(request), request.path_info, refused=refused)


def on_logged_in(sender, request=None, user=None, **kwargs) -> None:
    if user is not None:
        forget(user.get_username())


class LoginBackoffMiddleware:
    """A sign-in refused or failed into a wait answers 429 with Retry-After and the styled page."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (wait := getattr(request, WAIT, None)) is not None:
            response = render(request, "registration/locked_out.html", {"wait": wait}, status=429)
            response["Retry-After"] = str(wait)
        return response

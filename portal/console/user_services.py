"""The console's writes on user accounts: create, deactivate or reactivate, reset a password, end its
sessions, anonymise a departed person.

Each checks its input (ConsoleError names the field, nothing is changed), writes in one transaction
and records who changed what in the audit log. Accounts are never deleted: a deactivated user keeps
their memberships, jobs and charges, and can no longer log in or use an API token.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext

from portal import history_catalogue as texts
from portal import user_sessions
from portal.console import audit
from portal.console.services import ConsoleError
from portal.models import ServiceAccount
from scheduling.api import said

USER_FIELDS = ("username", "email", "is_staff", "is_active")


def _password_errors(password: str, user) -> list[str]:
    try:
        validate_password(password, user)
    except ValidationError as error:
        return list(error.messages)
    return []


def new_user_errors(*, username: str, email: str = "", password: str, is_staff: bool = False) -> dict[str, list[str]]:
    """What is wrong with a new account, by field (empty: nothing)."""
    User = get_user_model()
    username = (username or "").strip()
    errors: dict[str, list[str]] = {}
    if not username:
        errors["username"] = [gettext("a username is required")]
    elif User.objects.filter(username__iexact=username).exists():
        errors["username"] = [gettext("a user named '%(user)s' exists") % {"user": username}]
    if not password:
        errors["password"] = [gettext("an initial password is required")]
    elif problems := _password_errors(password, User(username=username, email=(email or "").strip())):
        errors["password"] = problems
    return errors


@transaction.atomic
def create_user(actor, *, username: str, email: str, password: str, is_staff: bool = False):
    """A new active account with an initial password that passes the site's password validators."""
    if errors := new_user_errors(username=username, email=email, password=password, is_staff=is_staff):
        raise ConsoleError(errors)
    user = get_user_model()(username=username.strip(), email=(email or "").strip(), is_staff=is_staff)
    user.set_password(password)
    user.save()
    audit.record(actor, "create", user, changes={k: [None, v] for k, v in audit.snapshot(user, USER_FIELDS).items()})
    return user


@transaction.atomic
def set_active(actor, user, active: bool):
    """Deactivate (cannot log in any more; history kept) or reactivate an account."""
    user = get_user_model().objects.select_for_update().get(pk=user.pk)
    if not active and user.pk == actor.pk:
        raise ConsoleError({"": [gettext("you cannot deactivate your own account")]})
    if user.is_active != active:
        user.is_active = active
        user.save(update_fields=["is_active"])
        audit.record(actor, "reactivate" if active else "deactivate", user, changes={"is_active": [not active, active]})
    return user


@transaction.atomic
def reset_password(actor, user, password: str):
    """Set a new password (checked by the site's password validators); the old one stops working."""
    user = get_user_model().objects.select_for_update().get(pk=user.pk)
    if ServiceAccount.objects.filter(user=user).exists():  # it signs in with its tokens only
        raise ConsoleError({"password": [gettext("%(user)s is a service account: it has tokens, never a "
                                                 "password") % {"user": user.username}]})
    if not password:
        raise ConsoleError({"password": [gettext("a new password is required")]})
    if problems := _password_errors(password, user):
        raise ConsoleError({"password": problems})
    user.set_password(password)
    user.save(update_fields=["password"])
    audit.record(actor, "reset password", user, message=said(texts.PASSWORD_RESET, user=user.username))
    return user


@transaction.atomic
def end_sessions(actor, user) -> int:
    """Sign the user out of every browser (API tokens stay); how many sessions ended."""
    user = get_user_model().objects.select_for_update().get(pk=user.pk)
    ended = user_sessions.end_all(user)
    audit.record(actor, "end sessions", user, message=said(texts.SESSIONS_ENDED, count=ended, user=user.username))
    return ended

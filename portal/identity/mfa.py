"""Two-factor authentication for local accounts: allauth.mfa's authenticator app (TOTP) and recovery codes.

The portal's own sign-in form (portal.identity.views.LoginView) checks the password; an account with an
authenticator app then goes through allauth's login stages, whose MFA stage asks for a code
(/accounts/2fa/authenticate/) before the session is made. Accounts whose password is their company's or
directory's (OIDC, LDAP: no usable password here) have their provider's second factor and no pages here.
With MFA_REQUIRED_FOR_STAFF on, a local staff account without an authenticator app is sent to enrol at
sign-in, and the console and admin refuse it until it has. API tokens (gpuctl) are not sessions and never
ask for a code. Enabling, disabling, regenerating recovery codes and signing in with a recovery code are
written to the audit log (source sign-in)."""

from __future__ import annotations

from allauth.account import app_settings as account_settings
from allauth.account.internal.flows.login import perform_password_login
from allauth.account.models import Login
from allauth.mfa.adapter import DefaultMFAAdapter
from allauth.mfa.models import Authenticator
from django.conf import settings
from django.contrib import messages
from django.shortcuts import redirect
from django.utils.translation import gettext

from portal.console import audit
from portal.console.models import AuditEntry
from scheduling.api import secrets

SIGN_IN = AuditEntry.Source.SIGN_IN
ACTIONS = {  # authenticator type: (added, removed)
    Authenticator.Type.TOTP: ("enable 2fa", "disable 2fa"),
    Authenticator.Type.RECOVERY_CODES: ("make recovery codes", "remove recovery codes"),
}


ENCRYPTED_FIELDS = {Authenticator.Type.TOTP: "secret", Authenticator.Type.RECOVERY_CODES: "seed"}


class MFAAdapter(DefaultMFAAdapter):
    """allauth's, with the app's secret and the recovery codes' seed encrypted under SECRETS_KEY (as workspace
    secrets are): a copy of the database alone does not give anyone's second factor."""

    def encrypt(self, text: str) -> str:
        return secrets.encrypt(text)

    def decrypt(self, encrypted_text: str) -> str:
        return secrets.decrypt(encrypted_text)


def rotate_all() -> int:
    """Re-encrypt every authenticator's secret under the first key of SECRETS_KEY (rotate_secrets_key)."""
    from django.db import transaction

    fernet, count = secrets.fernet(), 0
    with transaction.atomic():
        for authenticator in Authenticator.objects.select_for_update().filter(
            type__in=list(ENCRYPTED_FIELDS)
        ):
            field = ENCRYPTED_FIELDS[authenticator.type]
            if authenticator.data.get(field):
                authenticator.data[field] = fernet.rotate(authenticator.data[field].encode()).decode()
                authenticator.save(update_fields=["data"])
                count += 1
    return count


def is_local(user) -> bool:
    """An account that signs in with a password kept here (not its company's or directory's)."""
    return bool(settings.LOCAL_LOGIN and user.is_authenticated and user.has_usable_password())


def has_totp(user) -> bool:
    return bool(user.pk) and Authenticator.objects.filter(user=user, type=Authenticator.Type.TOTP).exists()


def must_enrol(user) -> bool:
    """MFA_REQUIRED_FOR_STAFF on, and this local staff account has no authenticator app yet."""
    return bool(
        settings.MFA_REQUIRED_FOR_STAFF
        and user.is_authenticated
        and user.is_staff
        and is_local(user)
        and not has_totp(user)
    )


def second_step(request, user, redirect_url: str):
    """The password was right: allauth's login stages ask for the code, then sign in and go to redirect_url."""
    login = Login(
        user=user, redirect_url=redirect_url, email_verification=account_settings.EmailVerificationMethod.NONE
    )
    return perform_password_login(request, {"username": user.get_username()}, login)


def enrol_redirect(request):
    messages.warning(
        request,
        gettext(
            "Operators must use two-factor authentication: set up an authenticator app to reach the console."
        ),
    )
    return redirect("mfa_activate_totp")


class StaffEnrolmentMiddleware:
    """With MFA_REQUIRED_FOR_STAFF on, the console and the admin send a local staff account without an
    authenticator app to enrolment instead (their sign-in and sign-out stay open)."""

    GUARDED = ("/console/", "/admin/")
    OPEN = ("/admin/login/", "/admin/logout/")

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        path = request.path_info
        if (
            path.startswith(self.GUARDED)
            and not path.startswith(self.OPEN)
            and must_enrol(getattr(request, "user", None) or _Anonymous)
        ):
            return enrol_redirect(request)
        return self.get_response(request)


class _Anonymous:
    is_authenticated = False


# --------------------------------------------------------------------------- audit


def _record(user, action: str, authenticator: Authenticator, message: str) -> None:
    audit.record(
        user,
        action,
        authenticator,
        source=SIGN_IN,
        target_repr=f"{user.get_username()}: {authenticator.get_type_display()}",
        message=message,
    )


def on_added(sender, request, user, authenticator, **kwargs) -> None:
    if action := ACTIONS.get(authenticator.type, ("", ""))[0]:
        _record(user, action, authenticator, "two-factor authentication set up by the account's owner")


def on_removed(sender, request, user, authenticator, **kwargs) -> None:
    if action := ACTIONS.get(authenticator.type, ("", ""))[1]:
        _record(user, action, authenticator, "two-factor authentication turned off by the account's owner")


def on_reset(sender, request, user, authenticator, **kwargs) -> None:
    _record(
        user, "regenerate recovery codes", authenticator, "new recovery codes: the old ones no longer work"
    )


def on_used(sender, request, user, authenticator, **kwargs) -> None:
    if authenticator.type == Authenticator.Type.RECOVERY_CODES:
        # as stored: the instance signalled may predate the code being spent
        left = len(Authenticator.objects.get(pk=authenticator.pk).wrap().get_unused_codes())
        _record(
            user,
            "use recovery code",
            authenticator,
            f"signed in with a recovery code (it no longer works); {left} left",
        )


def on_failed(sender, request, user, authenticator, **kwargs) -> None:
    from portal.ratelimit import client_address

    audit.record(
        user,
        "2fa code refused",
        authenticator,
        source=SIGN_IN,
        target_repr=user.get_username(),
        message=f"a wrong two-factor code from {client_address(request)}"
        if request is not None
        else "a wrong two-factor code",
    )


def connect() -> None:
    from allauth.mfa import signals

    signals.authenticator_added.connect(on_added, dispatch_uid="portal-mfa-added")
    signals.authenticator_removed.connect(on_removed, dispatch_uid="portal-mfa-removed")
    signals.authenticator_reset.connect(on_reset, dispatch_uid="portal-mfa-reset")
    signals.authenticator_used.connect(on_used, dispatch_uid="portal-mfa-used")
    signals.authentication_failed.connect(on_failed, dispatch_uid="portal-mfa-failed")

"""Local accounts' own pages, allauth's views under /accounts/: password reset and change, e-mail change
with its confirmation link, the password check before a sensitive change (reauthenticate), and two-factor
authentication (/accounts/2fa/, allauth.mfa). Only these of allauth's account pages are mounted (no sign-up,
no allauth sign-in form): each is refused when LOCAL_LOGIN is off, and to an account without a password here."""

from allauth.account import views as allauth_account
from allauth.mfa.base import views as mfa_base
from allauth.mfa.recovery_codes import views as mfa_recovery_codes
from allauth.mfa.totp import views as mfa_totp
from django.urls import include, path, re_path

from portal import invitations
from portal.identity.views import local_accounts_only


def reset_from_key(request, *args, **kwargs):
    """allauth's page for a reset link; a link that is expired, spent or made up answers 400."""
    response = allauth_account.password_reset_from_key(request, *args, **kwargs)
    if (getattr(response, "context_data", None) or {}).get("token_fail"):
        response.status_code = 400
    return response


def confirm_email(request, *args, **kwargs):
    """allauth's page for an e-mail confirmation link; a link that is expired or made up answers 404 (styled)."""
    response = allauth_account.confirm_email(request, *args, **kwargs)
    if getattr(response, "context_data", None) is not None and response.context_data.get("confirmation") is None:
        response.status_code = 404
    return response


def email(request, *args, **kwargs):
    """allauth's page to change the account's address, the current address recorded as it stands first."""
    if request.user.is_authenticated:
        invitations.record_trusted_address(request.user)
    return allauth_account.email(request, *args, **kwargs)


mfa_urlpatterns = [
    path("", local_accounts_only(mfa_base.index), name="mfa_index"),
    path("authenticate/", local_accounts_only(mfa_base.authenticate), name="mfa_authenticate"),
    path("reauthenticate/", local_accounts_only(mfa_base.reauthenticate), name="mfa_reauthenticate"),
    path("totp/activate/", local_accounts_only(mfa_totp.activate_totp), name="mfa_activate_totp"),
    path("totp/deactivate/", local_accounts_only(mfa_totp.deactivate_totp), name="mfa_deactivate_totp"),
    path("recovery-codes/", local_accounts_only(mfa_recovery_codes.view_recovery_codes),
         name="mfa_view_recovery_codes"),
    path("recovery-codes/generate/", local_accounts_only(mfa_recovery_codes.generate_recovery_codes),
         name="mfa_generate_recovery_codes"),
    path("recovery-codes/download/", local_accounts_only(mfa_recovery_codes.download_recovery_codes),
         name="mfa_download_recovery_codes"),
]

urlpatterns = [
    path("password/change/", local_accounts_only(allauth_account.password_change), name="account_change_password"),
    # allauth sends an account without a usable password here: the same refusal
    path("password/set/", local_accounts_only(allauth_account.password_change), name="account_set_password"),
    path("password/reset/", local_accounts_only(allauth_account.password_reset), name="account_reset_password"),
    path("password/reset/done/", local_accounts_only(allauth_account.password_reset_done),
         name="account_reset_password_done"),
    path("password/reset/key/done/", local_accounts_only(allauth_account.password_reset_from_key_done),
         name="account_reset_password_from_key_done"),
    re_path(r"^password/reset/key/(?P<uidb36>[0-9A-Za-z]+)-(?P<key>.+)/$",
            local_accounts_only(reset_from_key), name="account_reset_password_from_key"),
    path("reauthenticate/", local_accounts_only(allauth_account.reauthenticate), name="account_reauthenticate"),
    path("email/", local_accounts_only(email), name="account_email"),
    path("confirm-email/", local_accounts_only(allauth_account.email_verification_sent),
         name="account_email_verification_sent"),
    re_path(r"^confirm-email/(?P<key>[-:\w]+)/$", local_accounts_only(confirm_email), name="account_confirm_email"),
    path("2fa/", include(mfa_urlpatterns)),
]

"""Password reset and change for local accounts: allauth's views, under /accounts/password/. Only these of
allauth's account pages are mounted (no sign-up, no e-mail management, no allauth sign-in form)."""

from allauth.account import views as allauth_account
from django.urls import path, re_path

from portal.identity.views import local_accounts_only


def reset_from_key(request, *args, **kwargs):
    """allauth's page for a reset link; a link that is expired, spent or made up answers 400."""
    response = allauth_account.password_reset_from_key(request, *args, **kwargs)
    if (getattr(response, "context_data", None) or {}).get("token_fail"):
        response.status_code = 400
    return response


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
]

"""Company sign-in through OpenID Connect providers (django-allauth's openid_connect provider).

An account is found by its link to the provider (the ID token's `sub`), else by the provider's e-mail address
when the provider says it verified it (`email_verified`, or the provider's `trust_email`): an unverified
address never reaches an existing account, nor makes one, and an account's own address counts only when it
is verified (portal.invitations.verified_email). No match: an account is made when
OIDC_CREATE_USERS is on. At each sign-in the provider's groups claim sets the workspace roles and staff
(portal.identity.groups). Sign-out also ends the provider's session where its discovery names an
end_session_endpoint (RP-initiated logout). Refusals and failed sign-ins are written to the audit log.
"""

from __future__ import annotations

import logging
from urllib.parse import urlencode

import requests
from allauth.account.adapter import DefaultAccountAdapter
from allauth.core.exceptions import ImmediateHttpResponse
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from allauth.socialaccount.models import SocialApp
from allauth.socialaccount.providers.oauth2.views import OAuth2CallbackView
from allauth.socialaccount.providers.openid_connect.views import OpenIDConnectOAuth2Adapter
from django.conf import settings
from django.contrib.auth import get_user_model
from django.http import Http404, HttpRequest
from django.shortcuts import render
from django.utils.translation import gettext_lazy as _

from portal.console.models import AuditEntry
from portal.invitations import verified_email
from portal.ratelimit import client_address

log = logging.getLogger(__name__)

PROVIDER = "oidc_provider"  # session: the provider the user signed in with
ID_TOKEN = "oidc_id_token"  # session: its ID token, the hint for RP-initiated logout
RAW_ID_TOKEN = "_oidc_raw_id_token"  # on the request, from the token answer to the sign-in that follows

REFUSALS = {
    "unverified": _("Your identity provider has not verified your e-mail address, so it cannot sign you in "
                    "to an account here. Ask your administrator."),
    "ambiguous": _("More than one account here has your e-mail address. Ask your administrator."),
    "unconfirmed": _("An account here holds your e-mail address without having confirmed it, so your sign-in "
                     "cannot use that account. Ask your administrator."),
}


def provider_settings(provider_id: str) -> dict:
    return next((p for p in settings.OIDC_PROVIDERS if p["id"] == provider_id), {})


def configured_providers() -> list[dict]:
    """id and name of each provider, for the sign-in page's buttons."""
    return [{"id": p["id"], "name": p.get("name") or p["id"]} for p in settings.OIDC_PROVIDERS]


def claims(extra_data: dict) -> dict:
    """The ID token's claims, overlaid by the userinfo answer's (allauth keeps both)."""
    return {**(extra_data.get("id_token") or {}), **(extra_data.get("userinfo") or {})}


def group_names(provider_id: str, extra_data: dict) -> list[str]:
    value = claims(extra_data).get(provider_settings(provider_id).get("groups_claim") or "groups") or []
    if isinstance(value, str):
        value = [value]
    return [str(group) for group in value if isinstance(group, str | int)]


def refuse(request: HttpRequest, provider_id: str, reason: str, username: str = "", user=None) -> None:
    """End the sign-in with the page that says why (403), written to the audit log."""
    audit_failure(request, provider_id, reason, username=username, user=user)
    raise ImmediateHttpResponse(render(request, "identity/oidc_refused.html",
                                       {"reason": REFUSALS[reason]}, status=403))


def audit_failure(request: HttpRequest, provider_id: str, why: str, *, username: str = "", user=None) -> None:
    AuditEntry.objects.create(
        user=user, username=(username or "anonymous")[:150], source=AuditEntry.Source.SIGN_IN,
        action="login failed", target_type="auth.user", target_id=str(user.pk) if user else "",
        target_repr=(username or "")[:200],
        message=f"failed sign-in through OIDC provider {provider_id} on {request.path_info} "
                f"from {client_address(request)}: {why}"[:1000])


class SocialAccountAdapter(DefaultSocialAccountAdapter):
    def pre_social_login(self, request, sociallogin):
        if sociallogin.is_existing:
            return
        provider_id = sociallogin.account.provider
        addresses = [a for a in sociallogin.email_addresses if a.email]
        if not addresses:
            return
        email = addresses[0].email
        verified = addresses[0].verified or bool(provider_settings(provider_id).get("trust_email"))
        holders = list(get_user_model().objects.filter(email__iexact=email)[:3])
        # an account's own address only where it is proven: one a local user typed and never confirmed (allauth
        # records it unverified) would hand the provider's identity to whoever typed it
        users = [user for user in holders if verified_email(user)][:2]
        if not verified:
            # never linked, never made: an address nobody vouched for could be anyone's
            refuse(request, provider_id, "unverified", username=email, user=users[0] if len(users) == 1 else None)
        if len(users) > 1:
            refuse(request, provider_id, "ambiguous", username=email)
        if users:
            sociallogin.connect(request, users[0])
        elif holders:
            refuse(request, provider_id, "unconfirmed", username=email, user=holders[0])

    def is_open_for_signup(self, request, sociallogin):
        return settings.OIDC_CREATE_USERS

    def is_auto_signup_allowed(self, request, sociallogin):
        return True

    def populate_user(self, request, sociallogin, data):
        user = super().populate_user(request, sociallogin, data)
        user.email = (user.email or "").lower()
        return user

    def on_authentication_error(self, request, provider, error=None, exception=None, extra_context=None):
        why = f"{error or 'error'}" + (f" ({type(exception).__name__}: {str(exception)[:200]})" if exception else "")
        if extra_context is not None and "state" not in extra_context and "state_id" in extra_context:
            why = "unknown or used state (a forged, replayed or expired answer)"
        audit_failure(request, provider.app.provider_id, why)


class AccountAdapter(DefaultAccountAdapter):
    def is_open_for_signup(self, request):
        return False  # no sign-up form: accounts come from the console, the admin, or an OIDC provider

    def post_login(self, request, user, **kwargs):
        sociallogin = (kwargs.get("signal_kwargs") or {}).get("sociallogin")
        if sociallogin is not None:
            from portal.identity.groups import apply_group_roles

            provider_id = sociallogin.account.provider
            apply_group_roles(user, group_names(provider_id, sociallogin.account.extra_data),
                              source=f"oidc:{provider_id}")
            request.session[PROVIDER] = provider_id
            request.session[ID_TOKEN] = getattr(request, RAW_ID_TOKEN, "")
        return super().post_login(request, user, **kwargs)


class CallbackAdapter(OpenIDConnectOAuth2Adapter):
    """allauth's, keeping the ID token as received: the provider wants it back as the hint at sign-out."""

    def complete_login(self, request, app, token, **kwargs):
        setattr(request, RAW_ID_TOKEN, (kwargs.get("response") or {}).get("id_token") or "")
        return super().complete_login(request, app, token, **kwargs)


def callback(request: HttpRequest, provider_id: str):
    try:
        return OAuth2CallbackView.adapter_view(CallbackAdapter(request, provider_id))(request)
    except SocialApp.DoesNotExist:
        raise Http404 from None


def end_session_url(request: HttpRequest, provider_id: str, id_token: str, after: str) -> str | None:
    """The provider's end_session_endpoint with the hint and where to come back, or None (no such endpoint,
    or the provider cannot be read: the portal's own sign-out still happens)."""
    if not provider_settings(provider_id):
        return None
    try:
        endpoint = CallbackAdapter(request, provider_id).openid_config.get("end_session_endpoint")
    except (requests.RequestException, ValueError, SocialApp.DoesNotExist) as error:
        log.warning("OIDC provider %s: discovery failed at sign-out: %s", provider_id, type(error).__name__)
        return None
    if not endpoint:
        return None
    params = {"post_logout_redirect_uri": after, "client_id": provider_settings(provider_id)["client_id"]}
    if id_token:
        params["id_token_hint"] = id_token
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(params)}"

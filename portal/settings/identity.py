"""Company sign-in: OpenID Connect providers (django-allauth), local password sign-in on or off.

OIDC_PROVIDERS, JSON (environment) or a list (a settings module of one's own), one object per provider:
  id            the provider's name in URLs (/accounts/oidc/<id>/login/callback/ is its redirect URI)
  name          the button's label on the sign-in page
  issuer        the issuer URL; its /.well-known/openid-configuration is read (discovery)
  client_id, secret  the secret may instead come from the environment variable OIDC_SECRET_<ID> (the id in
                capitals, "-" as "_"): OIDC_PROVIDERS then holds no secret (the Helm chart fills it from a Secret)
  scopes        default ["openid", "profile", "email"]; add the one that carries groups if the provider needs it
  groups_claim  default "groups": the claim (ID token or userinfo) whose group names map to roles
  trust_email   default false: treat the provider's e-mail addresses as verified even without email_verified
"""

import json
import os
import re

from django.core.exceptions import ImproperlyConfigured

from portal.settings.env import env_bool

PROVIDER_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")


def oidc_providers(raw: str) -> list[dict]:
    """The providers in OIDC_PROVIDERS's JSON, checked: a mistake stops the start, naming the provider and field."""
    try:
        providers = json.loads(raw or "[]")
    except ValueError as error:
        raise ImproperlyConfigured(f"OIDC_PROVIDERS is not JSON: {error}") from None
    if not isinstance(providers, list):
        raise ImproperlyConfigured("OIDC_PROVIDERS must be a JSON list of providers")
    seen = set()
    for n, provider in enumerate(providers):
        if not isinstance(provider, dict):
            raise ImproperlyConfigured(f"OIDC_PROVIDERS[{n}] must be an object")
        for field in ("id", "issuer", "client_id"):
            if not isinstance(provider.get(field), str) or not provider[field]:
                raise ImproperlyConfigured(f"OIDC_PROVIDERS[{n}]: {field} is required")
        if not PROVIDER_ID.match(provider["id"]) or provider["id"] in seen:
            raise ImproperlyConfigured(f"OIDC_PROVIDERS[{n}]: id must be a unique lower-case slug")
        seen.add(provider["id"])
    return providers


def client_secret_variable(provider_id: str) -> str:
    """The environment variable a provider's client secret may come from: corp-sso -> OIDC_SECRET_CORP_SSO."""
    return f"OIDC_SECRET_{provider_id.upper().replace('-', '_')}"


def socialaccount_providers(providers: list[dict]) -> dict:
    """allauth's SOCIALACCOUNT_PROVIDERS for OIDC_PROVIDERS: one openid_connect app each, PKCE on."""
    apps = []
    for provider in providers:
        scopes = provider.get("scopes") or ["openid", "profile", "email"]
        apps.append({
            "provider_id": provider["id"],
            "name": provider.get("name") or provider["id"],
            "client_id": provider["client_id"],
            "secret": provider.get("secret") or os.environ.get(client_secret_variable(provider["id"]), ""),
            "settings": {
                "server_url": provider["issuer"].rstrip("/"),
                "scope": scopes.split() if isinstance(scopes, str) else list(scopes),
                "oauth_pkce_enabled": True,
            },
        })
    return {"openid_connect": {"OAUTH_PKCE_ENABLED": True, "APPS": apps}}


OIDC_PROVIDERS = oidc_providers(os.environ.get("OIDC_PROVIDERS", ""))
# A first sign-in whose verified e-mail matches no account creates one; off: only existing accounts get in.
OIDC_CREATE_USERS = env_bool("OIDC_CREATE_USERS", True)
# Off: the sign-in page shows only the providers, and a password sign-in (/login/, /admin/login/) is refused.
# Also: an invitation's page then sends people to the company sign-in instead of making an account, and they
# join at their first sign-in with the invited (verified) e-mail.
LOCAL_LOGIN = env_bool("LOCAL_LOGIN", True)

SOCIALACCOUNT_PROVIDERS = socialaccount_providers(OIDC_PROVIDERS)
SOCIALACCOUNT_ADAPTER = "portal.identity.oidc.SocialAccountAdapter"
ACCOUNT_ADAPTER = "portal.identity.oidc.AccountAdapter"
SOCIALACCOUNT_AUTO_SIGNUP = True
SOCIALACCOUNT_EMAIL_VERIFICATION = "none"  # the provider vouches (email_verified); see portal.identity.oidc
SOCIALACCOUNT_EMAIL_AUTHENTICATION = False  # matching by e-mail is the portal's own, verified addresses only
SOCIALACCOUNT_STORE_TOKENS = False
SOCIALACCOUNT_LOGIN_ON_GET = False  # the sign-in buttons post (CSRF-protected)
ACCOUNT_EMAIL_VERIFICATION = os.environ.get("ACCOUNT_EMAIL_VERIFICATION", "optional").strip().lower()
if ACCOUNT_EMAIL_VERIFICATION not in ("optional", "mandatory"):
    raise ImproperlyConfigured("ACCOUNT_EMAIL_VERIFICATION must be optional or mandatory")
# A new address (a local account changing its e-mail) is confirmed by a link mailed to it: the account's
# address changes only once the link is followed, and a link works for ACCOUNT_EMAIL_CONFIRMATION_EXPIRE_DAYS
ACCOUNT_CHANGE_EMAIL = True
ACCOUNT_CONFIRM_EMAIL_ON_GET = False  # the link's page asks for a click (mail scanners follow links)
ACCOUNT_EMAIL_CONFIRMATION_EXPIRE_DAYS = 3
ACCOUNT_EMAIL_CONFIRMATION_HMAC = False  # stored keys: a link is known, expired or unknown
ACCOUNT_LOGIN_ON_EMAIL_CONFIRMATION = False
ACCOUNT_LOGIN_METHODS = {"username"}  # allauth's backend signs in by username, as Django's does
# Password reset (allauth's pages): the same answer whether or not the address has an account, and a link
# that works once, for an hour
ACCOUNT_PREVENT_ENUMERATION = True
ACCOUNT_EMAIL_UNKNOWN_ACCOUNTS = False  # no mail to an address without an account (nor a sign-up invitation)
PASSWORD_RESET_TIMEOUT = int(os.environ.get("PASSWORD_RESET_TIMEOUT", "3600"))
ACCOUNT_PASSWORD_RESET_TOKEN_GENERATOR = "portal.identity.tokens.PasswordResetTokens"  # the platform clock

# Two-factor authentication for local accounts (allauth.mfa): an authenticator app's codes (TOTP) and
# single-use recovery codes. Company (OIDC) and directory (LDAP) accounts have their provider's.
MFA_SUPPORTED_TYPES = ["totp", "recovery_codes"]
# Before a change to them, allauth's pages ask for the password or a code again (no code by e-mail)
ACCOUNT_REAUTHENTICATION_METHODS = ("password", "mfa")
MFA_TOTP_ISSUER = os.environ.get("MFA_TOTP_ISSUER", "GPU Platform")
MFA_TOTP_TOLERANCE = 1  # the code of the 30 s before or after too: phones' clocks drift
MFA_RECOVERY_CODE_COUNT = 10
MFA_ADAPTER = "portal.identity.mfa.MFAAdapter"  # secrets encrypted under SECRETS_KEY
# On: a staff account with a password here and no authenticator app is sent to enrol at sign-in, and the
# console and admin refuse it until it has
MFA_REQUIRED_FOR_STAFF = env_bool("MFA_REQUIRED_FOR_STAFF", False)

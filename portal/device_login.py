"""`gpuctl login`: the OAuth 2.0 device authorization grant (RFC 8628) over portal.models.DeviceAuthorization.

`start` answers a device code (the CLI's secret; only its hash is stored) and a short user code; the person,
signed in to the portal, types the user code at /device/, sees the client and the scope asked for, and
`approve`s or `deny`s (both audited). The CLI polls `exchange`, which answers RFC 8628's errors until the
request is decided, then, once, an API token of the approving user with the scope asked for and the usual
lifetime. Times are the platform clock's."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils.translation import gettext

from billing.models import hash_token
from portal import services
from portal.console import audit
from portal.console.models import AuditEntry
from portal.models import DeviceAuthorization, TokenScope
from scheduling.api import DomainError, clock

EXPIRES_IN_S = 600
INTERVAL_S = 5
KEPT_AFTER_EXPIRY = timedelta(days=1)
SLOW_DOWN_STEP_S = 5  # RFC 8628 3.5: each slow_down adds 5 s to the interval
GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"
CLIENTS = ("gpuctl",)
# no vowels (no words), no look-alikes: RFC 8628 6.1's base-20 alphabet
USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"
USER_CODE_LENGTH = 8
State = DeviceAuthorization.State


class GrantError(Exception):
    """An RFC 8628 / RFC 6749 token error: `code` is the answer's `error`."""

    def __init__(self, code: str, description: str):
        super().__init__(description)
        self.code, self.description = code, description


@dataclass(frozen=True)
class Started:
    authorization: DeviceAuthorization
    device_code: str

    @property
    def user_code(self) -> str:
        return shown(self.authorization.user_code)


def shown(user_code: str) -> str:
    """WDJBMJHT -> WDJB-MJHT"""
    return f"{user_code[:4]}-{user_code[4:]}"


def normalised(typed: object) -> str:
    """What a person typed, as stored: upper case, dashes and spaces left out."""
    text = typed if isinstance(typed, str) else ""
    return "".join(c for c in text.upper() if c not in "- \t")[:32]


def _new_user_code() -> str:
    while True:
        code = "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(USER_CODE_LENGTH))
        if not DeviceAuthorization.objects.filter(user_code=code, state=State.PENDING,
                                                  expires__gt=clock.now()).exists():
            return code


def start(client: object = "gpuctl", scope: object = TokenScope.SUBMIT) -> Started:
    errors = {}
    if client not in CLIENTS:
        errors["client_id"] = [gettext("unknown client %(client)s: one of %(clients)s") % {
            "client": repr(str(client)[:40]), "clients": ", ".join(CLIENTS)}]
    if scope not in TokenScope.values:
        errors["scope"] = [gettext("%(scope)s is not a scope: one of %(scopes)s") % {
            "scope": repr(str(scope)[:20]), "scopes": ", ".join(TokenScope.values)}]
    if errors:
        raise DomainError(errors)
    device_code = secrets.token_urlsafe(32)
    now = clock.now()
    DeviceAuthorization.objects.filter(expires__lt=now - KEPT_AFTER_EXPIRY).delete()  # nothing to poll or audit
    authorization = DeviceAuthorization.objects.create(
        device_digest=hash_token(device_code), user_code=_new_user_code(), client=client, scope=scope,
        created=now, expires=now + timedelta(seconds=EXPIRES_IN_S), interval=INTERVAL_S)
    return Started(authorization, device_code)


def pending_by_user_code(typed: object) -> DeviceAuthorization:
    """The request a person typed the code of, while it waits; else a DomainError for the form."""
    code = normalised(typed)
    found = (DeviceAuthorization.objects.filter(user_code=code, state=State.PENDING, expires__gt=clock.now())
             .first()) if len(code) == USER_CODE_LENGTH else None
    if found is None:
        raise DomainError({"user_code": gettext(
            "no sign-in waits for the code %(code)s: check it, or run gpuctl login again (a code works for "
            "10 minutes, once)") % {"code": repr(str(typed)[:20])}})
    return found


@transaction.atomic
def decide(user, typed: object, approve: bool) -> DeviceAuthorization:
    authorization = pending_by_user_code(typed)
    authorization = DeviceAuthorization.objects.select_for_update().get(pk=authorization.pk)
    if authorization.state != State.PENDING:  # decided in another tab meanwhile
        raise DomainError({"user_code": gettext("this sign-in was already decided")})
    authorization.state = State.APPROVED if approve else State.DENIED
    authorization.user, authorization.decided = user, clock.now()
    authorization.save(update_fields=["state", "user", "decided"])
    audit.record(user, "approve device login" if approve else "deny device login", authorization,
                 source=AuditEntry.Source.TENANT, changes={"client": [None, authorization.client],
                                                           "scope": [None, authorization.scope]})
    return authorization


def exchange(device_code: object, grant_type: object) -> tuple[DeviceAuthorization, str]:
    """(the authorization, the API token's raw value), or GrantError: authorization_pending, slow_down,
    access_denied, expired_token, invalid_grant (unknown or already exchanged), unsupported_grant_type.
    A poll's time is kept whatever it answers (the transaction commits before the error is raised)."""
    with transaction.atomic():
        outcome = _exchange(device_code, grant_type)
    if isinstance(outcome, GrantError):
        raise outcome
    return outcome


def _exchange(device_code: object, grant_type: object) -> tuple[DeviceAuthorization, str] | GrantError:
    if grant_type != GRANT_TYPE:
        return GrantError("unsupported_grant_type", f"grant_type must be {GRANT_TYPE}")
    if not isinstance(device_code, str) or not device_code:
        return GrantError("invalid_request", "device_code is required")
    authorization = (DeviceAuthorization.objects.select_for_update(of=("self",)).select_related("user")
                     .filter(device_digest=hash_token(device_code)).first())
    if authorization is None:
        return GrantError("invalid_grant", "unknown device_code")
    if authorization.state == State.EXCHANGED:
        return GrantError("invalid_grant", "this device_code was already exchanged for a token")
    now = clock.now()
    if authorization.expires <= now:
        return GrantError("expired_token", "the device code expired: run the login again")
    if authorization.state == State.DENIED:
        return GrantError("access_denied", "the sign-in was denied")
    if authorization.state == State.PENDING:
        too_soon = (authorization.last_poll is not None
                    and now - authorization.last_poll < timedelta(seconds=authorization.interval))
        authorization.last_poll = now
        if too_soon:
            authorization.interval += SLOW_DOWN_STEP_S
        authorization.save(update_fields=["last_poll", "interval"])
        if too_soon:
            return GrantError("slow_down", f"polled sooner than {authorization.interval - SLOW_DOWN_STEP_S} s "
                                           f"after the last poll: wait {authorization.interval} s between polls")
        return GrantError("authorization_pending", "waiting for the user to approve at /device/")
    user = authorization.user
    if not user.is_active:
        return GrantError("access_denied", "the approving account is deactivated")
    token, raw = services.create_api_token(user, f"{authorization.client} login {now:%Y-%m-%d %H:%M}",
                                           scope=authorization.scope)
    authorization.state, authorization.token = State.EXCHANGED, token
    authorization.save(update_fields=["state", "token"])
    return authorization, raw

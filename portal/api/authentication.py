"""Personal API tokens: who calls, and what the token lets them do.

A token has one scope; each includes the ones before it (portal.models.TokenScope):
read (GET, HEAD, OPTIONS), submit (read, and submit and cancel jobs), manage (everything the user's
roles allow). A view says what each of its other methods needs in `token_scopes` ({"POST": "submit"});
a write it does not name needs manage. The scope is checked here, where the token is accepted, so no
view can forget it; a signed-in browser session is not limited by scopes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rest_framework import authentication, exceptions

from billing.models import hash_token
from portal.credentials import presented
from portal.models import ApiToken, TokenScope
from scheduling.api import clock

# "Last used" to the minute is enough, and saves a write on every request.
LAST_USED_RESOLUTION = timedelta(minutes=1)
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class TokenRevoked(exceptions.AuthenticationFailed):
    pass


class TokenExpired(exceptions.AuthenticationFailed):
    pass


class MissingScope(exceptions.PermissionDenied):
    pass


def utc_text(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def required_scope(view, method: str) -> str:
    """The scope `method` needs on `view`: its own word in `token_scopes`, else read for a safe
    method and manage for a write."""
    declared = getattr(view, "token_scopes", None) or {}
    if method in declared:
        return declared[method]
    return TokenScope.READ if method in SAFE_METHODS else TokenScope.MANAGE


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer gpt_...` (or `Token gpt_...`, or an `api-key` header) with a personal API
    token, read by portal.credentials (which the rate limiter reads too)."""

    def authenticate(self, request):
        found = presented(request.META)
        if found is None:
            return None
        if found.malformed:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <token>'.")
        token = ApiToken.objects.select_related("user").filter(digest=hash_token(found.token)).first()
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid token: create one at /account/tokens/.")
        now = clock.now()
        if token.revoked is not None:
            raise TokenRevoked(f"token {token.hint}… was revoked on {utc_text(token.revoked)}.")
        if token.expired_at(now):
            raise TokenExpired(f"token {token.hint}… expired on {utc_text(token.expires)}: create a new one at "
                               "/account/tokens/.")
        self._check_scope(request, token)
        if token.last_used is None or now - token.last_used >= LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used=now)
        return token.user, token

    @staticmethod
    def _check_scope(request, token: ApiToken) -> None:
        view = (getattr(request, "parser_context", None) or {}).get("view")
        needed = required_scope(view, request.method)
        if not token.allows(needed):
            raise MissingScope(f"this token has scope '{token.scope}'; {request.method} {request.path} needs "
                               f"scope '{needed}'. Create a token with scope '{needed}' at /account/tokens/.")

    def authenticate_header(self, request):
        return "Bearer"

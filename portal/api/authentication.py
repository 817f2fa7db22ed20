from datetime import timedelta

from rest_framework import authentication, exceptions

from billing.models import hash_token
from portal.models import ApiToken
from scheduling import clock

# "Last used" to the minute is enough, and saves a write on every request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer gpt_...` (or `Token gpt_...`) with a personal API token."""

    keywords = ("bearer", "token")

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode(errors="replace").split()
        if not header or header[0].lower() not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <token>'.")
        token = (
            ApiToken.objects.select_related("user")
            .filter(digest=hash_token(header[1]), revoked__isnull=True)
            .first()
        )
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        now = clock.now()
        if token.last_used is None or now - token.last_used >= LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used=now)
        return token.user, token

    def authenticate_header(self, request):
        return "Bearer"

"""Password reset links' tokens: allauth's, aged by the platform clock (scheduling.clock) so a link's hour is
the platform's, and leaving the account's address as trusted as it was."""

from datetime import UTC, datetime

from allauth.account.forms import EmailAwarePasswordResetTokenGenerator

from portal.invitations import record_trusted_address
from scheduling.api import clock


class PasswordResetTokens(EmailAwarePasswordResetTokenGenerator):
    def _now(self) -> datetime:
        return clock.now().astimezone(UTC).replace(tzinfo=None)  # Django's tokens count naive seconds

    def _make_hash_value(self, user, timestamp) -> str:
        # allauth records an address it has no record of as unverified here; the portal takes such an address
        # (set by the operators, or by an invitation) as proven, and later sign-ins and invitations rely on that
        record_trusted_address(user)
        return super()._make_hash_value(user, timestamp)

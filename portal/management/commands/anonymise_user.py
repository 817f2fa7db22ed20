"""Anonymise a person who has left: their name and e-mail give way to a pseudonym (former-user-<id>) on every
page, API answer and export; jobs, charges and ids stay. The account is deactivated, its sessions and API
tokens end, and the audit log records it. Running it again changes nothing (the pseudonym is accepted too).

Exit status: 0 done or already done; 1 the user is unknown or may not be anonymised (an operator needs
--force).
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from portal.console.anonymise import anonymise_user
from portal.console.services import ConsoleError


class Command(BaseCommand):
    help = "Replace a departed user's name and e-mail with a pseudonym everywhere; deactivate the account."

    def add_arguments(self, parser):
        parser.add_argument("user", help="the username (or the account's id, or its pseudonym)")
        parser.add_argument("--by", default="", help="the operator who asked for it, as the audit log's author")
        parser.add_argument("--force", action="store_true", help="anonymise an operator (staff) account too")

    def handle(self, *args, user: str, by: str, force: bool, **options):
        User = get_user_model()
        account = User.objects.filter(username=user).first()
        if account is None and user.isdigit():
            account = User.objects.filter(pk=int(user)).first()
        if account is None:
            raise CommandError(f"no user named {user!r}")
        actor = None
        if by:
            actor = User.objects.filter(username=by, is_staff=True, is_active=True).first()
            if actor is None:
                raise CommandError(f"--by {by!r} is not an active operator")
        try:
            done = anonymise_user(actor, account, force=force)
        except ConsoleError as error:
            raise CommandError("; ".join(m for msgs in error.errors.values() for m in msgs)) from None
        if not done.changed:
            self.stdout.write(f"user #{account.pk} is already anonymised as {done.pseudonym}: nothing changed")
            return
        self.stdout.write(f"user #{account.pk} anonymised as {done.pseudonym}: {done.events} job events and "
                          f"{done.audit_entries} audit entries rewritten, {done.sessions} sessions and "
                          f"{done.tokens} API tokens ended")

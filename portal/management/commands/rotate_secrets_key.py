"""`manage.py rotate_secrets_key`: re-encrypt every workspace secret, registry password and two-factor
authenticator's secret under the first key of SECRETS_KEY. `--new-key` prints a fresh key and changes nothing.

Rotation: put the new key first in SECRETS_KEY (keeping the old ones after it), restart, run this, then drop
the old keys."""

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from portal.identity import mfa
from scheduling.api import secrets


class Command(BaseCommand):
    help = "Re-encrypt every workspace secret and registry password under the first key of SECRETS_KEY."

    def add_arguments(self, parser):
        parser.add_argument("--new-key", action="store_true", help="print a new Fernet key and change nothing")

    def handle(self, *args, new_key: bool = False, **options):
        if new_key:
            self.stdout.write(secrets.new_key())
            return
        try:
            with transaction.atomic():  # all or nothing, the two-factor secrets with the rest
                count = secrets.rotate_all() + mfa.rotate_all()
        except secrets.SecretsNotConfigured as e:
            raise CommandError(str(e)) from None
        self.stdout.write(f"re-encrypted {count} values under the first key of SECRETS_KEY")

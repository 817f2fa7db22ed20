from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from portal.backup import services
from portal.backup.database import DatabaseToolFailed


class Command(BaseCommand):
    help = ("Restore an archive written by `backup` over this install's database and files, migrate it to "
            "this version's schema and check its ledger sums and job counts against the archive's.")

    def add_arguments(self, parser):
        parser.add_argument("archive", metavar="IN")
        parser.add_argument("--yes", action="store_true", help="do not ask before replacing the data")
        parser.add_argument("--ignore-key-mismatch", action="store_true",
                            help="restore an archive made with another SECRET_KEY (signed values stop validating)")

    def handle(self, *args, archive, yes=False, ignore_key_mismatch=False, **options):
        path = Path(archive)
        try:
            found = services.read_manifest(path)
            reasons = services.refusals(found, ignore_key_mismatch=ignore_key_mismatch)
        except services.BackupRefused as error:
            raise CommandError(str(error)) from error
        if reasons:
            raise CommandError("Not restored, nothing changed:\n" + "\n".join(f"- {r}" for r in reasons))
        self.stdout.write(f"Archive made {found['created_at']} by version {found['project_version']}, "
                          f"schema {found['schema']['number']}, {sum(found['job_counts'].values())} jobs.")
        if not yes:
            answer = input(f"This replaces the database {connection.settings_dict['NAME']} and the platform's "
                           "files with the archive's. Type yes to go on: ")
            if answer.strip().lower() != "yes":
                raise CommandError("Not restored.")
        try:
            result = services.restore(path, ignore_key_mismatch=ignore_key_mismatch)
        except services.BackupRefused as error:
            raise CommandError(str(error)) from error
        except (DatabaseToolFailed, OSError) as error:
            raise CommandError(f"restore failed: {error}") from error
        if result.key_differs:
            self.stdout.write(self.style.WARNING("Restored with another SECRET_KEY than the archive's."))
        if result.mismatches:
            raise CommandError("Restored, but the data differs from the archive's manifest:\n"
                               + "\n".join(f"- {line}" for line in result.mismatches))
        sums = "; ".join(f"{ws} {', '.join(f'{t} {c}' for c, t in by.items()) or 'nothing'}"
                         for ws, by in result.manifest["ledger_sums"].items())
        self.stdout.write(self.style.SUCCESS(f"Restored {path}; ledger sums agree with the archive's ({sums})."))

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from portal.backup import services
from portal.backup.database import DatabaseToolFailed


class Command(BaseCommand):
    help = ("Write one archive (tar; .tar.gz compresses) of the database, the file trees the platform keeps "
            "and a manifest. OUT may be a folder: the archive is named by the time.")

    def add_arguments(self, parser):
        parser.add_argument("out", metavar="OUT", help="the archive to write, e.g. /backups/gpu-platform-20261128.tar")
        parser.add_argument("--keep", type=int, metavar="N",
                            help="then delete the older archives named like OUT in its folder beyond the N newest")

    def handle(self, *args, out, keep=None, **options):
        if keep is not None and keep < 1:
            raise CommandError("--keep must be at least 1")
        try:
            result = services.backup(Path(out), keep=keep)
        except (DatabaseToolFailed, OSError) as error:
            raise CommandError(f"backup failed: {error}") from error
        figures = result.manifest
        trees = ", ".join(f"{name} {count} files" for name, count in figures["file_trees"].items())
        self.stdout.write(self.style.SUCCESS(
            f"Backup written: {result.path} ({result.bytes} bytes; {figures['database']['vendor']} database, "
            f"schema {figures['schema']['number']}, {sum(figures['job_counts'].values())} jobs; {trees})."))
        for path in result.pruned:
            self.stdout.write(f"Deleted the older backup {path}")

"""The file trees a backup holds besides the database, each under its name in the archive.

Adding a tree is one line here: its name in the archive and the setting that holds its folder. Job logs
are not files (the cycle keeps them in the database, scheduling.logs); the simulated cluster's runtime
folder (SIM_RUNTIME_DIR) holds only live processes' records, which mean nothing after a restore.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings


@dataclass(frozen=True)
class FileTree:
    name: str  # its folder in the archive: files/<name>/
    setting: str  # the setting that holds the folder on this install

    @property
    def path(self) -> Path:
        return Path(getattr(settings, self.setting))


FILE_TREES = (
    # notebooks' homes from before they were volumes: the migration that made them volumes moves them into
    # VOLUMES_DIR (so a home is in one tree), and moves those of an older archive again after its restore
    FileTree("notebook-homes", "NOTEBOOK_HOME_DIR"),
    FileTree("report-exports", "REPORT_EXPORT_DIR"),
    FileTree("volumes", "VOLUMES_DIR"),
    FileTree("datasets", "DATASETS_DIR"),
    # later: FileTree("invoices", "INVOICE_PDF_DIR")
)

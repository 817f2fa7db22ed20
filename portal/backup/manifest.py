"""What a backup says about itself (manifest.json), and the same figures read from the database now,
so that a restore can refuse an archive it cannot take and check what it restored."""

from __future__ import annotations

import hashlib
import tomllib
from importlib import metadata

from django.conf import settings
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder
from django.db.models import Count

from billing.api import ledger_selectors
from billing.models import ChargeLine
from portal.models import Workspace
from scheduling.api import clock
from scheduling.models import Job

FORMAT = 1  # of the archive and its manifest; a restore refuses a newer one
NAME = "manifest.json"


def project_version() -> str:
    try:
        return metadata.version("gpu-platform")
    except metadata.PackageNotFoundError:  # run from a checkout that is not installed
        with open(settings.BASE_DIR / "pyproject.toml", "rb") as f:
            return tomllib.load(f)["project"]["version"]


def applied_migrations() -> list[tuple[str, str]]:
    """(app, migration) applied to the database, in a stable order."""
    return sorted(MigrationRecorder(connection).applied_migrations())


def schema() -> dict:
    """Each app's latest applied migration and, as one comparable figure, how many are applied (migrations
    are only ever added, so a later schema has more)."""
    applied = applied_migrations()
    latest: dict[str, str] = {}
    for app, name in applied:
        latest[app] = max(latest.get(app, name), name)
    return {"number": len(applied), "latest": latest, "applied": [list(pair) for pair in applied]}


def unknown_migrations(applied: list[list[str]]) -> list[str]:
    """Migrations of an archive that this code does not have: the archive is from a newer version."""
    known = set(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)
    return [f"{app}.{name}" for app, name in applied if (app, name) not in known]


def key_fingerprint() -> str:
    """Tells two SECRET_KEYs apart without saying anything about either."""
    return hashlib.sha256(b"gpu-platform backup key check\0" + settings.SECRET_KEY.encode()).hexdigest()[:16]


def ledger_sums() -> dict[str, dict[str, str]]:
    """{workspace slug: {currency: sum of its ledger lines' costs}}, as Decimal strings."""
    sums: dict[str, dict[str, str]] = {}
    for workspace in Workspace.objects.order_by("slug"):
        rows = ChargeLine.objects.filter(workspace=workspace)
        sums[workspace.slug] = {currency: str(total) for currency, total in ledger_selectors.sums_by_currency(rows)}
    return sums


def job_counts() -> dict[str, int]:
    counts = dict(Job.objects.order_by().values_list("workspace__slug").annotate(n=Count("id")))
    return {slug: counts.get(slug, 0) for slug in Workspace.objects.order_by("slug").values_list("slug", flat=True)}


def build(*, trees: dict[str, int], database: dict) -> dict:
    return {
        "format": FORMAT,
        "project_version": project_version(),
        "created_at": clock.now().isoformat(),
        "database": database,
        "schema": schema(),
        "ledger_sums": ledger_sums(),
        "job_counts": job_counts(),
        "secret_key_fingerprint": key_fingerprint(),
        "file_trees": trees,
    }

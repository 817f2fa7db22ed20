"""What is running: the release (pyproject's version), the commit it was built from, and the schema
(the latest migration applied per app, and those not applied yet).

The version and commit are read once per process; the schema is read from the database each time,
since a migration may run while the portal serves (helm upgrade's pre-upgrade hook)."""

from __future__ import annotations

import functools
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

DISTRIBUTION = "gpu-platform"


def _pyproject_version(path: Path) -> str | None:
    try:
        project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return project.get("version") if project.get("name") == DISTRIBUTION else None


@functools.cache
def version() -> str | None:
    """The installed distribution's version. A source checkout's pyproject.toml wins over it: an
    editable install's metadata keeps the version it was installed at until it is installed again."""
    from_source = _pyproject_version(Path(settings.BASE_DIR) / "pyproject.toml")
    if from_source:
        return from_source
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


@functools.cache
def commit() -> str | None:
    """BUILD_COMMIT (an image sets it at build time), else the checkout's HEAD, else unknown."""
    if settings.BUILD_COMMIT:
        return settings.BUILD_COMMIT
    base = Path(settings.BASE_DIR)
    if not (base / ".git").exists():
        return None
    try:
        done = subprocess.run(["git", "-C", str(base), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    sha = done.stdout.strip()
    return sha if done.returncode == 0 and len(sha) == 40 else None


def project_apps() -> list[str]:
    """The labels of the apps whose code is this project's and which have migrations: under the checkout,
    and not installed into an environment there (the development `.venv` lies inside it, the image's not)."""
    base = Path(settings.BASE_DIR).resolve()
    return sorted(config.label for config in _migrated_apps() if _is_project_code(Path(config.path).resolve(), base))


def _is_project_code(path: Path, base: Path) -> bool:
    return path.is_relative_to(base) and not {"site-packages", "dist-packages"} & set(path.relative_to(base).parts)


def _migrated_apps() -> list:
    return [config for config in apps.get_app_configs() if (Path(config.path) / "migrations").is_dir()]


@functools.cache
def _known_migrations() -> frozenset[tuple[str, str]]:
    """Every installed app's migrations in the code (the code does not change while it runs): an upgrade of
    Django or allauth brings theirs, which `migrate` applies as it applies the project's."""
    labels = {config.label for config in _migrated_apps()}
    loader = MigrationLoader(None, ignore_no_migrations=True)
    return frozenset(key for key in loader.disk_migrations if key[0] in labels)


def _applied() -> set[tuple[str, str]]:
    return set(MigrationRecorder(connection).applied_migrations())


def schema() -> dict[str, str | None]:
    """Each installed app's latest applied migration (None: none applied)."""
    applied = _applied()
    latest = {}
    for label in sorted(config.label for config in _migrated_apps()):
        names = sorted(name for app, name in applied if app == label)
        latest[label] = names[-1] if names else None
    return latest


def pending_migrations() -> list[str]:
    """The installed apps' migrations in the code not applied to the database yet ("app.name")."""
    return sorted(f"{app}.{name}" for app, name in _known_migrations() - _applied())

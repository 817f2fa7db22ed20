"""Every migration of the project's apps can be reversed, or says why not (tests/upgrade/irreversible.py),
and walking each app to zero and back again on a fresh SQLite database gives the same schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.db import migrations
from django.db.migrations.loader import MigrationLoader

from portal.testing import ROOT
from portal.version import project_apps
from tests.upgrade.irreversible import IRREVERSIBLE


def _operations(operations):
    """Each operation, with those a SeparateDatabaseAndState runs on the database."""
    for operation in operations:
        yield operation
        if isinstance(operation, migrations.SeparateDatabaseAndState):
            yield from _operations(operation.database_operations)


def irreversible_operations() -> dict[tuple[str, str], list[str]]:
    loader = MigrationLoader(None, ignore_no_migrations=True)
    apps = set(project_apps())
    found: dict[tuple[str, str], list[str]] = {}
    for key, migration in sorted(loader.disk_migrations.items()):
        if key[0] not in apps:
            continue
        for operation in _operations(migration.operations):
            if isinstance(operation, migrations.RunPython) and operation.reverse_code is None:
                found.setdefault(key, []).append(f"RunPython({operation.code.__name__}) without reverse_code")
            elif isinstance(operation, migrations.RunSQL) and operation.reverse_sql is None:
                found.setdefault(key, []).append("RunSQL without reverse_sql")
            elif not operation.reversible:
                found.setdefault(key, []).append(f"{type(operation).__name__} is not reversible")
    return found


def test_the_walk_sees_the_project_apps_and_their_data_migrations():
    assert {"billing", "portal", "scheduling", "console"} <= set(project_apps())
    loader = MigrationLoader(None, ignore_no_migrations=True)
    run_python = [key for key, migration in loader.disk_migrations.items()
                  if any(isinstance(op, migrations.RunPython) for op in migration.operations)]
    assert ("billing", "0007_write_off_peak_calendar") in run_python  # the walk would find one without a reverse


def test_every_migration_is_reversible_or_says_why_not():
    found = irreversible_operations()
    unexplained = {f"{app}.{name}": what for (app, name), what in found.items() if (app, name) not in IRREVERSIBLE}
    assert unexplained == {}, "add a reverse (RunPython.noop for a fill that needs no undo) or list it in " \
                              f"tests/upgrade/irreversible.py with the reason: {unexplained}"
    stale = sorted(f"{app}.{name}" for app, name in IRREVERSIBLE if (app, name) not in found)
    assert stale == [], f"listed as irreversible but reversible now (take them off the list): {stale}"
    assert all(reason.strip() for reason in IRREVERSIBLE.values())


def test_an_operation_without_a_reverse_is_found(monkeypatch):
    loader_class = MigrationLoader

    class WithOneMore(loader_class):
        def load_disk(self):
            super().load_disk()
            migration = migrations.Migration("0099_fill", "billing")
            migration.operations = [migrations.RunPython(lambda apps, schema_editor: None),
                                    migrations.RunSQL("SELECT 1")]
            self.disk_migrations[("billing", "0099_fill")] = migration

    monkeypatch.setattr(sys.modules[__name__], "MigrationLoader", WithOneMore)
    assert irreversible_operations()[("billing", "0099_fill")] == [
        "RunPython(<lambda>) without reverse_code", "RunSQL without reverse_sql"]


# In a process of its own, on a SQLite file of its own: all migrations, then each app to zero (Django
# unapplies the apps that depend on it first) and forward again; the tables' SQL after each round trip. An
# app an earlier walk took to zero with it is not walked again: its every migration was reversed and applied.
ROUND_TRIP = """
import json, django
django.setup()
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from portal.version import project_apps

def schema():
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' "
                       "ORDER BY name")
        return cursor.fetchall()

call_command("migrate", verbosity=0)
first, out = schema(), {}
for app in project_apps():
    if app in out:
        continue
    taken = {m.app_label for m, _ in MigrationExecutor(connection).migration_plan([(app, None)])}
    call_command("migrate", app, "zero", verbosity=0)
    gone = {name for name, _ in first} - {name for name, _ in schema()}
    call_command("migrate", verbosity=0)
    same = schema() == first
    for label in sorted(taken & set(project_apps())):
        out[label] = {"walked_with": app, "same_schema": same,
                      "objects_dropped": sum(name.startswith(label + "_") for name in gone)}
print("ROUND-TRIP " + json.dumps(out))
"""


@pytest.mark.slow_server
def test_each_app_goes_to_zero_and_back_to_the_same_schema(tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'walk.sqlite3'}", "VAR_DIR": str(tmp_path)}
    env.pop("REDIS_URL", None)
    done = subprocess.run([sys.executable, "-c", ROUND_TRIP], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.split("ROUND-TRIP ", 1)[1])
    print(result)
    assert set(result) == set(project_apps())
    for app, walked in result.items():
        assert walked["objects_dropped"] > 0, f"{app} to zero dropped nothing"
        assert walked["same_schema"], f"{app}: zero and back gives another schema"

"""The database into and out of a file: pg_dump's custom format on PostgreSQL, SQLite's online backup API
on SQLite. The password reaches pg_dump and pg_restore in their environment, never on a command line."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from django.db import connection, transaction

T = TypeVar("T")

DUMP_FILES = {"postgresql": "database.pgdump", "sqlite": "database.sqlite3"}


class DatabaseToolFailed(RuntimeError):
    pass


def vendor() -> str:
    return connection.vendor


def dump(out: Path, read_figures: Callable[[], T]) -> T:
    """Write the configured database to `out` while the platform runs, and return `read_figures()` read
    from the same moment of it (the manifest's sums must match what the dump holds)."""
    if vendor() == "postgresql":
        # Inside a test's transaction there is no snapshot to share: pg_dump sees what was committed.
        outer = connection.in_atomic_block
        with transaction.atomic():
            snapshot = None
            if not outer:
                with connection.cursor() as cursor:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    cursor.execute("SELECT pg_export_snapshot()")
                    snapshot = cursor.fetchone()[0]
            figures = read_figures()
            _run("pg_dump", "--format=custom", "--no-owner", f"--file={out}",
                 *([f"--snapshot={snapshot}"] if snapshot else []))
        return figures
    if vendor() == "sqlite":
        if connection.in_atomic_block:  # a write transaction of our own would lock the copy out forever
            raise DatabaseToolFailed("a SQLite backup cannot run inside a transaction")
        connection.ensure_connection()
        raw = connection.connection
        raw.execute("BEGIN DEFERRED")  # a read transaction: WAL gives it one snapshot; writers go on
        try:
            figures = read_figures()
            target = sqlite3.connect(out)
            try:
                raw.backup(target)  # copies what this connection's snapshot sees
            finally:
                target.close()
        finally:
            raw.execute("COMMIT")
        return figures
    raise DatabaseToolFailed(f"backups of a {vendor()} database are not supported")


def load(dump_file: Path) -> None:
    """Replace the configured database's contents with the dump's."""
    connection.close()  # pg_restore and the SQLite backup write through connections of their own
    if vendor() == "postgresql":
        # One transaction for all of it, so a restore that fails leaves the database as it was. The tables
        # are dropped first: those of a newer schema than the dump's would stop the migrate that follows.
        drops, script = dump_file.with_name("drop-tables.sql"), dump_file.with_name("restore.sql")
        with connection.cursor() as cursor:
            tables = connection.introspection.table_names(cursor)
        connection.close()
        drops.write_text("".join(f"DROP TABLE IF EXISTS {connection.ops.quote_name(t)} CASCADE;\n" for t in tables))
        _run("pg_restore", "--clean", "--if-exists", "--no-owner", f"--file={script}", str(dump_file), connect=False)
        _run("psql", "--no-psqlrc", "--quiet", "--single-transaction", "--set=ON_ERROR_STOP=1",
             f"--file={drops}", f"--file={script}")
    else:
        source = sqlite3.connect(dump_file)
        target = sqlite3.connect(connection.settings_dict["NAME"], timeout=20)
        try:
            source.backup(target)
        finally:
            target.close()
            source.close()
    connection.close()


def _run(tool: str, *args: str, connect: bool = True) -> None:
    if shutil.which(tool) is None:
        raise DatabaseToolFailed(f"{tool} is not installed (Debian: postgresql-client)")
    db = connection.settings_dict
    target = [f"--host={db['HOST']}"] if db.get("HOST") else []
    target += [f"--port={db['PORT']}"] if db.get("PORT") else []
    target += [f"--username={db['USER']}"] if db.get("USER") else []
    target.append(f"--dbname={db['NAME']}")
    if not connect:  # pg_restore writing its SQL to a file
        target = []
    env = dict(os.environ)
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = str(db["PASSWORD"])
    if sslmode := (db.get("OPTIONS") or {}).get("sslmode"):
        env["PGSSLMODE"] = str(sslmode)
    done = subprocess.run([tool, *target, *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise DatabaseToolFailed(f"{tool} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")

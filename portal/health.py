"""The probes' answers. /healthz (liveness) says the process can serve and checks nothing else, so a
database or Redis outage never gets healthy pods restarted; /readyz (readiness) checks the database,
Redis and that every migration is applied, and names what fails."""

from __future__ import annotations

import redis
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor

# Databases (by alias and name) seen with every migration applied: once true it stays true for the
# process (a new release's migrations run before its pods start), so the plan is not rebuilt per probe.
migrated_databases: set[tuple[str, str]] = set()


def _error(exc: Exception) -> str:
    return f"error: {exc.__class__.__name__}: {exc}"


def check_database(using: str = DEFAULT_DB_ALIAS) -> str:
    try:
        with connections[using].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return "ok"
    except Exception as exc:  # any driver error means unready; say which
        return _error(exc)


def check_redis() -> str:
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1).ping()
        return "ok"
    except Exception as exc:
        return _error(exc)


def check_migrations(using: str = DEFAULT_DB_ALIAS) -> str:
    """"ok" when the migration plan to the leaf nodes is empty; else how many are still to apply."""
    connection = connections[using]
    key = (using, str(connection.settings_dict.get("NAME")))
    if key in migrated_databases:
        return "ok"
    try:
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception as exc:
        return _error(exc)
    if plan:
        return f"pending: {len(plan)} migration(s), first {plan[0][0].app_label}.{plan[0][0].name}"
    migrated_databases.add(key)
    return "ok"


def readiness() -> tuple[bool, dict]:
    """Whether this pod should take traffic, each dependency's state and the names of those failing."""
    checks = {"database": check_database(), "redis": check_redis()}
    checks["migrations"] = check_migrations() if checks["database"] == "ok" else "unknown: no database"
    failing = [name for name, state in checks.items() if state != "ok" and not state.startswith("unknown")]
    return not failing, {**checks, "failing": failing}

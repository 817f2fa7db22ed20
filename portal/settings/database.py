"""The database: SQLite under VAR_DIR by default, DATABASE_URL (e.g. PostgreSQL) in production."""

import os

import dj_database_url

from portal.settings.env import VAR_DIR, env_bool

DATABASE_URL = os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}")
# No persistent connections: Daphne serves each request from a fresh thread, so kept-alive
# connections pile up (bench.ingest: 53 open in 10 s, then "too many clients"). The ASGI server
# runs with DB_POOL=1 (a psycopg pool on PostgreSQL); Celery's forked workers connect per task.
# Health checks: a connection the database dropped (restart, network cut) is replaced before a
# request uses it; with DB_POOL, the pool checks each connection it lends.
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0, conn_health_checks=True)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Database unreachable: a request fails (503) within seconds instead of hanging.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", int(os.environ.get("DB_CONNECT_TIMEOUT", "5")))
    if env_bool("DB_POOL", False):
        # A request waits at most `timeout` (2 s) for a connection, then 503 and the breaker answers the
        # next ones at once (portal.door); after an outage the pool's retries
        # (1, 2 s) give up after `reconnect_timeout`, and the next request (or the breaker's probe) starts
        # them over: it reconnects within about 2 s of the database's return.
        DATABASES["default"]["OPTIONS"]["pool"] = {
            "min_size": 1, "max_size": int(os.environ.get("DB_POOL_SIZE", "10")),
            "timeout": min(2.0, float(os.environ.get("DB_POOL_TIMEOUT", "2"))), "reconnect_timeout": 3.0}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not memory, for the test database: the Celery worker and Daphne processes
    # that tests start must see the same data (tests name one per process: tests/conftest.py).
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}
    # WAL: readers (pages) never wait for the writer (the scheduling cycle); writers wait up to
    # `timeout` seconds for each other instead of failing with "database is locked".
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE",
                                       "init_command": "PRAGMA journal_mode=WAL;"}

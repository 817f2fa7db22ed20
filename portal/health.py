"""What /healthz checks: the database and Redis answer."""

import redis
from django.conf import settings
from django.db import connection


def check_database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return "ok"
    except Exception as exc:  # any driver error means unhealthy; say which
        return f"error: {exc.__class__.__name__}: {exc}"


def check_redis() -> str:
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1).ping()
        return "ok"
    except Exception as exc:
        return f"error: {exc.__class__.__name__}: {exc}"


def report() -> tuple[bool, dict]:
    checks = {"database": check_database(), "redis": check_redis()}
    return all(v == "ok" for v in checks.values()), checks

"""`python -m portal.wait`: wait until the database and Redis answer (and, with --http, a URL answers
200), then exit 0. `make run` starts every process behind it, so none begins (and fails, with a
traceback) before the services it needs are up. It says once what it waits for, and gives up with one
line and exit status 1 after --timeout seconds (supervisord then starts the program again).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable


def database_error() -> str | None:
    """None when the database answers a query, else why not."""
    from django.db import connection

    try:
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return None
    except Exception as error:  # any driver's "cannot connect" error
        connection.close()  # a failed connection is not reused for the next try
        return f"{type(error).__name__}: {error}".strip()


def redis_error() -> str | None:
    import redis
    from django.conf import settings

    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1).ping()
        return None
    except (redis.RedisError, OSError) as error:
        return f"{type(error).__name__}: {error}".strip()


def http_error(url: str) -> Callable[[], str | None]:
    def check() -> str | None:
        import httpx

        try:
            status = httpx.get(url, timeout=2).status_code
        except httpx.HTTPError as error:
            return f"{type(error).__name__}: {error}".strip()
        return None if status == 200 else f"HTTP {status}"

    return check


def wait_for(checks: dict[str, Callable[[], str | None]], *, timeout: float, interval: float = 0.5,
             say: Callable[[str], None] = print) -> bool:
    """Poll each check until all pass or `timeout` runs out; say once what is awaited, and when it came."""
    started = time.monotonic()
    pending = dict(checks)
    announced: set[str] = set()
    while True:
        errors = {name: error for name, check in pending.items() if (error := check()) is not None}
        for name in set(pending) - set(errors):
            if name in announced:
                say(f"{name} is up after {time.monotonic() - started:.1f} s")
        pending = {name: pending[name] for name in errors}
        if not pending:
            return True
        for name in set(errors) - announced:
            say(f"waiting for {name} ...")
            announced.add(name)
        if time.monotonic() - started >= timeout:
            details = "; ".join(f"{name}: {error}" for name, error in errors.items())
            say(f"gave up after {timeout:.0f} s: {details}")
            return False
        time.sleep(interval)


def checks_for(*, database: bool = True, redis: bool = True, http: str = "") -> dict[str, Callable[[], str | None]]:
    checks: dict[str, Callable[[], str | None]] = {}
    if database:
        checks["the database"] = database_error
    if redis:
        checks["redis"] = redis_error
    if http:
        checks[http] = http_error(http)
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=float(os.environ.get("WAIT_TIMEOUT_S", "120")))
    parser.add_argument("--no-database", action="store_true", help="do not wait for the database")
    parser.add_argument("--no-redis", action="store_true", help="do not wait for Redis")
    parser.add_argument("--http", default="", metavar="URL", help="also wait until URL answers 200")
    parser.add_argument("--quiet", action="store_true", help="say nothing unless it gives up")
    args = parser.parse_args(argv)
    if not (args.no_database and args.no_redis):  # an HTTP check alone needs no Django
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
        import django

        django.setup()
    checks = checks_for(database=not args.no_database, redis=not args.no_redis, http=args.http)
    def say(line: str) -> None:
        if not args.quiet or line.startswith("gave up"):
            print(line, flush=True)

    return 0 if wait_for(checks, timeout=args.timeout, say=say) else 1


if __name__ == "__main__":
    sys.exit(main())

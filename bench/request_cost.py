"""CPU cost per request of the load mix, in-process: where the web server's CPU goes.

    python -m bench.request_cost --database-url postgres://postgres@127.0.0.1:5432/h_request_cost
    python -m bench.request_cost --database-url ... --reuse -n 20 --profile /reports/

Builds the world `bench.load` serves (the named PostgreSQL database dropped and created, `manage.py
migrate` and `manage.py load_demo` in child processes; --reuse keeps a database an earlier run built),
then, in this process on that database, issues -n requests per endpoint of bench.load's mix with
Django's test Client (browsers logged in as alice, bob and finance in turn, the API with Bearer tokens)
and prints per endpoint: CPU ms per request (this process: the Python side of the web server, the
database server's own CPU not in it), wall ms per request and SQL queries per request. Without REDIS_URL
it starts an embedded Redis of its own, as bench.load does: the pages keep shared figures in the cache,
and without one every request would compute them (the report page costs half again). The first
request of each endpoint is a warm-up (imports, template compilation) and is not counted.
`--profile ENDPOINT` prints the cProfile top functions of that endpoint's counted requests, timed in CPU
seconds of this process (waits for the database and a busy machine's other work left out); with
PROFILE_DUMP=FILE in the environment the whole profile is also written there for `pstats`.
A benchmark, not a gate: nothing is asserted.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.databases import check_postgres_url

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DB_URL = "postgres://postgres@127.0.0.1:5432/h_request_cost"
BROWSERS = ("alice", "bob", "finance")
QUOTE_SPEC = {"name": "load-quote", "type": "single", "expectedDuration": "1h",
              "roles": [{"name": "main", "image": "pytorch/pytorch:latest",
                         "resources": {"gpu": 1, "cpu": 4, "memory": "16Gi"}}]}
ENDPOINTS = ("/", "/jobs/", "/reports/", "/cluster/", "/jobs/[id]/",
             "/api/v1/workspaces/", "/api/v1/jobs/?limit=50", "/api/v1/quotes/ [POST]")


def build_world(db_url: str, env: dict[str, str]) -> None:
    import psycopg
    from psycopg import sql

    name, admin = check_postgres_url(db_url)
    with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    for args in (["migrate", "--noinput", "-v", "0"], ["load_demo"]):
        subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True,
                       capture_output=True, text=True)


def clients():
    """One logged-in browser client and one API client per demo user, with the jobs each sees."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from portal.models import Membership
    from portal.services import create_api_token
    from scheduling.models import Job

    out = []
    for name in BROWSERS:
        user = get_user_model().objects.get(username=name)
        browser = Client()
        browser.force_login(user)
        _, raw = create_api_token(user, "bench-request-cost")
        api = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
        slugs = sorted(Membership.objects.filter(user=user).values_list("workspace__slug", flat=True))
        jobs = list(Job.objects.filter(workspace__slug__in=slugs).order_by("-pk").values_list("pk", flat=True)[:200])
        out.append({"name": name, "browser": browser, "api": api, "workspaces": slugs, "jobs": jobs})
    return out


def request(endpoint: str, account: dict, i: int):
    jobs = account["jobs"]
    if endpoint == "/jobs/[id]/":
        return account["browser"].get(f"/jobs/{jobs[i % len(jobs)]}/") if jobs else None
    if endpoint == "/api/v1/quotes/ [POST]":
        ws = account["workspaces"][i % len(account["workspaces"])]
        return account["api"].post("/api/v1/quotes/", {"workspace": ws, "spec": QUOTE_SPEC},
                                   content_type="application/json")
    if endpoint.startswith("/api/"):
        return account["api"].get(endpoint)
    return account["browser"].get(endpoint, follow=True)  # as locust: /cluster/ sends a tenant to a login page


def measure(endpoint: str, accounts: list[dict], n: int, profile: bool) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for account in accounts:  # warm-up: imports, templates, connection
        request(endpoint, account, 0)
    profiler = cProfile.Profile(time.process_time) if profile else None
    statuses: dict[int, int] = {}
    queries = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    with CaptureQueriesContext(connection) as captured:
        for i in range(n):
            account = accounts[i % len(accounts)]
            if profiler:
                profiler.enable()
            response = request(endpoint, account, i + 1)
            if profiler:
                profiler.disable()
            if response is not None:
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        queries = len(captured.captured_queries)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    result = {"cpu_ms": round(1000 * cpu / n, 1), "wall_ms": round(1000 * wall / n, 1),
              "queries": round(queries / n, 1), "statuses": statuses}
    if profiler:
        if os.environ.get("PROFILE_DUMP"):
            profiler.dump_stats(os.environ["PROFILE_DUMP"])
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(45)
        out2 = io.StringIO()
        pstats.Stats(profiler, stream=out2).sort_stats("tottime").print_stats(30)
        out3 = io.StringIO()  # the project's own functions and template tags
        pstats.Stats(profiler, stream=out3).sort_stats("cumulative").print_stats(
            r"/(portal|billing|scheduling)/|defaultfilters|humanize|numberformat", 40)
        result["profile"] = out.getvalue() + out2.getvalue() + out3.getvalue()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.request_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=DEFAULT_DB_URL, help="a postgres:// URL of a database of its own")
    parser.add_argument("--reuse", action="store_true", help="keep the database an earlier run built")
    parser.add_argument("-n", type=int, default=30, help="counted requests per endpoint")
    parser.add_argument("--only", action="append", help="measure only these endpoints (repeatable)")
    parser.add_argument("--profile", help="print the cProfile top functions of this endpoint")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    check_postgres_url(args.database_url)
    env = {**os.environ, "DATABASE_URL": args.database_url, "DEBUG": "0", "LOG_LEVEL": "WARNING",
           "SECURE_SSL_REDIRECT": "0", "SESSION_COOKIE_SECURE": "0", "CSRF_COOKIE_SECURE": "0",
           "RATE_LIMIT_LOGIN": "1000000/60", "RATE_LIMIT_API_TOKEN": "1000000/60"}
    env.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    env.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    redis_proc = None
    if "REDIS_URL" not in env:  # the cache the pages keep shared figures in, as the web server has it
        from portal import embedded_redis

        tmp = Path(tempfile.mkdtemp(prefix="bench-request-cost-"))
        env["REDIS_URL"] = f"unix://{tmp / 'redis.sock'}?db=0"
        redis_proc = embedded_redis.start(env["REDIS_URL"], log_file=tmp / "redis.log")
    try:
        if not args.reuse:
            build_world(args.database_url, env)
        return measure_all(args, env)
    finally:
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(timeout=10)
            shutil.rmtree(tmp, ignore_errors=True)


def measure_all(args: argparse.Namespace, env: dict[str, str]) -> int:
    os.environ.update(env)
    import django

    django.setup()
    from django.conf import settings

    settings.ALLOWED_HOSTS = ["*"]
    accounts = clients()
    endpoints = args.only or ([args.profile] if args.profile else ENDPOINTS)
    results = {e: measure(e, accounts, args.n, e == args.profile) for e in endpoints}
    if args.json:
        print(json.dumps({e: {k: v for k, v in r.items() if k != "profile"} for e, r in results.items()}))
    else:
        print(f"{'endpoint':<26} {'CPU ms':>8} {'wall ms':>8} {'queries':>8}  statuses")
        for e, r in results.items():
            print(f"{e:<26} {r['cpu_ms']:>8} {r['wall_ms']:>8} {r['queries']:>8}  {r['statuses']}")
        total = sum(r["cpu_ms"] for r in results.values())
        print(f"{'sum':<26} {round(total, 1):>8}")
    for r in results.values():
        if "profile" in r:
            print(r["profile"])
    return 0


if __name__ == "__main__":
    sys.exit(main())

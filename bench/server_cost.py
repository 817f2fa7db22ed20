"""CPU per request under the web server, one request at a time: what bench.load's mix costs the server
without the queueing of 50 users.

    python -m bench.server_cost --database-url postgres://postgres@127.0.0.1:5432/gpuplatform_load
    python -m bench.server_cost --database-url ... -n 60 --only /jobs/ --only /reports/

Starts the web server as bench.load does (uvicorn as `make run` serves it, DEBUG=0, its own embedded Redis)
with one process, on a database an earlier `bench.load --keep-db` (or `bench.request_cost`) built, signs in
as alice (browser pages) and uses her API token (API calls), then per endpoint of the load mix sends a few
warm-up requests and -n counted ones, one after another, and prints the server's CPU ms per request (its
process tree, from /proc) and the wall ms per request seen by the client. Unlike bench.request_cost, the
server's own work (HTTP, ASGI, the thread each request runs in) is in the figure; unlike bench.load, no
request waits behind another. Needs the `load` extra (make extras EXTRAS=load). A benchmark: nothing is
asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench import load
from bench.databases import check_postgres_url

if TYPE_CHECKING:
    import requests

ENDPOINTS = ("/", "/jobs/", "/reports/", "/cluster/", "/jobs/[id]/",
             "/api/v1/workspaces/", "/api/v1/jobs/?limit=50", "/api/v1/quotes/ [POST]")
WARM_UP = 5


def send(session: requests.Session, api: requests.Session, base: str, endpoint: str, account: dict):
    if endpoint == "/jobs/[id]/":
        return session.get(f"{base}/jobs/{account['jobs'][0]}/")
    if endpoint == "/api/v1/quotes/ [POST]":
        return api.post(f"{base}/api/v1/quotes/", json={"workspace": account["workspaces"][0], "spec": load.QUOTE_SPEC})
    return (api if endpoint.startswith("/api/") else session).get(base + endpoint)


def measure(base: str, stack: load.Stack, accounts: dict, endpoints: list[str], n: int) -> dict:
    import requests  # after bench.load: locust patches the standard library before requests may load

    account = accounts["alice"]
    session = requests.Session()
    session.get(f"{base}/login/")
    session.post(f"{base}/login/", data={"username": "alice", "password": account["password"],
                                         "csrfmiddlewaretoken": session.cookies.get("csrftoken", "")},
                 headers={"Referer": f"{base}/login/"})
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {account['token']}"
    out = {}
    for endpoint in endpoints:
        for _ in range(WARM_UP):
            send(session, api, base, endpoint, account)
        cpu, started, statuses = load.cpu_seconds(stack.server_proc), time.perf_counter(), {}
        for _ in range(n):
            status = send(session, api, base, endpoint, account).status_code
            statuses[status] = statuses.get(status, 0) + 1
        out[endpoint] = {"server_cpu_ms": round((load.cpu_seconds(stack.server_proc) - cpu) * 1000 / n, 1),
                         "wall_ms": round((time.perf_counter() - started) * 1000 / n, 1), "statuses": statuses}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.server_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True, help="a postgres:// URL of a database bench.load built")
    parser.add_argument("-n", type=int, default=40, help="counted requests per endpoint")
    parser.add_argument("--only", action="append", help="measure only these endpoints (repeatable)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    check_postgres_url(args.database_url)
    from portal import embedded_redis

    tmp = Path(tempfile.mkdtemp(prefix="bench-server-cost-"))
    stack = load.Stack(tmp=tmp, redis_url=f"unix://{tmp / 'redis.sock'}?db=0")
    (tmp / "var").mkdir()
    try:
        stack.redis_proc = embedded_redis.start(stack.redis_url, log_file=tmp / "redis.log")
        env = load.server_env(args.database_url, stack)
        accounts, _ = load.prepare(env, build=False)
        base = load.start_server(stack, env, 1)
        results = measure(base, stack, accounts, args.only or list(ENDPOINTS), args.n)
    finally:
        stack.stop()
    if args.json:
        print(json.dumps(results))
    else:
        print(f"{'endpoint':<26} {'server CPU ms':>14} {'wall ms':>8}  statuses")
        for endpoint, r in results.items():
            print(f"{endpoint:<26} {r['server_cpu_ms']:>14} {r['wall_ms']:>8}  {r['statuses']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

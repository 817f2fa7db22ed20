"""`make run`: the whole embedded stack in one terminal, under supervisord.

Writes a supervisord config under VAR_DIR and replaces this process with supervisord in the
foreground. It runs the project's own Redis (unless REDIS_URL points elsewhere), the web server
(uvicorn, one process per core), the Celery worker (which runs the scheduling cycle on the
simulated cluster), the same web application on the notebooks' port (NOTEBOOK_ORIGIN's, 8001: each
notebook on a host of its own, `<id>.nb.localhost:8001`, so that its pages never share the portal's
origin or cookies), the SSH gateway (SSH_GATEWAY_PORT, 2222), Celery beat and the simulated node agents; a process that dies is started again while the others keep serving.
Every line goes to the terminal prefixed with its process name; Ctrl-C stops everything.

Every program waits for what it needs before it starts (`portal.wait`), so nothing fails at start and no
traceback scrolls by: the web server for the database and Redis, the others for the web server to answer
(`/readyz`, which also needs the database, Redis and the migrations), so that it starts alone on the cores. Once the portal answers, `banner`
prints the URL and the demo logins.

`--demo-history` (what `make run` passes) also plays the demo month in the background once the portal is up: the
first page answers within a minute of a fresh clone, and beat (which sends the cycle) starts only when the month is
played, so the worker's cycle never fights the one that plays it. `--only web,worker` runs a subset (tests).
"""

from __future__ import annotations

import argparse
import os
import pwd
import secrets
import shlex
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
NAMES = ("redis", "web", "notebooks", "ssh", "worker", "worker-long", "beat", "agents", "history", "banner")
CELERY_WORKERS = ("worker", "worker-long")
ONCE = ("banner",)  # runs once to its end; not restarted, its lines not prefixed
RUN_ONCE = ("history",)  # runs once to its end, not restarted; its lines prefixed
HISTORY_DONE = "demo-history.done"  # written when the demo month is played (or could not be): beat starts then


def web_workers() -> int:
    """WEB_WORKERS, or one server process per core: a process runs Django's synchronous views on a
    single thread, so one process alone leaves the other cores idle under load."""
    return max(1, int(os.environ.get("WEB_WORKERS") or os.cpu_count() or 1))


def web_command(port: int, host: str = "127.0.0.1", workers: int | None = None) -> list[str]:
    """The portal's ASGI server (pages, API and websockets), as `make run` and bench.load start it."""
    return [sys.executable, "-m", "uvicorn", "portal.asgi:application", "--host", host, "--port", str(port),
            "--workers", str(workers or web_workers()), "--lifespan", "off",
            "--no-access-log"]  # the portal logs one line per request itself (portal.logs)


def notebooks_port(port: int) -> int | None:
    """The port of NOTEBOOK_ORIGIN when the portal's server does not already listen there (None then)."""
    from portal.notebook_origin import origin

    notebook = origin()
    found = notebook.port or (443 if notebook.secure else 80)
    return None if found == port else found


def processes(port: int, var_dir: Path, redis_command: list[str] | None = None,
              history: bool = False, web: bool = True, notebook_port: int | None = None) -> dict[str, str]:
    py = shlex.quote(sys.executable)
    done = shlex.quote(str(var_dir / HISTORY_DONE))
    after_history = f"until [ -e {done} ]; do sleep 1; done && " if history else ""
    tokens = shlex.quote(str(var_dir / "agent-tokens.json"))
    url = f"http://127.0.0.1:{port}"
    wait = f"{py} -m portal.wait"  # the database and Redis
    portal_up = f"{py} -m portal.wait --no-database --no-redis --http {url}/readyz"
    # With the web server in the stack, the others start once it answers: on a small machine they would
    # otherwise take the cores from it while it starts, and the first page would wait for all of them.
    after_web = f"{portal_up} --quiet --timeout 600 && " if web else f"{wait} && "
    procs = {"redis": shlex.join(redis_command)} if redis_command else {}
    long_concurrency = int(os.environ.get("LONG_TASK_CONCURRENCY") or 2)
    procs.update({
        "web": f"{wait} && DB_POOL=1 exec {shlex.join(web_command(port))}",
        # The same application on the notebooks' hosts: it serves them the notebook proxy and nothing else.
        **({"notebooks": f"{wait} && DB_POOL=1 exec {shlex.join(web_command(notebook_port, workers=1))}"}
           if notebook_port else {}),
        # The SSH gateway (portal.ssh_gateway) on SSH_GATEWAY_PORT, into running notebooks and jobs; it
        # starts after the web server answers, so that it does not take the cores from it while it starts.
        "ssh": f"{after_web}exec {py} -m portal.ssh_gateway",
        # The scheduling cycle runs on the simulated cluster (or Kubernetes) from this worker.
        "worker": f"{after_web}exec {py} -m celery -A portal --quiet worker -l INFO --concurrency 2 -n worker@%h",
        # Replays and exports (settings: LONG_TASKS) on their own queue, so they never delay a cycle.
        "worker-long": f"{after_web}exec {py} -m celery -A portal --quiet worker -l INFO -Q long "
                       f"--concurrency {long_concurrency} -n long@%h",
        "beat": f"{after_web}{after_history}exec {py} -m celery -A portal --quiet beat -l INFO "
                f"-s {shlex.quote(str(var_dir / 'celerybeat-schedule'))}",
        # One simulated node agent per node of the demo cluster, with its own token and spool. The demo
        # month is played by `history` (with --demo-history) before beat starts the worker's cycle.
        "agents": f"{after_web}{py} manage.py load_demo --no-history --agent-tokens {tokens} && {portal_up} && "
                  f"exec {py} -m nodeagent.fleet --portal {url} --tokens {tokens} --interval 10 "
                  f"--spool-dir {shlex.quote(str(var_dir / 'agents'))}",
        # Idempotent: a month already played is left as it is. Beat waits for the marker, even after a failure.
        "history": f"{portal_up} --quiet --timeout 600 && {py} manage.py load_demo; touch {done}",
        "banner": f"{portal_up} --quiet --timeout 600 && exec {py} -m portal.banner --url {url}/",
    })
    return procs


def prefixed(name: str, script: str) -> str:
    """A bash command whose output goes through `sed` to add "name | " to every line.

    The program is exec'd, so supervisord's pid for it is the real one. sed ignores INT and
    TERM so that a stopping program's last lines still get out; it ends at end of input.
    """
    label = f"{name:<7}| "
    return (f"exec > >(trap '' INT TERM; exec sed -u 's/^/{label}/') 2>&1; "
            f"{script}")


def config(port: int, var_dir: Path, only: tuple[str, ...] = NAMES, redis_command: list[str] | None = None,
           notebook_port: int | None = None) -> str:
    history = "history" in only
    sock = var_dir / "supervisor.sock"
    # A password on the control socket, and the user named when running as root: supervisord warns
    # (CRIT) at every start otherwise.
    password = secrets.token_urlsafe(16)
    lines = [
        "[supervisord]",
        "nodaemon=true",
        *([f"user={pwd.getpwuid(0).pw_name}"] if os.geteuid() == 0 else []),
        f"logfile={var_dir / 'supervisord.log'}",
        "logfile_maxbytes=10MB",
        f"pidfile={var_dir / 'supervisord.pid'}",
        f"childlogdir={var_dir}",
        "",
        "[unix_http_server]",
        f"file={sock}",
        "chmod=0700",
        "username=supervisor",
        f"password={password}",
        "",
        "[rpcinterface:supervisor]",
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
        "",
        "[supervisorctl]",
        f"serverurl=unix://{sock}",
        "username=supervisor",
        f"password={password}",
        "",
    ]
    for name, script in processes(port, var_dir, redis_command, history=history, web="web" in only,
                                  notebook_port=notebook_port).items():
        if name not in only:
            continue
        once = name in ONCE
        ends = once or name in RUN_ONCE
        command = shlex.join(["bash", "-c", script if once else prefixed(name, script)]).replace("%", "%%")
        lines += [
            f"[program:{name}]",
            f"command={command}",
            f"directory={BASE_DIR}",
            # Redis first; the others wait for it (portal.wait) before they start.
            f"priority={10 if name == 'redis' else 100}",
            f"autorestart={'false' if ends else 'true'}",
            f"startsecs={0 if ends else 1}",
            "startretries=100",
            # Stop the whole group (the sed that prefixes the lines too), except that Celery's main
            # process alone gets the TERM: it lets its pool children finish their tasks (a warm
            # shutdown) instead of losing them mid-task; whatever is left is killed after the wait.
            f"stopasgroup={'false' if name in CELERY_WORKERS else 'true'}",
            "killasgroup=true",
            "stopwaitsecs=20",
            "redirect_stderr=true",
            "stdout_logfile=/dev/stdout",
            "stdout_logfile_maxbytes=0",
            "",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(n for n in NAMES if n != "history"),
                        help="comma-separated processes to run")
    parser.add_argument("--demo-history", action="store_true",
                        help="also play the demo month in the background (beat starts when it is done)")
    args = parser.parse_args(argv)
    only = tuple(n.strip() for n in args.only.split(",") if n.strip())
    if args.demo_history and "history" not in only:
        only += ("history",)
    if unknown := set(only) - set(NAMES):
        parser.error(f"unknown processes: {', '.join(sorted(unknown))}")

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django
    from django.conf import settings

    from portal import embedded_redis

    port = int(os.environ.get("PORT", "8000"))
    var_dir = Path(settings.VAR_DIR)
    redis_command = None
    # Another stack already serving this socket keeps it; it is not ours to supervise.
    if settings.EMBEDDED_REDIS and not embedded_redis.is_answering(settings.REDIS_URL):
        redis_command = embedded_redis.server_command(settings.REDIS_URL)
    (var_dir / HISTORY_DONE).unlink(missing_ok=True)
    conf = var_dir / "supervisord.conf"
    conf.touch(mode=0o600)
    conf.chmod(0o600)  # it holds the control socket's password
    django.setup()
    conf.write_text(config(port, var_dir, only, redis_command, notebook_port=notebooks_port(port)))
    os.environ["PYTHONUNBUFFERED"] = "1"
    os.environ.setdefault("DEMO_LOAD", "1")  # a trickle of demo jobs; DEMO_LOAD=0 turns it off
    started = [n for n in NAMES if n in only and (n != "redis" or redis_command) and n not in ONCE + RUN_ONCE
               and (n != "notebooks" or notebooks_port(port))]
    print(f"starting {', '.join(started)} under supervisord ({conf}); the portal's address and logins follow "
          "once it answers", flush=True)
    # exec: Ctrl-C reaches supervisord itself, which stops its programs before it exits.
    os.execv(sys.executable, [sys.executable, "-m", "supervisor.supervisord", "-n", "-c", str(conf)])
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())

"""`make run`: the whole embedded stack in one terminal, under supervisord.

Writes a supervisord config under VAR_DIR and replaces this process with supervisord in the
foreground. It runs the project's own Redis (unless REDIS_URL points elsewhere), the web server
(uvicorn, one process per core), the Celery worker (which runs the scheduling cycle on the
simulated cluster), Celery beat and the simulated node agents; a process that dies is started again while the others keep serving.
Every line goes to the terminal prefixed with its process name; Ctrl-C stops everything.

`--only web,worker` runs a subset (tests).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
NAMES = ("redis", "web", "worker", "beat", "agents")


def web_workers() -> int:
    """WEB_WORKERS, or one server process per core: a process runs Django's synchronous views on a
    single thread, so one process alone leaves the other cores idle under load."""
    return max(1, int(os.environ.get("WEB_WORKERS") or os.cpu_count() or 1))


def web_command(port: int, host: str = "127.0.0.1", workers: int | None = None) -> list[str]:
    """The portal's ASGI server (pages, API and websockets), as `make run` and bench.load start it."""
    return [sys.executable, "-m", "uvicorn", "portal.asgi:application", "--host", host, "--port", str(port),
            "--workers", str(workers or web_workers()), "--lifespan", "off"]


def processes(port: int, var_dir: Path, redis_command: list[str] | None = None) -> dict[str, str]:
    py = shlex.quote(sys.executable)
    tokens = shlex.quote(str(var_dir / "agent-tokens.json"))
    procs = {"redis": shlex.join(redis_command)} if redis_command else {}
    procs.update({
        "web": f"DB_POOL=1 exec {shlex.join(web_command(port))}",
        # The scheduling cycle runs on the simulated cluster (or Kubernetes) from this worker.
        "worker": f"exec {py} -m celery -A portal worker -l INFO --concurrency 2 -n worker@%h",
        "beat": f"exec {py} -m celery -A portal beat -l INFO -s {shlex.quote(str(var_dir / 'celerybeat-schedule'))}",
        # One simulated node agent per node of the demo cluster, with its own token and spool. The demo
        # history is made before the stack starts (`make demo`), not beside the worker's cycle.
        "agents": f"{py} manage.py load_demo --no-history --agent-tokens {tokens} && exec {py} -m nodeagent.fleet "
                  f"--portal http://127.0.0.1:{port} --tokens {tokens} --interval 10 "
                  f"--spool-dir {shlex.quote(str(var_dir / 'agents'))}",
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


def config(port: int, var_dir: Path, only: tuple[str, ...] = NAMES, redis_command: list[str] | None = None) -> str:
    sock = var_dir / "supervisor.sock"
    lines = [
        "[supervisord]",
        "nodaemon=true",
        f"logfile={var_dir / 'supervisord.log'}",
        "logfile_maxbytes=10MB",
        f"pidfile={var_dir / 'supervisord.pid'}",
        f"childlogdir={var_dir}",
        "",
        "[unix_http_server]",
        f"file={sock}",
        "chmod=0700",
        "",
        "[rpcinterface:supervisor]",
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
        "",
        "[supervisorctl]",
        f"serverurl=unix://{sock}",
        "",
    ]
    for name, script in processes(port, var_dir, redis_command).items():
        if name not in only:
            continue
        command = shlex.join(["bash", "-c", prefixed(name, script)]).replace("%", "%%")
        lines += [
            f"[program:{name}]",
            f"command={command}",
            f"directory={BASE_DIR}",
            # Redis first; the others retry their connections until it answers.
            f"priority={10 if name == 'redis' else 100}",
            "autorestart=true",
            "startsecs=1",
            "startretries=100",
            # The whole group: Celery's pool children and the sed that prefixes the lines.
            "stopasgroup=true",
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
    parser.add_argument("--only", default=",".join(NAMES), help="comma-separated processes to run")
    args = parser.parse_args(argv)
    only = tuple(n.strip() for n in args.only.split(",") if n.strip())
    if unknown := set(only) - set(NAMES):
        parser.error(f"unknown processes: {', '.join(sorted(unknown))}")

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    from django.conf import settings

    from portal import embedded_redis

    port = int(os.environ.get("PORT", "8000"))
    var_dir = Path(settings.VAR_DIR)
    redis_command = None
    # Another stack already serving this socket keeps it; it is not ours to supervise.
    if settings.EMBEDDED_REDIS and not embedded_redis.is_answering(settings.REDIS_URL):
        redis_command = embedded_redis.server_command(settings.REDIS_URL)
        print(f"embedded redis on {settings.REDIS_URL}", flush=True)
    conf = var_dir / "supervisord.conf"
    conf.write_text(config(port, var_dir, only, redis_command))
    os.environ["PYTHONUNBUFFERED"] = "1"
    os.environ.setdefault("DEMO_LOAD", "1")  # a trickle of demo jobs; DEMO_LOAD=0 turns it off
    print(f"portal: http://127.0.0.1:{port}/  (Ctrl-C stops everything; supervisord config {conf})", flush=True)
    # exec: Ctrl-C reaches supervisord itself, which stops its programs before it exits.
    os.execv(sys.executable, [sys.executable, "-m", "supervisor.supervisord", "-n", "-c", str(conf)])
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())

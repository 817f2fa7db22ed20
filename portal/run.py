"""`make run`: the whole embedded stack in one terminal, stopped cleanly with Ctrl-C.

Starts the project's own Redis (unless REDIS_URL points elsewhere), then Daphne, the Celery
worker (which runs the scheduling cycle on the simulated cluster), Celery beat and the simulated
node agents under honcho, each line prefixed with its process name.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from honcho.manager import Manager
from honcho.printer import Printer

BASE_DIR = Path(__file__).resolve().parent.parent


def processes(port: int, var_dir: Path) -> dict[str, str]:
    py = shlex.quote(sys.executable)
    tokens = shlex.quote(str(var_dir / "agent-tokens.json"))
    return {
        "web": f"DB_POOL=1 {py} -m daphne -b 127.0.0.1 -p {port} portal.asgi:application",
        # The scheduling cycle runs on the simulated cluster (or Kubernetes) from this worker.
        "worker": f"{py} -m celery -A portal worker -l INFO --concurrency 2 -n worker@%h",
        "beat": f"{py} -m celery -A portal beat -l INFO -s {shlex.quote(str(var_dir / 'celerybeat-schedule'))}",
        # One simulated node agent per node of the demo cluster, with its own token and spool.
        "agents": f"{py} manage.py load_demo --agent-tokens {tokens} && exec {py} -m nodeagent.fleet "
                  f"--portal http://127.0.0.1:{port} --tokens {tokens} --interval 10 "
                  f"--spool-dir {shlex.quote(str(var_dir / 'agents'))}",
    }


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    from django.conf import settings

    from portal import embedded_redis

    port = int(os.environ.get("PORT", "8000"))
    redis_proc = None
    if settings.EMBEDDED_REDIS:
        redis_proc = embedded_redis.start(settings.REDIS_URL, log_file=settings.VAR_DIR / "redis.log")
        print(f"embedded redis on {settings.REDIS_URL}", flush=True)
    manager = Manager(Printer(sys.stdout))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.setdefault("DEMO_LOAD", "1")  # a trickle of demo jobs; DEMO_LOAD=0 turns it off
    for name, cmd in processes(port, settings.VAR_DIR).items():
        manager.add_process(name, cmd, env=env, cwd=str(BASE_DIR))
    print(f"portal: http://127.0.0.1:{port}/  (Ctrl-C stops everything)", flush=True)
    try:
        manager.loop()
    finally:
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(timeout=10)
    return manager.returncode or 0


if __name__ == "__main__":
    sys.exit(main())

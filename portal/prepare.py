"""`python -m portal.prepare`: what `make prepare`, `make demo` and `make run` do before anything starts.

Waits for the database, migrates, and collects the static files, then loads the demo data when asked. One
process instead of one per step (each would set Django up again), with collectstatic in a second process
beside the migrations: on a 2-core machine that is seconds off the time from a fresh clone to the first page.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from portal.wait import checks_for, wait_for

DEMO_CHOICES = ("none", "base", "full")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", choices=DEMO_CHOICES, default="none",
                        help="base: the tenants, cluster and prices; full: also the demo month of jobs")
    parser.add_argument("--timeout", type=float, default=float(os.environ.get("WAIT_TIMEOUT_S", "120")))
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    collect = subprocess.Popen([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
                               cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import django

    django.setup()
    from django.core.management import call_command

    if not wait_for(checks_for(redis=False), timeout=args.timeout):
        collect.kill()
        return 1
    call_command("migrate", interactive=False)
    if args.demo != "none":
        call_command("load_demo", no_history=args.demo == "base")
    return collect.wait()


if __name__ == "__main__":
    sys.exit(main())

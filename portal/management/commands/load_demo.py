import logging
from contextlib import contextmanager

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from portal import demo, embedded_redis, wait

WAIT_S = 120


@contextmanager
def quiet_cycles():
    """The month is played through hundreds of scheduling cycles: their reports are not news."""
    logger = logging.getLogger("scheduling.cycle.run")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


@contextmanager
def redis_for_the_load():
    """The demo month is played through the scheduling cycle, which reads Redis (its cache); `make
    demo` runs before `make run` starts the project's Redis, so one is started for the load."""
    proc = embedded_redis.start(settings.REDIS_URL) if settings.EMBEDDED_REDIS else None
    try:
        yield
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)


class Command(BaseCommand):
    help = ("Load the demo data (tenants, cluster, queues, prices, exchange rates, chargeback policies, the last "
            "30 days of jobs). Idempotent.")

    def add_arguments(self, parser):
        parser.add_argument("--agent-tokens", metavar="FILE",
                            help="also write a fresh token per demo node for the simulated agents (JSON, mode 600)")
        parser.add_argument("--no-history", action="store_true",
                            help="leave out the 30 days of demo jobs (a running stack: its worker's cycle would "
                                 "fight the one that plays the month)")

    def handle(self, *args, agent_tokens=None, no_history=False, **options):
        if no_history:
            self._wait(redis=False)
            demo.load_all(history=False)
        else:
            with redis_for_the_load():
                self._wait(redis=True)  # an external REDIS_URL may still be starting
                with quiet_cycles():
                    demo.load_all()
        loaded = "tenants, cluster, queues, prices" + ("" if no_history else ", the last 30 days of jobs")
        self.stdout.write(self.style.SUCCESS(f"Demo data loaded: {loaded}."))
        if agent_tokens:
            count = demo.write_agent_tokens(agent_tokens)
            self.stdout.write(f"{count} node tokens written to {agent_tokens}")

    def _wait(self, *, redis: bool) -> None:
        if not wait.wait_for(wait.checks_for(redis=redis), timeout=WAIT_S, say=self.stdout.write):
            raise CommandError("the demo data needs the database and Redis; see above")

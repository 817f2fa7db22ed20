"""`manage.py create_join_token --pool P [--ttl 1h]`: a join token for one pool, printed once. Agents
post it with their node name to /api/v1/agent/join and receive their own node token."""

import re
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from billing.api import create_join_token
from scheduling.models import NodePool

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_ttl(text: str) -> timedelta:
    found = re.fullmatch(r"(\d+)([smhd])", text.strip())
    if not found or int(found[1]) == 0:
        raise CommandError(f"--ttl {text!r}: write a positive number and a unit, e.g. 30m, 1h, 7d")
    return timedelta(seconds=int(found[1]) * UNITS[found[2]])


class Command(BaseCommand):
    help = "Create a join token for one pool (printed once; only its hash is kept)."

    def add_arguments(self, parser):
        parser.add_argument("--pool", required=True, help="the pool its agents' nodes join")
        parser.add_argument("--ttl", default="1h", help="how long it is valid: 30m, 1h, 7d (default 1h)")

    def handle(self, *args, pool: str, ttl: str, **options):
        found = NodePool.objects.filter(name=pool).first()
        if found is None:
            raise CommandError(f"no pool named {pool!r}")
        try:
            token, raw = create_join_token(found, parse_ttl(ttl))
        except ValueError as error:
            raise CommandError(str(error)) from None
        self.stderr.write(f"join token for pool {found.name}, valid until {token.expires:%Y-%m-%d %H:%M} UTC")
        self.stdout.write(raw)

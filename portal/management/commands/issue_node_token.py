"""`manage.py issue_node_token NODE [--rotate]`: a new agent token for a node, printed once (only its
hash is kept). --rotate revokes the node's other tokens in the same step."""

from django.core.management.base import BaseCommand, CommandError

from portal.console import services
from scheduling.models import Node


class Command(BaseCommand):
    help = "Issue a node agent token (printed once; only its hash is kept). --rotate revokes the node's others."

    def add_arguments(self, parser):
        parser.add_argument("node", help="the node's name (add it first on /console/nodes/)")
        parser.add_argument("--rotate", action="store_true", help="revoke the node's other tokens")

    def handle(self, *args, node: str, rotate: bool, **options):
        found = Node.objects.filter(name=node).first()
        if found is None:
            raise CommandError(f"no node named {node!r}: add it on /console/nodes/ first")
        revoked = services.rotate_node_tokens(None, found) if rotate else 0
        _token, raw = services.create_node_token(None, found)
        if rotate:
            self.stderr.write(f"revoked {revoked} earlier token(s) of {found.name}")
        self.stdout.write(raw)

import json
import os

from django.core.management.base import BaseCommand

from billing.models import NodeToken
from portal.api.agent import create_node_token
from portal.demo.cluster import DEMO_POOLS
from scheduling import clock
from scheduling.models import Node


class Command(BaseCommand):
    help = "Demo only: a fresh token per node of the demo pools for the simulated agents (their old ones are revoked)."

    def add_arguments(self, parser):
        parser.add_argument("--output", required=True, help="JSON file for nodeagent.fleet (mode 600)")

    def handle(self, *args, output, **options):
        nodes = Node.objects.filter(pool__name__in=DEMO_POOLS).select_related("pool").prefetch_related("gpus")
        NodeToken.objects.filter(node__in=nodes, revoked__isnull=True).update(revoked=clock.now())
        fleet = {}
        for node in nodes:
            _, raw = create_node_token(node)
            fleet[node.name] = {"token": raw, "gpus": node.gpus.count(), "model": node.pool.gpu_model,
                                "memory_mib": node.pool.gpu_memory_mib}
        fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(fleet, out)
        self.stdout.write(f"{len(fleet)} node tokens written to {output}")

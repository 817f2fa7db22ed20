from django.core.management.base import BaseCommand

from portal import demo


class Command(BaseCommand):
    help = "Load the demo data (tenants, cluster, queues, prices, two weeks of usage). Idempotent."

    def add_arguments(self, parser):
        parser.add_argument("--agent-tokens", metavar="FILE",
                            help="also write a fresh token per demo node for the simulated agents (JSON, mode 600)")

    def handle(self, *args, agent_tokens=None, **options):
        demo.load_all()
        self.stdout.write(self.style.SUCCESS("Demo data loaded: tenants, cluster, queues, prices, usage history."))
        if agent_tokens:
            count = demo.write_agent_tokens(agent_tokens)
            self.stdout.write(f"{count} node tokens written to {agent_tokens}")

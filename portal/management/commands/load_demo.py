from django.core.management.base import BaseCommand

from billing.reports.services import load_demo_usage
from portal.demo import cluster as scheduling_demo
from portal.demo import prices as billing_demo
from portal.demo import tenants as demo


class Command(BaseCommand):
    help = "Load the demo tenants (and, as they land, the cluster, queues and prices). Idempotent."

    def handle(self, *args, **options):
        demo.load_tenants()
        scheduling_demo.load_cluster()
        scheduling_demo.load_queues()
        billing_demo.load_prices()
        load_demo_usage()  # two weeks of finished demo jobs, so the reports have a last week
        self.stdout.write(self.style.SUCCESS("Demo data loaded: tenants, cluster (6 pools), queues, prices."))

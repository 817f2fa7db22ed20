from django.core.management.base import BaseCommand

from billing import demo as billing_demo
from billing.report_services import load_demo_usage
from portal import demo
from scheduling import demo as scheduling_demo


class Command(BaseCommand):
    help = "Load the demo tenants (and, as they land, the cluster, queues and prices). Idempotent."

    def handle(self, *args, **options):
        demo.load_tenants()
        scheduling_demo.load_cluster()
        scheduling_demo.load_queues()
        billing_demo.load_prices()
        load_demo_usage()  # two weeks of finished demo jobs, so the reports have a last week
        self.stdout.write(self.style.SUCCESS("Demo data loaded: tenants, cluster (6 pools), queues, prices."))

from django.core.management.base import BaseCommand

from portal import demo


class Command(BaseCommand):
    help = "Load the demo tenants (and, as they land, the cluster, queues and prices). Idempotent."

    def handle(self, *args, **options):
        demo.load_tenants()
        self.stdout.write(self.style.SUCCESS("Demo data loaded: admin, alice, bob, finance; vision-lab, nlp-group."))

"""The workspace page in the browser: each of the workspace's queues with its 7-day allocation chart
drawn, and the waiting jobs with their position and expected start. Screenshot in var/screenshots/."""

from datetime import timedelta
from decimal import Decimal

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import login, shot

from billing.services import submit_quoted_job
from portal.console.models import QueueAllocationSample
from scheduling import clock
from scheduling.models import Queue
from tests.world import PASSWORDS

SPEC = """name: waits-for-h100
queue: vision-lab
expectedDuration: 1h
roles:
  - name: main
    image: busybox
    resources: {gpu: 8}
    nodePool: h100
"""


@pytest.mark.django_db(transaction=True)
def test_the_workspace_page_charts_each_queue_and_lists_waiting_jobs(live_daphne, cluster, page):
    now = clock.now()
    for name in ("vision-lab", "community"):
        queue = Queue.objects.get(name=name)
        QueueAllocationSample.objects.bulk_create(
            QueueAllocationSample(queue=queue, time=now - timedelta(minutes=m), allocated_gpus=Decimal(m % 7),
                                  deserved_gpus=queue.deserved_gpus, fair_share_gpus=Decimal(20))
            for m in range(5, 600, 5))
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC)
    login(page, live_daphne, "alice", PASSWORDS["alice"])
    page.goto(f"{live_daphne.url}/w/vision-lab/")
    expect(page.locator('#queue-figures tr[data-queue="vision-lab"] [data-field="deserved"]')).to_have_text("16")
    for name in ("vision-lab", "community"):
        chart = page.locator(f'[data-queue-history="{name}"]')
        expect(chart).to_have_attribute("data-drawn", "1")
        expect(chart.locator(".scatterlayer .trace")).to_have_count(3)
    waiting = page.locator(f'#waiting-jobs-table tr[data-job="{job.pk}"]')
    expect(waiting.locator('[data-field="position"]')).to_have_text("1")
    # nothing runs: the next cycle places it, within seconds (one minute shown, or a range of two)
    expect(waiting.locator('[data-field="expected-start"] time').first).to_be_visible()
    expect(waiting.locator('[data-field="expected-start"]')).not_to_contain_text("unknown")
    shot(page, "workspace-queues")

"""The queue tree editor in the browser: a queue moved under its own sub-queue is refused with the error
beside the parent field, a valid change is confirmed, a delete asks first, and a queue's 7-day allocation
chart is drawn. Screenshots land in var/screenshots/."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import login, shot

from portal.console.models import AuditEntry, QueueAllocationSample
from scheduling import clock
from scheduling.models import Queue
from tests.factories import QueueFactory
from tests.world import PASSWORDS


@pytest.fixture
def research(cluster):
    """root > research (8 GPUs) > research-a (8 GPUs), a branch no workspace submits to."""
    research = QueueFactory(name="research", parent=Queue.objects.get(name="root"), deserved_gpus=Decimal(8))
    QueueFactory(name="research-a", parent=research, deserved_gpus=Decimal(8))
    return research


@pytest.mark.django_db(transaction=True)
def test_a_queue_loop_is_refused_beside_the_parent_field(live_daphne, research, page):
    login(page, live_daphne, "admin", PASSWORDS["admin"])
    page.click("#nav-console")
    page.click(".subnav >> text=Queues")
    expect(page.locator('tr[data-queue="research-a"]')).to_have_attribute("data-depth", "2")
    expect(page.locator('tr[data-queue="research"] [data-field="sub-deserved"]')).to_have_text("sub-queues 8.00")
    shot(page, "console-queue-tree")

    page.locator('tr[data-queue="research"] a', has_text="research").first.click()
    expect(page.locator("label[for=f-parent]")).to_have_text("Parent queue:")
    page.select_option("#f-parent", "research-a")       # under its own sub-queue
    page.click("#save-queue")
    parent_row = page.locator('[data-row="parent"]')
    expect(parent_row.locator('.field-errors[data-field="parent"]')).to_contain_text("the tree would loop")
    expect(page.locator("#f-parent")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#f-parent")).to_have_value("research-a")  # what was refused stays to be corrected
    expect(page.locator('.field-errors[data-field="deserved_gpus"]')).to_have_count(0)
    shot(page, "console-queue-loop-refused")
    assert Queue.objects.get(name="research").parent.name == "root"
    assert not AuditEntry.objects.exists()

    page.select_option("#f-parent", "root")
    page.fill("#f-deserved", "10")
    page.click("#save-queue")
    page.wait_for_url(re.compile(r".*/console/queues/$"))
    expect(page.locator(".flash.success")).to_have_text("Queue research saved.")
    expect(page.locator('tr[data-queue="research"] [data-field="deserved"]')).to_have_text("10.00")


@pytest.mark.django_db(transaction=True)
def test_deleting_a_queue_asks_first(live_daphne, research, page):
    login(page, live_daphne, "admin", PASSWORDS["admin"])
    page.goto(f"{live_daphne.url}/console/queues/")
    page.locator('tr[data-queue="research"] [data-action="delete"]').click()
    expect(page.locator("#delete-refusals")).to_contain_text("it has sub-queues (research-a)")
    expect(page.locator("#confirm-delete")).to_have_count(0)

    page.goto(f"{live_daphne.url}/console/queues/research-a/")
    page.click("#delete-queue")
    expect(page.locator("h1")).to_have_text("Delete queue research-a?")
    shot(page, "console-queue-delete-confirm")
    assert Queue.objects.filter(name="research-a").exists()  # nothing happens before the confirmation
    page.click("#confirm-delete")
    page.wait_for_url(re.compile(r".*/console/queues/$"))
    expect(page.locator(".flash.success")).to_have_text("Queue research-a deleted.")
    expect(page.locator('tr[data-queue="research-a"]')).to_have_count(0)


@pytest.mark.django_db(transaction=True)
def test_a_queues_allocation_chart_over_7_days(live_daphne, cluster, page):
    vision = Queue.objects.get(name="vision-lab")
    now = clock.now()
    # every 5 minutes through two stretches, with the sampler down in between
    minutes = [*range(100 * 60, 90 * 60, -5), *range(30 * 60, 0, -5)]
    QueueAllocationSample.objects.bulk_create(
        QueueAllocationSample(queue=vision, time=now - timedelta(minutes=m), allocated_gpus=Decimal(4 + m // 60 % 21),
                              deserved_gpus=Decimal(16), fair_share_gpus=Decimal(18 if m > 600 else 22))
        for m in minutes)
    login(page, live_daphne, "admin", PASSWORDS["admin"])
    page.goto(f"{live_daphne.url}/console/queues/")
    page.locator('tr[data-queue="vision-lab"] [data-action="history"]').click()
    expect(page.locator("#history-peak")).to_have_text("24.00")
    expect(page.locator("#history-samples")).to_have_text(str(len(minutes)))
    chart = page.locator("#queue-history-chart")
    expect(chart).to_have_attribute("data-drawn", "1")
    expect(chart.locator(".legendtext")).to_have_text(["allocated", "deserved quota", "fair share"])
    expect(chart.locator(".scatterlayer .trace")).to_have_count(3)
    shot(page, "console-queue-history")

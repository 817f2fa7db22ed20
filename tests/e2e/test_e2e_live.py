"""Jobs watched live in the browser: no reloads, the states arrive over the websocket."""

import re

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import SCREENSHOTS, login

from scheduling.spec.examples import SEED_YAML
from tests.world import PASSWORDS

COMMUNITY = """name: {name}
queue: community
priority: {priority}
preemptible: true
expectedDuration: 10h
roles:
  - name: main
    image: busybox
    resources: {{gpu: 8}}
    nodePool: h100
"""


def in_a_thread(work):
    import threading

    from django.db import connection

    def run():
        try:
            work()
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)


def mark_page(page):
    """A marker that a reload would wipe out."""
    page.evaluate("window.__noReload = 'still here'")


def assert_not_reloaded(page):
    assert page.evaluate("window.__noReload") == "still here"


@pytest.mark.django_db(transaction=True)
def test_alice_watches_the_seed_job_run_to_the_end(live_daphne, cluster, page, scheduler_running):
    login(page, live_daphne, "alice", PASSWORDS["alice"])
    page.goto(f"{live_daphne.url}/submit/")
    page.fill("#spec-yaml", SEED_YAML)
    page.locator("#quote-table tr[data-option='a100-spot.exclusive.now'] button.submit-option").click()
    page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
    mark_page(page)
    expect(page.locator("#job-state")).to_have_text("Running", timeout=20000)
    expect(page.locator("#replicas-table tbody tr")).not_to_have_count(0)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "job-running.png"), full_page=True)
    expect(page.locator("#job-state")).to_have_text("Succeeded", timeout=30000)
    expect(page.locator("#events")).to_contain_text("succeeded")
    expect(page.locator("#job-cost")).to_contain_text("Final cost", timeout=10000)
    # nothing stale at the end: how long it ran, its replicas, the log's last line
    expect(page.locator("#job-timing")).to_contain_text("ran ", timeout=10000)
    expect(page.locator("#usage-table tbody tr[data-replica]")).not_to_have_count(0)
    expect(page.locator("#usage-table")).not_to_contain_text("No replica placed yet")
    kept = page.request.get(live_daphne.url + page.locator("#job-log").get_attribute("data-url")).text()
    last = [line for line in kept.splitlines() if line.strip()][-1]
    expect(page.locator("#job-log")).to_contain_text(last.strip(), timeout=10000)
    assert_not_reloaded(page)


@pytest.mark.django_db(transaction=True)
def test_bobs_higher_priority_job_preempts_alices_in_community(live_daphne, cluster, browser, scheduler_running):
    from billing.services import submit_quoted_job

    first = submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                              spec=COMMUNITY.format(name="alice-a", priority=0))
    submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=COMMUNITY.format(name="alice-b", priority=0))
    alice = browser.new_context().new_page()
    login(alice, live_daphne, "alice", PASSWORDS["alice"])
    alice.goto(f"{live_daphne.url}/jobs/")
    expect(alice.locator(f'tr[data-job="{first.pk}"] [data-field="state"]')).to_have_text("Running", timeout=20000)
    mark_page(alice)

    bob = browser.new_context().new_page()
    login(bob, live_daphne, "bob", PASSWORDS["bob"])
    bob_job = submit_quoted_job(user=cluster.bob, workspace=cluster.nlp, spec=COMMUNITY.format(name="bob-urgent",
                                                                                               priority=80))
    bob.goto(f"{live_daphne.url}/jobs/{bob_job.pk}/")
    mark_page(bob)
    expect(bob.locator("#job-state")).to_have_text("Running", timeout=20000)
    # One of alice's jobs was preempted and is waiting again; her list shows it without a reload.
    expect(alice.locator('#jobs-table [data-field="state"]', has_text="Pending")).to_have_count(1, timeout=20000)
    expect(alice.locator('#jobs-table [data-field="pending_reason"]').filter(has_text=re.compile(r"\w"))
           ).not_to_have_count(0)
    assert_not_reloaded(alice)
    assert_not_reloaded(bob)
    alice.screenshot(path=str(SCREENSHOTS / "alice-preempted.png"), full_page=True)
    assert "alice" not in bob.content().lower().split("<main>")[1]  # bob's page shows nothing of alice's


@pytest.mark.django_db(transaction=True)
def test_a_page_that_missed_events_catches_up_once_its_socket_joins(live_daphne, cluster, browser):
    from billing.services import submit_quoted_job
    from scheduling.models import Job

    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=COMMUNITY.format(name="quiet", priority=0))
    page = browser.new_context().new_page()
    login(page, live_daphne, "alice", PASSWORDS["alice"])
    online = []

    def socket(ws):  # offline until the test says so: the page keeps retrying
        if online:
            ws.connect_to_server()
        else:
            ws.close()

    page.route_web_socket(re.compile(r"/ws/jobs/"), socket)
    page.goto(f"{live_daphne.url}/jobs/{job.pk}/")
    expect(page.locator("#job-state")).to_have_text("Pending")
    mark_page(page)
    # the job moves on while the page has no socket; no event will ever tell it
    Job.objects.filter(pk=job.pk).update(state="Running", pending_reason="")
    online.append(True)
    expect(page.locator("#job-state")).to_have_text("Running", timeout=20000)
    assert_not_reloaded(page)


@pytest.mark.django_db(transaction=True)
def test_a_live_event_shows_the_users_time_zone(live_daphne, cluster, page, clock):
    """The event the socket brings (its time in UTC) is written in alice's zone, as the server
    wrote the page's first event."""
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo

    from portal.services import set_time_zone
    from scheduling.models import JobEvent
    from scheduling.services import cancel_job, submit_job
    from scheduling.spec.examples import CLEAN_YAML

    shanghai = ZoneInfo("Asia/Shanghai")
    set_time_zone(cluster.alice, "Asia/Shanghai")
    clock.now = datetime(2026, 3, 1, 23, 30, 5, tzinfo=UTC)
    job = submit_job(user=cluster.alice, workspace=cluster.vision, spec=CLEAN_YAML)
    login(page, live_daphne, "alice", PASSWORDS["alice"])
    page.goto(f"{live_daphne.url}/jobs/{job.pk}/")
    expect(page.locator("#time-zone")).to_have_text("Times in Asia/Shanghai")
    submitted = JobEvent.objects.get(job=job, kind="submitted").time.astimezone(shanghai)
    expect(page.locator("#events li").first).to_contain_text(f"{submitted:%Y-%m-%d %H:%M:%S} submitted")
    expect(page.locator("body")).to_have_attribute("data-live", "connected")
    mark_page(page)
    in_a_thread(lambda: cancel_job(user=cluster.alice, job=job))  # publishing needs a thread without playwright's loop
    cancelled = JobEvent.objects.get(job=job, kind="cancelled").time.astimezone(shanghai)
    expect(page.locator("#events li").last).to_contain_text(f"{cancelled:%Y-%m-%d %H:%M:%S} cancelled")
    assert_not_reloaded(page)

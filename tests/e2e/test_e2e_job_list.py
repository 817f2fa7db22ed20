"""The tenant's jobs in the browser: alice ticks two of her jobs, confirms on the next page and reads what
was done, the third job untouched; the job page draws its replica's utilisation and memory with the
locally served plotly. Screenshots land in var/screenshots/."""

import re
import uuid
from datetime import timedelta

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import login, shot
from tests_job_specs import job_spec

from billing.services import submit_quoted_job
from scheduling import clock
from scheduling.models import Job, JobState
from tests.world import PASSWORDS


@pytest.mark.django_db(transaction=True)
def test_alice_cancels_two_jobs_at_once_after_confirming(live_daphne, cluster, page):
    first, second, keep = (submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec(name))
                           for name in ("sweep-a", "sweep-b", "keep-me"))
    submit_quoted_job(user=cluster.bob, workspace=cluster.nlp, spec=job_spec("bob-run", queue="nlp-group"))
    login(page, live_daphne, "alice", PASSWORDS["alice"])
    page.goto(f"{live_daphne.url}/jobs/?state=Pending")
    rows = page.locator("#jobs-table tbody tr[data-job]")
    expect(rows).to_have_count(3)  # alice's workspace only
    expect(page.locator("#bulk-cancel-button")).to_be_disabled()
    for job in (first, second):
        page.locator(f'tr[data-job="{job.pk}"] input.select-job').check()
    expect(page.locator("#bulk-selected")).to_contain_text("2 jobs selected")
    shot(page, "jobs-list-selected")

    page.click("#bulk-cancel-button")
    expect(page.locator("h1")).to_contain_text("Cancel jobs in Vision Lab")
    expect(page.locator("#bulk-effect")).to_contain_text("2 jobs will end as Cancelled")
    expect(page.locator("#bulk-cancel-table tbody tr")).to_have_count(2)
    assert set(Job.objects.values_list("state", flat=True)) == {JobState.PENDING}  # asking changed nothing
    shot(page, "jobs-bulk-cancel-confirm")

    page.click("#confirm-bulk-cancel")
    page.wait_for_url(re.compile(r".*/jobs/\?state=Pending"))  # back to the filtered list
    expect(page.locator(".flash.success")).to_contain_text(  # in the list's order, newest first
        f"Cancelled 2 jobs: sweep-b #{second.pk}, sweep-a #{first.pk}.")
    expect(rows).to_have_count(1)
    expect(page.locator(f'tr[data-job="{keep.pk}"]')).to_be_visible()
    states = dict(Job.objects.filter(workspace=cluster.vision).values_list("name", "state"))
    assert states == {"sweep-a": JobState.CANCELLED, "sweep-b": JobState.CANCELLED, "keep-me": JobState.PENDING}
    assert Job.objects.get(name="bob-run").state == JobState.PENDING
    shot(page, "jobs-bulk-cancel-done")


@pytest.mark.django_db(transaction=True)
def test_the_job_page_charts_a_replicas_utilisation(live_daphne, cluster, page):
    from billing.models import UsageSample
    from scheduling.models import Node, Replica

    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec("charted"))
    now = clock.now()
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started=now - timedelta(hours=1))
    replica = Replica.objects.create(job=job, role="main", index=0, state=JobState.RUNNING,
                                     node=Node.objects.get(name="h100-01"), gpu_indices=[0],
                                     slice={"kind": "whole", "gpu_milli": 1000}, started=now - timedelta(hours=1))
    for minute in range(0, 60, 5):
        UsageSample.objects.create(id=uuid.uuid4(), node=replica.node, ts=now - timedelta(minutes=60 - minute),
                                   gpu_uuid="GPU-0", gpu_index=0, replica=replica, gpu_util_pct=30 + minute,
                                   mem_used_mib=2048, interval_s=300)
    login(page, live_daphne, "alice", PASSWORDS["alice"])
    page.goto(f"{live_daphne.url}/jobs/{job.pk}/")
    expect(page.locator("#util-chart")).to_have_attribute("data-drawn", "1")
    expect(page.locator("#util-chart .main-svg").first).to_be_visible()
    expect(page.locator("#mem-chart .main-svg").first).to_be_visible()
    expect(page.locator('#usage-table [data-field="mean-util"]')).to_have_text("57.5 %")
    expect(page.locator("#clone-job")).to_have_attribute("href", f"/submit/?from={job.pk}")
    shot(page, "job-usage-charts")

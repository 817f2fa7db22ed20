"""The operators' job list in the browser: an operator finds another tenant's job, cancels it from the
list after a confirmation page, reads what was done, and finds the audit line; screenshots of the
list, the confirmation and the job page land in var/screenshots/."""

import re

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import login, shot
from tests_job_specs import job_spec

from billing.services import submit_quoted_job
from portal.console.models import AuditEntry
from scheduling import clock
from scheduling.models import Job, JobState
from tests.world import PASSWORDS


@pytest.mark.django_db(transaction=True)
def test_operator_cancels_a_job_from_the_list_with_confirmation_and_audit(live_daphne, cluster, page):
    keep = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec("vision-keep"))
    doomed = submit_quoted_job(user=cluster.bob, workspace=cluster.nlp,
                               spec=job_spec("nlp-runaway", queue="nlp-group", gpus=2))
    login(page, live_daphne, "admin", PASSWORDS["admin"])
    page.click("#nav-console")
    page.click("#nav-console-jobs")
    rows = page.locator("#console-jobs-table tbody tr[data-job]")
    expect(rows).to_have_count(2)  # both workspaces
    page.select_option("#id_workspace", "nlp-group")
    page.click("#filter-jobs")
    page.wait_for_url(re.compile(r".*/console/jobs/\?.*workspace=nlp-group"))
    expect(rows).to_have_count(1)
    row = page.locator(f'tr[data-job="{doomed.pk}"]')
    expect(row).to_contain_text("nlp-runaway")
    shot(page, "console-jobs-list")

    row.locator("a.cancel-job").click()
    expect(page.locator("h1")).to_contain_text("Cancel job nlp-runaway")
    expect(page.locator("#action-effect")).to_contain_text("ends as Cancelled")
    assert Job.objects.get(pk=doomed.pk).state == JobState.PENDING  # asking changed nothing
    page.fill("#id_reason", "blocks the queue")
    shot(page, "console-job-cancel-confirm")
    page.click("#confirm-cancel")

    page.wait_for_url(re.compile(r".*/console/jobs/\?.*workspace=nlp-group"))  # back to the filtered list
    expect(page.locator(".flash.success")).to_contain_text(f"Job nlp-runaway #{doomed.pk} cancelled")
    expect(row.locator('[data-field="state"]')).to_have_text("Cancelled")
    expect(row.locator("a.cancel-job")).to_have_count(0)
    assert Job.objects.get(pk=doomed.pk).state == JobState.CANCELLED
    assert Job.objects.get(pk=keep.pk).state == JobState.PENDING
    entry = AuditEntry.objects.get(action="cancel")
    assert (entry.username, entry.target_type, entry.target_id) == ("admin", "scheduling.job", str(doomed.pk))

    page.click(".subnav >> text=Audit log")
    first = page.locator("#audit-table tbody tr").first
    expect(first.locator('[data-field="action"]')).to_have_text("cancel")
    expect(first).to_contain_text(f"nlp-runaway #{doomed.pk}")
    expect(first).to_contain_text("Pending → Cancelled")
    expect(first).to_contain_text("blocks the queue")
    shot(page, "console-jobs-audit")

    page.goto(f"{live_daphne.url}/console/jobs/{doomed.pk}/")
    expect(page.locator("#events")).to_contain_text("cancelled by operator admin: blocks the queue")
    expect(page.locator("#job-state")).to_have_text("Cancelled")
    shot(page, "console-job-page")


@pytest.mark.django_db(transaction=True)
def test_the_operators_job_page_draws_the_jobs_usage(live_daphne, cluster, page):
    from datetime import timedelta

    from billing.ledger.posting import post_ledger
    from scheduling.models import Node, Replica

    job = submit_quoted_job(user=cluster.bob, workspace=cluster.nlp, spec=job_spec("nlp-charted", queue="nlp-group"))
    now = clock.now()
    Replica.objects.create(job=job, role="main", index=0, state=JobState.SUCCEEDED, node=Node.objects.get(name="h100-02"),
                           gpu_indices=[3], slice={"kind": "whole"}, started=now - timedelta(hours=3), ended=now)
    post_ledger(now=now)
    login(page, live_daphne, "admin", PASSWORDS["admin"])
    page.goto(f"{live_daphne.url}/console/jobs/{job.pk}/")
    expect(page.locator('#job-usage p[data-pool="h100"]')).to_contain_text("GPU-hours allocated")
    expect(page.locator("#usage-charts .main-svg").first).to_be_visible()
    expect(page.locator("#replicas-table")).to_contain_text("h100-02")
    shot(page, "console-job-usage")

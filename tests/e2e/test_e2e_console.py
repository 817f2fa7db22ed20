"""The operator console and the tenant dashboard in the browser: a quota change moves the fair
share, a drain moves preemptible jobs (live), alice's dashboard totals are her report's totals,
and a screenshot of every page lands in var/screenshots/."""

import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import login, shot, wait_for
from tests_job_specs import job_spec

from billing.services import submit_quoted_job
from scheduling import clock
from scheduling.models import Job, JobState, Node
from tests.world import PASSWORDS


@pytest.mark.django_db(transaction=True)
def test_operator_changes_a_quota_and_sees_the_fair_share_change(live_daphne, cluster, page):
    # both teams ask for 64 of the 80 GPUs: the spare capacity is split by over-quota weight
    submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec("big-v", gpus=8, max=8))
    submit_quoted_job(user=cluster.bob, workspace=cluster.nlp, spec=job_spec("big-n", queue="nlp-group", gpus=8, max=8))
    login(page, live_daphne, "admin", PASSWORDS["admin"])
    page.click("#nav-console")
    page.click(".subnav >> text=Queues")
    vision = page.locator('tr[data-queue="vision-lab"]')
    expect(vision.locator('[data-field="fair-share"]')).to_have_text("40.00")
    expect(page.locator('tr[data-queue="nlp-group"] [data-field="fair-share"]')).to_have_text("40.00")
    shot(page, "console-queues-before")

    vision.locator("a", has_text="vision-lab").click()
    page.fill("#f-deserved", "70")             # more than root's 80 minus nlp-group's 16
    page.click("#save-queue")
    expect(page.locator('[data-field="deserved_gpus"]')).to_contain_text("more than its 80")
    shot(page, "console-queue-validation-error")

    page.fill("#f-deserved", "30")
    page.fill("#f-limit", "20")                # a limit below the deserved quota
    page.click("#save-queue")
    expect(page.locator('[data-field="limit_gpus"]')).to_contain_text("below the deserved quota")
    page.fill("#f-limit", "")
    page.click("#save-queue")
    page.wait_for_url(re.compile(r".*/console/queues/$"))
    expect(vision.locator('[data-field="deserved"]')).to_have_text("30.00")
    expect(vision.locator('[data-field="fair-share"]')).to_have_text("47.00")   # 30 + (80 - 30 - 16) / 2
    expect(page.locator('tr[data-queue="nlp-group"] [data-field="fair-share"]')).to_have_text("33.00")
    shot(page, "console-queues-after")
    page.click(".subnav >> text=Audit log")
    expect(page.locator("#audit-table tbody tr").first).to_contain_text("vision-lab")
    expect(page.locator("#audit-table tbody tr").first).to_contain_text("16 → 30")
    shot(page, "console-audit")


@pytest.mark.django_db(transaction=True)
def test_operator_drains_a_node_and_sees_its_preemptible_job_move(live_daphne, cluster, page, scheduler_running):
    Node.objects.filter(name="h100-02").update(cordoned=True)  # both jobs start on h100-01
    movable = submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                                spec=job_spec("movable", preemptible="true", gpus=4, hours=100))
    fixed = submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                              spec=job_spec("fixed", preemptible="false", gpus=4, hours=100))
    wait_for(lambda: Job.objects.filter(pk__in=(movable.pk, fixed.pk), state=JobState.RUNNING).count() == 2)
    Node.objects.filter(name="h100-02").update(cordoned=False)

    login(page, live_daphne, "admin", PASSWORDS["admin"])
    page.goto(f"{live_daphne.url}/console/nodes/")
    node1, node2 = page.locator('tr[data-node="h100-01"]'), page.locator('tr[data-node="h100-02"]')
    expect(node1.locator(f'[data-job="{movable.pk}"]')).to_have_count(1)
    expect(node1.locator(f'[data-job="{fixed.pk}"]')).to_have_count(1)
    node1.locator("a.drain").click()
    expect(page.locator(f'#drain-moves tr[data-job="{movable.pk}"]')).to_be_visible()
    expect(page.locator(f'#drain-stays tr[data-job="{fixed.pk}"]')).to_be_visible()
    expect(page.locator("#drain-moves")).not_to_contain_text("fixed")
    shot(page, "console-drain-preview")
    page.click("#confirm-drain")
    page.wait_for_url(re.compile(r".*/console/nodes/$"))
    expect(page.locator("body")).to_have_attribute("data-live", "connected")
    # the preemptible job shows up on h100-02 without a reload; the other keeps running on h100-01
    expect(node2.locator(f'[data-job="{movable.pk}"]')).to_have_count(1, timeout=20000)
    expect(node1.locator(f'[data-job="{movable.pk}"]')).to_have_count(0)
    expect(node1.locator(f'[data-job="{fixed.pk}"]')).to_have_count(1)
    expect(node1.locator('[data-field="state"]')).to_have_text("cordoned")
    shot(page, "console-nodes-after-drain")
    assert Job.objects.get(pk=movable.pk).events.filter(kind="preempted", data__reason="drain").exists()
    assert not Job.objects.get(pk=fixed.pk).events.filter(kind="preempted").exists()

    page.click(".subnav >> text=Dashboard")
    expect(page.locator("#cluster-heatmap .main-svg").first).to_be_visible()
    expect(page.locator('#queues-card tr[data-queue="vision-lab"] [data-field="allocated"]')).to_have_text("8.00")
    shot(page, "console-dashboard")


def _finished_jobs(cluster, *, days_ago: int, name: str, hours: int = 2):
    """A finished job of alice's and one of bob's that ran `hours` hours `days_ago` days back (today:
    within the last hours), with the agents' usage samples, posted to the ledger."""
    import uuid

    from billing.ledger.posting import post_ledger
    from billing.models import UsageSample
    from billing.reports.services import day_bounds
    from billing.time_zone import platform_tz
    from scheduling.models import Replica

    now = clock.now()
    end = now - timedelta(days=days_ago)
    start = end - timedelta(hours=hours)
    if days_ago == 0:  # within today, so that this month has a cost at any hour
        start = max(day_bounds(now.astimezone(platform_tz()).date())[0], start)
    for user, workspace, node in [(cluster.alice, cluster.vision, "h100-01"), (cluster.bob, cluster.nlp, "h100-02")]:
        job = submit_quoted_job(user=user, workspace=workspace,
                                spec=job_spec(f"{workspace.slug}-{name}", queue=workspace.slug))
        replica = Replica.objects.create(job=job, role="main", index=0, state=JobState.SUCCEEDED,
                                         node=Node.objects.get(name=node), gpu_indices=[0],
                                         slice={"kind": "whole"}, started=start, ended=end)
        Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, started=start, finished=end)
        for minute in range(0, int((end - start).total_seconds() // 60), 5):
            UsageSample.objects.create(id=uuid.uuid4(), node=replica.node, ts=start + timedelta(minutes=minute),
                                       gpu_uuid="GPU-0", gpu_index=0, replica=replica, gpu_util_pct=40,
                                       mem_used_mib=4096, interval_s=300)
    post_ledger(now=now)


def _usage_this_month(cluster):
    """Finished jobs of alice's and bob's today and on the days before (the dashboard's days chart)."""
    for days_ago in (3, 2, 1, 0):
        _finished_jobs(cluster, days_ago=days_ago, name=f"day-{days_ago}", hours=3 if days_ago == 0 else 2)


def _number(text):
    return float(re.sub(r"[^0-9.\-]", "", text))


@pytest.mark.django_db(transaction=True)
def test_alices_dashboard_totals_equal_her_reports_totals(live_daphne, cluster, page):
    _usage_this_month(cluster)
    login(page, live_daphne, "alice", PASSWORDS["alice"])
    page.goto(f"{live_daphne.url}/")
    expect(page.locator("#chart-days .main-svg").first).to_be_visible()
    totals = page.locator("#tenant-totals")
    mine = {k: _number(totals.locator(f'[data-total="{k}"]').inner_text())
            for k in ("cost", "allocated_gpu_hours", "used_gpu_hours")}
    assert mine["cost"] > 0 and mine["allocated_gpu_hours"] > 0
    expect(page.locator("#tenant-totals")).not_to_contain_text("nlp")
    shot(page, "tenant-dashboard")
    page.click("#report-link")
    report = page.locator("#totals")
    theirs = {k: _number(report.locator(f'[data-total="{k}"]').first.inner_text()) for k in mine}
    assert theirs == mine
    expect(page.locator("#by-workspace tr[data-workspace]")).to_have_count(1)
    shot(page, "tenant-report-same-month")


@pytest.mark.django_db(transaction=True)
def test_screenshot_of_every_console_page(live_daphne, cluster, page):
    from portal.console.services import create_node_token

    _finished_jobs(cluster, days_ago=1, name="yesterday")  # the allocation vs utilisation charts have data
    admin = cluster.alice.__class__.objects.get(username="admin")
    create_node_token(admin, Node.objects.get(name="h100-01"))
    submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec("waiting", gpus=8, min=2, max=2))
    login(page, live_daphne, "admin", PASSWORDS["admin"])
    for name, path, ready in [
        ("console-pools", "/console/pools/", "#pools-table"),
        ("console-pool-edit", "/console/pools/h100-mig/", "#pool-form"),
        ("console-nodes", "/console/nodes/", ".nodes-table"),
        ("console-workspaces", "/console/workspaces/", "#workspaces-table"),
        ("console-workspace", "/console/workspaces/vision-lab/", "#members"),
        ("console-prices", "/console/prices/", "#price-form"),
        ("console-tokens", "/console/tokens/", "#tokens-table"),
        ("console-advice", "/console/advice/?params_b=13&task=training&precision=bf16", "#advice-options"),
        ("console-dashboard-pending", "/console/", "#cluster-heatmap .main-svg"),
    ]:
        page.goto(f"{live_daphne.url}{path}")
        expect(page.locator(ready).first).to_be_visible()
        shot(page, name)
    page.goto(f"{live_daphne.url}/console/tokens/")
    page.locator('tr[data-node="h100-02"] button.create-token').click()
    expect(page.locator("#raw-token")).to_contain_text("gpn_")
    shot(page, "console-token-created")
    page.goto(f"{live_daphne.url}/console/")
    expect(page.locator("#pending-table")).to_contain_text("waiting")
    expect(page.locator("#fragmentation-table tr[data-pool='h100']")).to_be_visible()
    expect(page.locator("#usage-charts .main-svg").first).to_be_visible()
    expect(page.locator("#waste-table tr[data-pool]").first).to_be_visible()
    shot(page, "console-dashboard-usage")

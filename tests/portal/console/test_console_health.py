"""The console's Health and Capacity pages, the idle policy form, and the idle flag and forecast on
the tenants' pages: staff only on the console, each tenant sees only its own."""

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client

from billing.idle.services import check_idle_gpus
from billing.models import Budget, ChargeLine, UsageSample
from portal.console.models import AuditEntry
from scheduling.cycle.inventory import record_heartbeat
from scheduling.models import Gpu, IdleAction, JobState, Node, NodePool

CONSOLE_PAGES = ["/console/health/", "/console/health/?partial=1", "/console/health/pools/h100/idle/",
                 "/console/capacity/"]


def client_for(user):
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("url", CONSOLE_PAGES)
def test_console_health_pages_are_for_operators_only(cluster, url):
    assert Client().get(url).status_code == 302  # to the login page
    assert client_for(cluster.alice).get(url).status_code == 403
    assert client_for(cluster.admin).get(url).status_code == 200


def test_a_tenant_cannot_change_an_idle_policy(cluster):
    response = client_for(cluster.bob).post("/console/health/pools/h100/idle/", {
        "idle_threshold_pct": 50, "idle_window_min": 5, "idle_action": "notify-then-stop", "idle_grace_min": 0})
    assert response.status_code == 403
    assert NodePool.objects.get(name="h100").idle_threshold_pct == 5


@pytest.fixture
def idle_job(cluster, submit, backend, clock, run, django_capture_on_commit_callbacks):
    """alice's job on h100, idle for 31 minutes and flagged; the nodes' agents report."""
    for name in ("h100-01", "h100-02"):
        record_heartbeat(Node.objects.get(name=name), [
            {"index": 0, "uuid": f"GPU-{name}-0", "memory_mib": 81920, "model": "NVIDIA H100 80GB HBM3",
             "util_pct": 1.0, "memory_used_mib": 512, "temperature_c": 38, "ecc_uncorrected": 4, "xid_count": 1,
             "xid_last": 79}], {"agent_version": "0.1.0"})
    job = submit(cluster, "sleepy", gpus=1, hours=10)
    run(backend, clock)
    clock.advance(1)
    run(backend, clock)
    replica = job.replicas.get(state=JobState.RUNNING)
    for _ in range(31):
        clock.advance(60)
        UsageSample.objects.create(id=uuid.uuid4(), node=replica.node, ts=clock.now, gpu_uuid="x",
                                   gpu_index=replica.gpu_indices[0], pod_uid=str(replica.uid), replica=replica,
                                   gpu_util_pct=0.5, interval_s=60)
    for name in ("h100-01", "h100-02"):
        record_heartbeat(Node.objects.get(name=name), [])
    with django_capture_on_commit_callbacks(execute=True):
        assert check_idle_gpus(now=clock.now).flagged == [replica]
    return job, replica


def test_health_shows_heartbeats_versions_gpu_figures_holders_and_idle_slices(admin_client, idle_job):
    job, replica = idle_job
    page = admin_client.get("/console/health/").content.decode()
    node = page.split(f'data-node="{replica.node.name}"')[1].split("</tbody>")[0]
    assert 'data-state="Ready"' in page.split(f'data-node="{replica.node.name}"')[1][:40]
    assert "0 s ago" in node and "0.1.0" in node
    assert "NVIDIA H100 80GB HBM3" in node and "38 °C" in node and "1 (last 79)" in node and "512 / 81920" in node
    assert f'data-job="{job.pk}"' in node and "alice" in node and "idle since" in node
    idle = page.split('id="idle-table"')[1].split("</table>")[0]
    assert f'data-job="{job.pk}"' in idle and "never (notify only)" in idle
    assert 'id="stat-idle">1<' in page and 'id="stat-gpu-errors">2<' in page
    nodes_page = admin_client.get("/console/nodes/").content.decode()
    assert "idle since" in nodes_page.split(f'data-node="{replica.node.name}"')[1].split("</tr>")[0]


def test_health_shows_a_silent_node_as_not_ready(admin_client, cluster, clock, backend, run):
    for name in ("h100-01", "h100-02"):
        record_heartbeat(Node.objects.get(name=name), [])
    run(backend, clock)
    for _ in range(4):
        clock.advance(20)
        record_heartbeat(Node.objects.get(name="h100-02"), [])
        run(backend, clock)
    page = admin_client.get("/console/health/?partial=1").content.decode()
    assert 'data-node="h100-01" data-state="NotReady"' in page and "its agent is silent" in page
    assert 'data-node="h100-02" data-state="Ready"' in page
    assert 'data-node="rtx4090-01" data-state="Ready"' in page  # never reported: never judged
    assert "never" in page.split('data-node="rtx4090-01"')[1].split("</tbody>")[0]
    assert 'id="stat-not-ready">1<' in page
    nodes = admin_client.get("/console/nodes/").content.decode()
    assert "not ready (agent silent)" in nodes.split('data-node="h100-01"')[1].split("</tr>")[0]
    audit = admin_client.get("/console/audit/").content.decode()
    assert "not ready" in audit and "h100-01" in audit


def test_health_warns_when_every_agent_is_silent(admin_client, cluster, clock, backend, run):
    for name in ("h100-01", "h100-02"):
        record_heartbeat(Node.objects.get(name=name), [])
    run(backend, clock)
    clock.advance(120)
    run(backend, clock)
    page = admin_client.get("/console/health/").content.decode()
    assert 'id="agents-late"' in page and "2 nodes have not reported" in page
    assert not Node.objects.filter(agent_silent=True).exists()


def test_the_idle_policy_form_saves_audits_and_confirms(admin_client, cluster):
    assert "Threshold (% utilisation)" in admin_client.get("/console/health/pools/h100/idle/").content.decode()
    response = admin_client.post("/console/health/pools/h100/idle/", {
        "idle_threshold_pct": 10, "idle_window_min": 45, "idle_action": IdleAction.NOTIFY_THEN_STOP,
        "idle_grace_min": 20, "idle_stop_training": "1"}, follow=True)
    assert response.redirect_chain[-1][0].endswith("/console/health/#idle-policies")
    assert "Idle policy of pool h100 saved." in response.content.decode()
    pool = NodePool.objects.get(name="h100")
    assert (pool.idle_threshold_pct, pool.idle_window_min, pool.idle_action, pool.idle_grace_min,
            pool.idle_stop_training) == (10, 45, "notify-then-stop", 20, True)
    entry = AuditEntry.objects.get(action="idle policy")
    assert entry.username == "admin" and entry.changes["idle_threshold_pct"] == [5, 10]


@pytest.mark.parametrize(("data", "field"), [
    ({"idle_threshold_pct": 150}, "idle_threshold_pct"),
    ({"idle_window_min": 0}, "idle_window_min"),
    ({"idle_window_min": "half an hour"}, "idle_window_min"),
    ({"idle_action": "explode"}, "idle_action"),
    ({"idle_grace_min": -5}, "idle_grace_min"),
])
def test_a_bad_idle_policy_is_refused_beside_its_field_and_changes_nothing(admin_client, cluster, data, field):
    good = {"idle_threshold_pct": 5, "idle_window_min": 30, "idle_action": "notify", "idle_grace_min": 30}
    response = admin_client.post("/console/health/pools/h100/idle/", {**good, **data})
    assert response.status_code == 400
    page = response.content.decode()
    assert f'data-field="{field}"' in page
    pool = NodePool.objects.get(name="h100")
    assert (pool.idle_threshold_pct, pool.idle_window_min, pool.idle_action) == (5, 30, "notify")
    assert not AuditEntry.objects.exists()


def test_the_tenant_job_page_shows_the_idle_spell_to_its_workspace_only(cluster, idle_job):
    job, replica = idle_job
    page = client_for(cluster.carol).get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="job-idle"' in page and "Idle since" in page and "below 5 % GPU utilisation for 30 min" in page
    assert client_for(cluster.bob).get(f"/jobs/{job.pk}/").status_code == 404


def test_a_busy_job_page_has_no_idle_badge(cluster, submit, backend, clock, run):
    job = submit(cluster, "busy", gpus=1, hours=10)
    run(backend, clock)
    assert 'id="job-idle"' not in client_for(cluster.alice).get(f"/jobs/{job.pk}/").content.decode()


def usage_line(workspace, day_offset, cost, *, clock, idle="0.5", submitter="alice"):
    hour = (clock.now - timedelta(days=day_offset)).replace(minute=0, second=0, microsecond=0)
    day = hour.date()
    return ChargeLine.objects.create(
        hour=hour, day=day, period=day.replace(day=1), charge_start=hour, charge_end=hour + timedelta(hours=1),
        workspace=workspace, pool="h100", submitter=submitter, allocated_gpu_hours=1, idle_gpu_hours=Decimal(idle),
        used_gpu_hours=1 - Decimal(idle), cost=Decimal(cost), currency="USD", provisional=False, computed_at=hour)


def test_capacity_page_shows_idle_cost_unallocated_capacity_submitters_and_forecasts(admin_client, cluster, clock):
    usage_line(cluster.vision, 1, "6.00", clock=clock)
    usage_line(cluster.vision, 1, "2.00", clock=clock, submitter="carol")
    usage_line(cluster.nlp, 2, "4.00", clock=clock, idle="0", submitter="bob")
    page = admin_client.get("/console/capacity/?workspace=vision-lab").content.decode()
    idle = page.split('id="idle-cost"')[1].split("</section>")[0]
    assert 'data-workspace="vision-lab" data-pool="h100"' in idle and "$4.00" in idle  # half of 8.00 idle
    unallocated = page.split('id="unallocated"')[1].split("</section>")[0]
    assert 'data-pool="h100"' in unallocated and 'data-pool="mi300x"' in unallocated
    submitters = page.split('id="submitters"')[1].split("</section>")[0]
    assert 'data-submitter="alice"' in submitters and 'data-submitter="carol"' in submitters
    assert "bob" not in submitters
    forecasts = page.split('id="forecasts"')[1].split("</section>")[0]
    assert 'data-workspace="vision-lab"' in forecasts and 'data-workspace="nlp-group"' in forecasts
    people = page.split('id="idle-by-person"')[1].split("</section>")[0]
    assert people.index('data-person="alice"') < people.index('data-person="carol"') < people.index('data-person="bob"')
    alice = people.split('data-person="alice"')[1].split("</tr>")[0]
    assert "0.50" in alice and "$3.00" in alice  # half of alice's 6.00 idle


@pytest.mark.parametrize(("query", "status"), [("start=yesterday", 400), ("start=2026-03-10&end=2026-03-01", 422),
                                                ("workspace=nobody", 404), ("start=2026-03-01%00", 400)])
def test_capacity_page_refuses_bad_filters(admin_client, cluster, query, status):
    response = admin_client.get(f"/console/capacity/?{query}")
    assert response.status_code == status


def test_the_forecast_is_beside_the_budget_for_operators_and_members_only(admin_client, cluster, clock):
    usage_line(cluster.vision, 1, "10.00", clock=clock)
    Budget.objects.create(workspace=cluster.vision, amount=Decimal("1.00"))
    console = admin_client.get("/console/workspaces/vision-lab/").content.decode()
    assert 'id="forecast"' in console and "Month-end forecast" in console and "over budget" in console
    reports = client_for(cluster.carol).get("/reports/").content.decode()
    assert 'data-workspace="vision-lab" data-field="forecast"' in reports and "Month-end forecast" in reports
    outsider = client_for(cluster.bob).get("/reports/").content.decode()
    assert 'data-workspace="vision-lab" data-field="forecast"' not in outsider
    assert 'data-workspace="nlp-group" data-field="forecast"' in outsider


def test_heartbeat_figures_are_shown_as_unknown_when_not_reported(admin_client, cluster):
    Gpu.objects.filter(node__name="mi300x-01").update(util_pct=None, temperature_c=None)
    page = admin_client.get("/console/health/").content.decode()
    row = page.split('data-node="mi300x-01"')[1].split("</tr>")[0]
    assert 'data-field="temperature">–<' in row and 'data-field="util">–<' in row


def test_health_flags_a_gpu_of_another_model_than_its_pools(admin_client, cluster):
    pool = NodePool.objects.get(name="h100")
    node = pool.nodes.order_by("name").first()
    record_heartbeat(node, [
        {"index": 0, "uuid": f"GPU-{node.name}-0", "memory_mib": 81920, "model": "NVIDIA A100-SXM4-80GB"},
        {"index": 1, "uuid": f"GPU-{node.name}-1", "memory_mib": 81559, "model": "NVIDIA H100 80GB HBM3"}],
        {"agent_version": "0.1.0"})
    page = admin_client.get("/console/health/?partial=1").content.decode()
    rows = page.split(f'data-node="{node.name}"')[1].split("</tbody>")[0]
    first, second = rows.split('data-gpu="0"')[1].split("</tr>")[0], rows.split('data-gpu="1"')[1].split("</tr>")[0]
    assert 'class="other-model"' in first and f"the pool's cards are {pool.gpu_model} with {pool.gpu_memory_mib} MiB" in first, first
    assert 'class="other-model"' not in second and "NVIDIA H100 80GB HBM3" in second
    assert 'id="stat-other-model">1<' in page
    chinese = admin_client.get("/console/health/?partial=1", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "型号与资源池不符的 GPU" in chinese

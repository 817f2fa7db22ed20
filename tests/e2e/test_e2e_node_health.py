"""Node health in the browser: real node agents report to the real server; the one whose agent stops
turns NotReady on the console's Health page and its job moves to the other node. An idle GPU slice is
flagged on the console and on the tenant's job page. Screenshots land in var/screenshots/."""

import subprocess
import sys
import uuid
from datetime import timedelta

import httpx
import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import login, shot, wait_for
from tests_job_specs import job_spec

from billing.idle.services import check_idle_gpus
from billing.metering.tokens import create_node_token
from billing.services import submit_quoted_job
from portal.testing import ROOT, child_env
from scheduling import clock
from scheduling.models import JobState, Node, Replica
from tests.world import PASSWORDS


def start_agent(server, node, tmp_path):
    _, token = create_node_token(Node.objects.get(name=node))
    # every 2 s a sample, an assignments read and a heartbeat: 90 requests a minute, under the agent rate limit
    return subprocess.Popen(
        [sys.executable, "-m", "nodeagent", "--portal", server.url, "--collector", "simulated", "--interval", "2",
         "--heartbeat-every", "1", "--node", node, "--spool", str(tmp_path / f"{node}.sqlite"), "--sim-gpus", "8",
         "--backoff-cap", "1"],
        cwd=ROOT, env=child_env(GPU_AGENT_TOKEN=token), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.django_db(transaction=True)
def test_a_node_whose_agent_stops_turns_not_ready_and_its_job_moves(live_daphne, cluster, page, scheduler_running,
                                                                     settings, tmp_path):
    settings.NODE_NOT_READY_AFTER_S = 6  # the cycle runs in this process
    agents = {name: start_agent(live_daphne, name, tmp_path) for name in ("h100-01", "h100-02")}
    try:
        wait_for(lambda: Node.objects.filter(name__in=agents, agent_version__gt="").count() == 2, timeout=30.0)
        job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                                spec=job_spec("long-train", gpus=8, hours=1000))
        wait_for(lambda: Replica.objects.filter(job=job, state=JobState.RUNNING).exists(), timeout=30.0)
        lost = Replica.objects.get(job=job, state=JobState.RUNNING).node.name
        other = ({"h100-01", "h100-02"} - {lost}).pop()

        login(page, live_daphne, "admin", PASSWORDS["admin"])
        page.click("#nav-console")
        page.click("#nav-console-health")
        lost_row, other_row = page.locator(f'tbody[data-node="{lost}"]'), page.locator(f'tbody[data-node="{other}"]')
        expect(lost_row).to_have_attribute("data-state", "Ready")
        expect(lost_row.locator('[data-field="agent"]')).to_have_text("0.1.0")
        expect(lost_row.locator('[data-field="temperature"]').first).to_contain_text("°C")
        expect(lost_row.locator(f'[data-field="holders"] [data-job="{job.pk}"]')).to_have_count(8)
        shot(page, "console-health-ready")

        agents[lost].terminate()
        agents[lost].wait(timeout=15)
        # the page re-reads itself every 10 s: NotReady once the agent is silent for 6 s, and the job moved
        expect(lost_row).to_have_attribute("data-state", "NotReady", timeout=40000)
        expect(lost_row.locator('[data-field="state"]')).to_contain_text("its agent is silent")
        expect(other_row.locator(f'[data-field="holders"] [data-job="{job.pk}"]')).to_have_count(8, timeout=30000)
        expect(other_row).to_have_attribute("data-state", "Ready")
        expect(page.locator("#stat-not-ready")).to_have_text("1")
        shot(page, "console-health-not-ready")
        assert job.events.filter(kind="preempted", data__reason="node-lost").exists()
        page.click(".subnav >> text=Audit log")
        expect(page.locator("#audit-table tbody tr").first).to_contain_text(lost)
        expect(page.locator("#audit-table tbody tr").first).to_contain_text("not ready")
    finally:
        for proc in agents.values():
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=15)


@pytest.mark.django_db(transaction=True)
def test_an_idle_gpu_is_flagged_on_the_console_and_the_tenants_job_page(live_daphne, cluster, browser, page):
    from scheduling.backends.simulated.backend import SimulatedBackend
    from scheduling.cycle.run import run_scheduling_cycle

    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec("notebook", gpus=1, hours=10))
    backend = SimulatedBackend(speedup=1, failure_rate=0)

    def running():
        run_scheduling_cycle(backend)
        return Replica.objects.filter(job=job, state=JobState.RUNNING).exists()

    wait_for(running, timeout=30.0)  # the image pull takes a moment on the simulated cluster
    replica = Replica.objects.get(job=job, state=JobState.RUNNING)
    now = clock.now()
    Replica.objects.filter(pk=replica.pk).update(started=now - timedelta(minutes=40))  # it has held its GPU a while
    # its node's agent reports the last 31 minutes at under 1 % (the pool's default: idle below 5 % for 30 min)
    _, token = create_node_token(replica.node)
    samples = [{"id": str(uuid.uuid4()), "node": replica.node.name, "ts": (now - timedelta(minutes=m)).isoformat(),
                "gpu_uuid": f"GPU-{replica.node.name}-{replica.gpu_indices[0]}", "gpu_index": replica.gpu_indices[0],
                "pod_uid": str(replica.uid), "gpu_util_pct": 0.5, "mem_used_mib": 900, "interval_s": 60}
               for m in range(31, -1, -1)]
    answer = httpx.post(f"{live_daphne.url}/api/v1/agent/usage", json={"node": replica.node.name, "samples": samples},
                        headers={"Authorization": f"Bearer {token}"}, timeout=30).json()
    assert len(answer["accepted"]) == len(samples), answer
    assert check_idle_gpus().flagged == [Replica.objects.get(pk=replica.pk)]  # what the beat does every minute

    login(page, live_daphne, "admin", PASSWORDS["admin"])
    page.goto(f"{live_daphne.url}/console/health/")
    row = page.locator(f'#idle-table tr[data-job="{job.pk}"]')
    expect(row).to_contain_text("notebook")
    expect(row).to_contain_text("alice")
    expect(page.locator(f'tbody[data-node="{replica.node.name}"] .holder.idle[data-job="{job.pk}"]')).to_contain_text(
        "idle since")
    shot(page, "console-health-idle")

    tenant = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    login(tenant, live_daphne, "alice", PASSWORDS["alice"])
    tenant.goto(f"{live_daphne.url}/jobs/{job.pk}/")
    expect(tenant.locator("#job-idle")).to_contain_text("Idle since")
    expect(tenant.locator("#job-idle")).to_contain_text("below 5 % GPU utilisation for 30 min")
    expect(tenant.locator("#events")).to_contain_text("idle")
    shot(tenant, "job-idle-badge")
    tenant.context.close()

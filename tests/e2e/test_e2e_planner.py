"""The capacity planner in the browser: an operator adds an h100 node and the quota to use it, replays the
last month (a worker's task, run here), follows the progress bar to the results and sees both charts drawn by
the vendored plotly; a screenshot of the result lands in var/screenshots/."""

import re

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import login, shot, wait_for
from tests_job_specs import job_spec

from billing.services import submit_quoted_job
from portal.console.models import PlannerRun
from portal.console.planner_forms import pool_field, queue_field
from portal.console.tasks import run_planner
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.cycle.run import run_scheduling_cycle
from tests.world import PASSWORDS


@pytest.mark.django_db(transaction=True)
def test_operator_runs_a_what_if_and_sees_both_charts(live_daphne, cluster, page, clock):
    backend = SimulatedBackend(speedup=1, failure_rate=0, clock=clock)
    for i in range(3):   # three 8-GPU hours at once on two 8-GPU nodes: the third waited an hour
        submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec(f"train-{i}", gpus=8))
    for _ in range(6):
        run_scheduling_cycle(backend, now=clock.now)
        clock.advance(1800)
    run_scheduling_cycle(backend, now=clock.now)

    login(page, live_daphne, "admin", PASSWORDS["admin"])
    page.goto(f"{live_daphne.url}/console/")
    page.click("#nav-console-planner")
    expect(page.locator("h1")).to_contain_text("Capacity planner")
    page.fill(f"#id_{pool_field('h100', 'nodes')}", "3")
    page.fill(f"#id_{queue_field('vision-lab', 'deserved_gpus')}", "24")
    page.click("#planner-submit")
    page.wait_for_url(re.compile(r".*/console/planner/runs/\d+/$"))
    expect(page.locator("#planner-progress")).to_be_visible()

    wait_for(lambda: PlannerRun.objects.filter(state="queued").exists())
    run = PlannerRun.objects.get(state="queued")
    run_planner(run.pk)   # what the Celery worker does; the page follows it and reloads
    expect(page.locator("#planner-done")).to_be_visible(timeout=30000)
    expect(page.locator('#planner-queues-result tr[data-queue="vision-lab"] [data-field="p95-actual"]')).to_have_text(
        re.compile(r"^3[56]\d\d s$"))
    expect(page.locator('#planner-queues-result tr[data-queue="vision-lab"] [data-field="p95-edited"]')).to_have_text(
        "0 s")
    # plotly.js is 4.8 MB to parse: give a loaded CI machine time for it
    expect(page.locator("#chart-waits .main-svg").first).to_be_visible(timeout=45000)
    expect(page.locator("#chart-allocation .main-svg").first).to_be_visible(timeout=45000)
    expect(page.locator("#chart-waits")).to_contain_text("vision-lab")
    expect(page.locator("#chart-allocation")).to_contain_text("edited cluster")
    shot(page, "console-planner-result")

    page.fill("#planner-save input[name=name]", "third h100 node")
    page.click("#planner-save-button")
    expect(page.locator("h1")).to_contain_text("third h100 node")

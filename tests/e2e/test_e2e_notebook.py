"""A notebook in the browser: alice's notebook runs on the simulated cluster (its server a real process), she
opens it from the notebooks page (on the notebook's own host) and sees its page, then stops it there.
Screenshots land in var/screenshots/."""

import re

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import login, shot, wait_for

from billing.services import submit_quoted_job
from scheduling.models import Job, JobState
from tests.world import PASSWORDS

NOTEBOOK = "kind: notebook\nname: lab\nqueue: vision-lab\nresources: {gpu: 0.5, gpuMemory: 10Gi}\n"


@pytest.mark.django_db(transaction=True)
def test_alice_opens_her_notebook_through_the_portal_and_stops_it(live_daphne, cluster, page, scheduler_running):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)
    wait_for(lambda: Job.objects.get(pk=job.pk).state == JobState.RUNNING)
    login(page, live_daphne, "alice", PASSWORDS["alice"])
    page.click("#nav-notebooks")
    row = page.locator(f'#notebooks-table tr[data-job="{job.pk}"]')
    expect(row.locator('[data-field="state"]')).to_have_text("Running")
    expect(row.locator('[data-field="slice"]')).to_contain_text("0.5 GPU + 10 GiB")
    shot(page, "notebooks-list")

    with page.context.expect_page() as opened:
        row.locator('[data-action="open"]').click()
    notebook = opened.value
    notebook.wait_for_load_state()
    # on its own host, the ticket gone from the address
    assert notebook.url == f"{live_daphne.notebook_origin.replace('{id}', str(job.pk))}/nb/vision-lab/lab/"
    expect(notebook.locator("h1")).to_have_text("lab")
    expect(notebook.locator("main")).to_contain_text("JupyterLab (simulated) on 0.5 GPU")
    shot(notebook, "notebook-opened")
    notebook.close()

    row.locator('[data-action="stop"]').click()
    expect(page.locator(".flash.success")).to_contain_text("Notebook lab stopped")
    expect(row.locator('[data-field="state"]')).to_have_text("Stopped")
    expect(row.locator('[data-action="start"]')).to_be_visible()
    shot(page, "notebooks-stopped")
    page.goto(f"{live_daphne.url}/nb/vision-lab/lab/")
    expect(page.locator("#notebook-unavailable")).to_contain_text(re.compile("It is Stopped"))

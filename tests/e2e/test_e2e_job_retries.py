"""A job that fails twice and succeeds on its third attempt, watched on its page: the retries arrive live as
events, the attempts table fills in, and the job ends Succeeded with the end code `succeeded`."""

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import SCREENSHOTS, login

from tests.world import PASSWORDS

# 1 h runs 2 s at the fixture's 1800x; SIM_FAIL_AFTER 10 simulated minutes is a third of a second
FLAKY = """name: flaky-trainer
queue: vision-lab
expectedDuration: 1h
retry: {limit: 3, backoff: 1s, maxBackoff: 2s, on: [failed]}
roles:
  - name: main
    image: busybox
    resources: {gpu: 1}
    nodePool: h100
    env: {SIM_EXIT_CODE: "1,1,0", SIM_FAIL_AFTER: 10m}
"""


@pytest.mark.django_db(transaction=True)
def test_alice_watches_a_job_fail_twice_and_succeed_on_its_third_attempt(
    live_daphne, cluster, page, scheduler_running
):
    from billing.services import submit_quoted_job

    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=FLAKY)
    login(page, live_daphne, "alice", PASSWORDS["alice"])
    page.goto(f"{live_daphne.url}/jobs/{job.pk}/")
    page.evaluate("window.__noReload = 'still here'")
    retries = page.locator('#events strong[data-kind="retrying"]')
    expect(retries).to_have_count(1, timeout=30000)
    expect(page.locator("#events")).to_contain_text("exited with code 1")
    expect(retries).to_have_count(2, timeout=30000)
    expect(page.locator("#job-state")).to_have_text("Succeeded", timeout=30000)
    assert page.evaluate("window.__noReload") == "still here"  # all of it arrived live
    rows = page.locator("#attempts-table tbody tr")
    expect(rows).to_have_count(3, timeout=10000)
    expect(rows.nth(0)).to_contain_text("exit_code")
    expect(rows.nth(1)).to_contain_text("exit_code")
    expect(rows.nth(2)).to_contain_text("succeeded")
    expect(page.locator("#job-end-code")).to_have_text("succeeded")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "job-retried.png"), full_page=True)
    api = page.request.get(f"{live_daphne.url}/api/v1/jobs/{job.pk}/").json()
    assert [(a["number"], a["class"], a["exit_code"]) for a in api["attempts"]] == [
        (1, "exit_code", 1),
        (2, "exit_code", 1),
        (3, "succeeded", None),
    ]

"""A tenant types YAML, watches the quote change, submits the cheapest option, sees it frozen."""

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import SCREENSHOTS, login

from tests.world import PASSWORDS

SPEC = """name: notebook
roles:
  - name: main
    image: jupyter/base:latest
    sharing: fraction
    resources: {{gpu: {gpu}, gpuMemory: 10Gi, cpu: 4, memory: 16Gi}}
    gpuModel: A100-80GB
"""


@pytest.mark.django_db(transaction=True)
def test_live_quote_and_submit_cheapest(live_daphne, cluster, page):
    login(page, live_daphne, "alice", PASSWORDS["alice"])
    page.goto(f"{live_daphne.url}/submit/")
    page.fill("#spec-yaml", SPEC.format(gpu=0.5))
    row = page.locator("#quote-table tr[data-option='a100-spot.fraction.now']")
    expect(row.locator(".price")).to_have_text("0.4240")
    page.fill("#spec-yaml", SPEC.format(gpu=0.25))
    expect(row.locator(".price")).to_have_text("0.2440")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "submit-quote.png"), full_page=True)

    cheapest = page.locator("#quote-table tr.cheapest")
    expect(cheapest).to_have_count(1)
    option_id = cheapest.get_attribute("data-option")
    estimate = cheapest.locator(".estimate").inner_text().split(" ")[0]
    cheapest.locator("button.submit-option").click()
    page.wait_for_url(f"{live_daphne.url}/jobs/*/")
    expect(page.locator("#job-state")).to_have_text("Pending")
    expect(page.locator("#job-quote")).to_contain_text(option_id)
    expect(page.locator("#job-quote")).to_contain_text(estimate.split("–")[0])


@pytest.mark.django_db(transaction=True)
def test_spec_errors_show_line_and_column(live_daphne, cluster, page):
    login(page, live_daphne, "alice", PASSWORDS["alice"])
    page.goto(f"{live_daphne.url}/submit/")
    page.fill("#spec-yaml", "name: x\npriority: 500\nroles:\n  - name: main\n    image: busybox\n")
    expect(page.locator("#spec-errors")).to_contain_text("line 2, col 11")
    expect(page.locator("#quote-table")).to_be_hidden()

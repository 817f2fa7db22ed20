"""The header's language switcher in the browser: choosing 简体中文 turns the page Chinese at once
(the select submits itself), and the choice is alice's from then on, in a fresh browser too."""

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import login

from tests.world import PASSWORDS


@pytest.mark.django_db(transaction=True)
def test_alice_switches_to_chinese(live_daphne, cluster, browser):
    context = browser.new_context(locale="en-US")
    page = context.new_page()
    login(page, live_daphne, "alice", PASSWORDS["alice"])
    expect(page.locator("h1")).to_have_text("Dashboard")
    page.wait_for_load_state("load", timeout=60_000)   # the switcher's script runs after the others load
    page.select_option("#language-select", "zh-hans")
    expect(page.locator("h1")).to_have_text("仪表盘")
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    page.goto(f"{live_daphne.url}/jobs/")
    expect(page.locator("#filter-jobs")).to_have_text("筛选")
    context.close()

    fresh = browser.new_context(locale="en-US")  # no cookie: the saved preference decides
    page = fresh.new_page()
    login(page, live_daphne, "alice", PASSWORDS["alice"])
    expect(page.locator("h1")).to_have_text("仪表盘")
    fresh.close()

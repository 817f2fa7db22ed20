"""Preferences in the browser: the browser's own zone is offered, and once saved the header names it."""

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import login

from tests.world import PASSWORDS


@pytest.mark.django_db(transaction=True)
def test_alice_takes_her_browsers_zone(live_daphne, cluster, browser):
    context = browser.new_context(timezone_id="Asia/Tokyo")
    page = context.new_page()
    login(page, live_daphne, "alice", PASSWORDS["alice"])
    page.goto(f"{live_daphne.url}/account/preferences/")
    offer = page.locator("#use-browser-zone")
    expect(offer).to_have_text("Use this browser's zone (Asia/Tokyo)")
    offer.click()
    expect(page.locator("#f-time-zone")).to_have_value("Asia/Tokyo")
    page.click("#save-preferences")
    expect(page.locator("#time-zone")).to_have_text("Times in Asia/Tokyo")
    expect(page.locator("body")).to_have_attribute("data-tz", "Asia/Tokyo")
    expect(offer).to_be_hidden()  # already the chosen zone
    context.close()

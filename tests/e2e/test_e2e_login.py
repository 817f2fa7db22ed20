import re

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import SCREENSHOTS, login

from tests.world import PASSWORDS


@pytest.mark.django_db(transaction=True)
def test_alice_logs_in_sees_dashboard_switches_workspace_and_logs_out(live_daphne, tenants, page):
    from portal.models import Membership, Role

    # A second workspace for alice, so the switcher has somewhere to go (bob's stays hidden).
    Membership.objects.create(user=tenants.alice, workspace=tenants.nlp, role=Role.VIEWER)
    login(page, live_daphne, "alice", PASSWORDS["alice"])
    expect(page.locator("h1")).to_have_text("Dashboard")
    expect(page.locator("#current-workspace h2")).to_have_text("NLP Group")
    options = page.locator("#workspace-switcher option")
    expect(options).to_have_count(2)

    # The switcher posts and redirects back to the dashboard; its HTML is what matters here, not
    # the chart library the page goes on loading (4.8 MB, slow on a busy test server).
    # the switcher's script must have run before it is used (it loads after the page's other scripts)
    page.wait_for_load_state("load", timeout=60_000)
    with page.expect_navigation(wait_until="domcontentloaded", timeout=30_000):
        page.select_option("#workspace-switcher", "vision-lab")
    expect(page.locator("#current-workspace h2")).to_have_text("Vision Lab")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "dashboard.png"), full_page=True)

    page.click("#logout")
    expect(page.locator("h1")).to_have_text("Log in")
    page.goto(f"{live_daphne.url}/")
    expect(page).to_have_url(re.compile(r".*/login/\?next=/$"))


@pytest.mark.django_db(transaction=True)
def test_bob_cannot_open_alices_workspace_in_the_browser(live_daphne, tenants, page):
    login(page, live_daphne, "bob", PASSWORDS["bob"])
    expect(page.locator("h1")).to_have_text("Dashboard")
    response = page.goto(f"{live_daphne.url}/w/vision-lab/")
    assert response.status == 404
    page.goto(f"{live_daphne.url}/")
    expect(page.locator("#workspace-switcher option")).to_have_count(1)
    expect(page.locator("#workspace-switcher option")).to_have_attribute("value", "nlp-group")

"""An operator creates a user in the console, adds them to a workspace, and the new user logs in and
works in that workspace: no Django admin needed."""

import re

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import login

from tests.world import PASSWORDS


@pytest.mark.django_db(transaction=True)
def test_operator_creates_a_user_who_logs_in_to_their_workspace(live_daphne, cluster, page):
    login(page, live_daphne, "admin", PASSWORDS["admin"])
    page.goto(f"{live_daphne.url}/console/")
    page.click("#nav-console-users")
    page.fill("#id_username", "dave")
    page.fill("#id_email", "dave@example.org")
    page.fill("#id_password", "123")
    page.click("#create-user")
    expect(page.locator('[data-field="password"]')).to_contain_text("too short")  # beside its field
    page.fill("#id_password", "violet-harbour-19")
    page.click("#create-user")
    expect(page.locator(".flash")).to_contain_text("User dave created.")
    expect(page.locator('tr[data-user="dave"] [data-field="workspaces"]')).to_have_text("none")

    page.goto(f"{live_daphne.url}/console/workspaces/vision-lab/")
    page.fill("#f-username", "dave")
    page.select_option("#add-member select[name=role]", "member")
    page.click("#add-member-button")
    expect(page.locator(".flash")).to_contain_text("dave added to vision-lab as member.")
    expect(page.locator('tr[data-member="dave"]')).to_be_visible()
    page.context.clear_cookies()

    login(page, live_daphne, "dave", "violet-harbour-19")
    page.wait_for_url(re.compile(r"^(?!.*/login/).*$"))
    expect(page.locator("#workspace-switcher")).to_contain_text("Vision Lab")

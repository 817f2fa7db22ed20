"""An owner adds a member on the workspace's Members page (by e-mail, an error beside its field first),
and the new member logs in and sees the workspace, its members read-only."""

import re

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import login, shot

from tests.world import PASSWORDS


@pytest.mark.django_db(transaction=True)
def test_an_owner_adds_a_member_who_then_sees_the_workspace(live_daphne, tenants, page):
    from portal.console.models import AuditEntry
    from tests.factories import UserFactory

    UserFactory(username="dave", email="dave@example.org", password="violet-harbour-19")
    login(page, live_daphne, "alice", PASSWORDS["alice"])
    page.wait_for_url(re.compile(r"^(?!.*/login/).*$"))
    page.goto(f"{live_daphne.url}/w/vision-lab/")
    page.click("#members-link")
    expect(page.locator("h1")).to_have_text("Members of Vision Lab")

    page.fill("#f-member-user", "dave@example.com")  # a typo: no such account
    page.click("#add-member-button")
    expect(page.locator('[data-field="username"]')).to_contain_text("no user named 'dave@example.com'")
    page.fill("#f-member-user", "dave@example.org")
    page.select_option("#f-member-role", "viewer")
    page.click("#add-member-button")
    expect(page.locator(".flash")).to_contain_text("dave added to vision-lab as viewer.")
    expect(page.locator('tr[data-member="dave"] [data-field="role"] select')).to_have_value("viewer")
    shot(page, "workspace-members")
    assert AuditEntry.objects.filter(source="tenant", action="create", target_repr__contains="dave").exists()
    page.context.clear_cookies()

    login(page, live_daphne, "dave", "violet-harbour-19")
    page.wait_for_url(re.compile(r"^(?!.*/login/).*$"))
    expect(page.locator("#workspace-switcher")).to_contain_text("Vision Lab")
    page.goto(f"{live_daphne.url}/w/vision-lab/")
    expect(page.locator("h1")).to_have_text("Vision Lab")
    page.click("#members-link")
    expect(page.locator("#my-role")).to_have_text("Viewer")
    expect(page.locator("#read-only")).to_be_visible()
    expect(page.locator("#add-member")).to_have_count(0)
    expect(page.locator('tr[data-member="alice"]')).to_be_visible()

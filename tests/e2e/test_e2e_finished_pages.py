"""Finished pages in the browser, against the real server as `make run` configures it (DEBUG on): an
operator books a credit from the console with a confirmation step; a missing page and a refused one are
the styled pages; the API docs render with every request kept on this server."""

import re
from decimal import Decimal
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import login, shot

from billing.models import ChargeLine
from tests.world import PASSWORDS


@pytest.mark.django_db(transaction=True)
def test_operator_books_a_credit_after_confirming_it(live_daphne, cluster, page):
    login(page, live_daphne, "admin", PASSWORDS["admin"])
    page.click("#nav-console")
    page.click("#nav-console-adjustments")
    expect(page.locator("h1")).to_have_text("Adjustments")
    page.check("#id_applies_to_0")  # a job: the month's field gives way to the job's
    expect(page.locator("#row-job")).to_be_visible()
    expect(page.locator("#row-period")).to_be_hidden()
    page.click("#review-adjustment")  # nothing filled in: every error beside its field
    expect(page.locator('[data-field="workspace"]')).to_contain_text("required")
    expect(page.locator('[data-field="job"]')).to_contain_text("name the job")
    shot(page, "console-adjustment-errors")

    page.select_option("#id_workspace", "vision-lab")
    page.check("#id_applies_to_1")  # a billing month: this one, filled in already
    expect(page.locator("#row-job")).to_be_hidden()
    page.fill("#id_amount", "7.50")
    page.fill("#id_reason", "node h100-02 lost power for an hour")
    page.click("#review-adjustment")
    expect(page.locator("#confirm-amount")).to_contain_text("-$7.50")
    expect(page.locator("#confirm-reason")).to_have_text("node h100-02 lost power for an hour")
    shot(page, "console-adjustment-confirm")
    assert not ChargeLine.objects.exists()

    page.click("#confirm-adjustment")
    page.wait_for_url(re.compile(r".*/console/adjustments/$"))
    expect(page.locator(".flash.success")).to_contain_text("Credit of -$7.50 recorded for vision-lab")
    line = ChargeLine.objects.get()
    assert (line.cost, line.author.username) == (Decimal("-7.50"), "admin")
    expect(page.locator(f'tr[data-adjustment="{line.pk}"]')).to_contain_text("node h100-02 lost power")
    shot(page, "console-adjustments")


@pytest.mark.django_db(transaction=True)
def test_missing_and_refused_pages_are_styled_under_debug(live_daphne, tenants, page):
    login(page, live_daphne, "alice", PASSWORDS["alice"])
    page.wait_for_url(re.compile(r".*/$"))
    response = page.goto(f"{live_daphne.url}/no/such/page/")
    assert response.status == 404
    expect(page.locator("#error-page h1")).to_have_text("Page not found")
    expect(page.locator(".topbar .who")).to_have_text("alice")
    shot(page, "error-404")
    response = page.goto(f"{live_daphne.url}/console/")
    assert response.status == 403
    expect(page.locator("#error-page h1")).to_have_text("Not allowed")
    shot(page, "error-403")
    icon = page.request.get(f"{live_daphne.url}/favicon.ico")
    assert icon.ok and icon.headers["content-type"] == "image/svg+xml"


@pytest.mark.django_db(transaction=True)
def test_api_docs_render_with_no_other_origin(live_daphne, page):
    server = urlsplit(live_daphne.url).netloc
    elsewhere, problems = [], []

    def only_this_server(route):
        if urlsplit(route.request.url).netloc == server:
            route.continue_()
        else:  # no internet: anything from a CDN fails
            elsewhere.append(route.request.url)
            route.abort()

    page.route("**/*", only_this_server)
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(f"{live_daphne.url}/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("GPU Platform API")
    expect(page.locator(".opblock-summary-path", has_text="/api/v1/jobs/").first).to_be_visible()
    shot(page, "api-docs")
    assert elsewhere == [] and problems == []

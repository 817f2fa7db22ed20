"""Finished pages: 400, 403 and 404 answers are the styled pages whether DEBUG is on (make run) or off, the
API keeps its problem details, the 500 page needs no database, and the site has a favicon."""

import pytest
from django.contrib.staticfiles import finders
from django.template.loader import render_to_string
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db
DEBUG = [pytest.param(True, id="debug"), pytest.param(False, id="production")]


@pytest.mark.parametrize("debug", DEBUG)
@pytest.mark.parametrize("path", ["/no/such/page/", "/w/no-such-workspace/", "/static/no-such-file.css"])
def test_a_missing_page_is_the_styled_404(client, tenants, debug, path):
    client.force_login(tenants.alice)
    with override_settings(DEBUG=debug):
        response = client.get(path)
    page = response.content.decode()
    assert response.status_code == 404
    assert 'id="error-page" data-status="404"' in page and "Page not found" in page
    assert "portal/site.css" in page and 'class="topbar"' in page  # the site's look and header
    assert "URLconf" not in page and "technical" not in page.lower()  # not Django's debug page
    assert "alice" in page  # the signed-in header


@pytest.mark.parametrize("debug", DEBUG)
def test_a_refused_page_is_the_styled_403(client, tenants, debug):
    client.force_login(tenants.alice)
    with override_settings(DEBUG=debug):
        response = client.get("/console/")
    page = response.content.decode()
    assert response.status_code == 403
    assert 'id="error-page" data-status="403"' in page and "Not allowed" in page
    assert "The operator console is for operators (staff) only." in page and "portal/site.css" in page


@pytest.mark.parametrize("debug", DEBUG)
def test_a_form_without_its_csrf_token_is_the_styled_403(tenants, debug):
    client = Client(enforce_csrf_checks=True)
    client.force_login(tenants.alice)
    with override_settings(DEBUG=debug):
        response = client.post("/account/preferences/", {"time_zone": "UTC"})
    assert response.status_code == 403
    assert 'id="error-page" data-status="403"' in response.content.decode()
    assert "security token" in response.content.decode()


@pytest.mark.parametrize("debug", DEBUG)
def test_the_api_keeps_its_problem_details(client, tenants, debug):
    client.force_login(tenants.alice)
    with override_settings(DEBUG=debug):
        missing = client.get("/api/v1/no-such-thing/")
        other = client.get("/api/v1/workspaces/nlp-group/")  # another tenant's workspace
    for response in (missing, other):
        assert response.status_code == 404 and response["Content-Type"] == "application/problem+json"


@pytest.mark.parametrize("debug", DEBUG)
def test_a_missing_slash_still_redirects(client, tenants, debug):
    client.force_login(tenants.alice)
    with override_settings(DEBUG=debug):
        response = client.get("/reports")
    assert response.status_code == 301 and response["Location"] == "/reports/"


def test_the_500_page_is_styled_and_needs_no_database(django_assert_num_queries):
    with django_assert_num_queries(0):
        page = render_to_string("500.html")
    assert 'id="error-page" data-status="500"' in page and "portal/site.css" in page


def test_the_site_has_a_favicon(client):
    assert finders.find("favicon.svg")
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("/favicon.svg")
    icon = client.get(response["Location"])
    assert icon.status_code == 200 and icon["Content-Type"] == "image/svg+xml"
    assert b"<svg" in b"".join(icon.streaming_content)
    login = client.get("/login/").content.decode()
    assert 'rel="icon"' in login and "favicon.svg" in login

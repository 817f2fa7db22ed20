"""/api/docs/ works with no internet: Swagger UI's files come from drf-spectacular-sidecar's static files,
its start-up script is a same-origin file, and the page is under the same Content-Security-Policy as the
rest of the site (no inline script, nothing from another origin)."""

import re

import pytest
from django.contrib.staticfiles import finders

pytestmark = pytest.mark.django_db
STATIC = "/static/"


def test_the_docs_page_loads_nothing_from_another_origin(client):
    response = client.get("/api/docs/")
    page = response.content.decode()
    assert response.status_code == 200
    assert not re.search(r"(?:src|href)=[\"']?(?:https?:)?//", page), page  # no CDN, no other origin
    assert "<script>" not in page  # no inline script
    urls = re.findall(r"(?:src|href)=\"([^\"]+)\"", page)
    files = [u for u in urls if u.startswith(STATIC)]
    assert {u.rsplit("/", 1)[1] for u in files} >= {"swagger-ui.css", "swagger-ui-bundle.js",
                                                    "swagger-ui-standalone-preset.js"}
    for url in files:  # each is a file of the project's static files, and is served
        assert finders.find(url.removeprefix(STATIC)), url
        assert client.get(url).status_code == 200, url
    assert "/api/docs/?script=" in urls


def test_the_docs_page_is_under_the_sites_csp(client):
    response = client.get("/api/docs/")
    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "default-src 'self'" in policy


def test_the_start_up_script_points_at_the_local_schema(client):
    response = client.get("/api/docs/?script=")
    script = response.content.decode()
    assert response.status_code == 200 and response["Content-Type"].startswith("application/javascript")
    assert "/api/schema/" in script and "SwaggerUIBundle" in script

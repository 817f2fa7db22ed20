"""The last-resort handler: an unreachable database is 503 with Retry-After, anything else 500;
problem details on the API, the styled page elsewhere, and neither reads the database again (these
tests have no database access: a query would fail them)."""

import json

import pytest
from django.db import InterfaceError, OperationalError

from portal.breaker import database_breaker
from portal.server_error import server_error


@pytest.fixture(autouse=True)
def breaker_closed():
    yield
    database_breaker.reset()  # a database error trips it; the next test starts with it closed


def answer_while_handling(exception, request):
    try:
        raise exception
    except Exception:
        return server_error(request)


@pytest.mark.parametrize(("exception", "status"), [
    (OperationalError("connection refused"), 503),
    (InterfaceError("connection already closed"), 503),
    (KeyError("bug"), 500),
])
def test_the_api_answers_problem_details(rf, exception, status):
    response = answer_while_handling(exception, rf.get("/api/v1/jobs/"))
    assert response.status_code == status
    assert response["Content-Type"] == "application/problem+json"
    body = json.loads(response.content)
    assert body["status"] == status and body["type"].startswith("urn:gpu-platform:problem:")
    assert ("Retry-After" in response) == (status == 503)
    assert "bug" not in body["detail"]  # no internals leak


@pytest.mark.parametrize(("exception", "status"), [(OperationalError("down"), 503), (ZeroDivisionError(), 500)])
def test_pages_get_the_styled_error_page(rf, exception, status):
    response = answer_while_handling(exception, rf.get("/reports/"))
    page = response.content.decode()
    assert response.status_code == status and 'id="domain-error"' in page
    assert f'data-status="{status}"' in page


def test_redis_gone_is_unavailable_too(rf):
    import redis

    response = answer_while_handling(redis.ConnectionError("Connection refused"), rf.get("/api/v1/jobs/"))
    assert response.status_code == 503 and int(response["Retry-After"]) > 0
    assert "Redis" in json.loads(response.content)["detail"]
    assert not database_breaker.is_open  # the breaker is the database's


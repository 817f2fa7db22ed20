"""Every request has an id: the caller's X-Request-ID when sane, else a new one, echoed in the response;
the request's log line and every record logged while it is served carry it and the user's id; tasks
sent from it carry it into the worker. E-mails are one INFO line each, without their body."""

import io
import logging
import re

import pytest
from django.core import mail

from portal import logs
from portal.celery import app

pytestmark = pytest.mark.django_db

HEX_ID = re.compile(r"[0-9a-f]{32}")


@pytest.fixture
def formatted():
    """The platform's own handler (format and request-context filter) on the root logger, into a string."""
    config = logs.logging_config("DEBUG")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(config["formatters"]["plain"]["format"]))
    handler.addFilter(logs.RequestContext())
    root = logging.getLogger()
    root.addHandler(handler)
    old = logging.getLogger("portal.requests").level
    logging.getLogger("portal.requests").setLevel(logging.INFO)
    yield stream
    root.removeHandler(handler)
    logging.getLogger("portal.requests").setLevel(old)


def request_lines(stream) -> list[str]:
    return [line for line in stream.getvalue().splitlines() if " portal.requests" in line]


def test_a_sane_request_id_is_taken_and_echoed(client, tenants):
    response = client.get("/account/login/", HTTP_X_REQUEST_ID="edge-7f3a.42")
    assert response["X-Request-ID"] == "edge-7f3a.42"


def test_an_id_is_generated_when_absent_and_differs_per_request(client, tenants):
    first = client.get("/account/login/")["X-Request-ID"]
    second = client.get("/account/login/")["X-Request-ID"]
    assert HEX_ID.fullmatch(first) and HEX_ID.fullmatch(second) and first != second


@pytest.mark.parametrize("bad", ["x" * 129, "two words", "<script>", "-leading-dash", "caf\u00e9", "a;b"])
def test_a_bad_or_oversized_id_is_replaced(client, tenants, bad):
    response = client.get("/account/login/", HTTP_X_REQUEST_ID=bad)
    assert HEX_ID.fullmatch(response["X-Request-ID"])


def test_the_request_line_carries_the_id_and_the_user_id(client, tenants, formatted):
    client.force_login(tenants.alice)
    response = client.get("/account/preferences/", HTTP_X_REQUEST_ID="req-1")
    assert response.status_code == 200
    (line,) = request_lines(formatted)
    assert f"portal.requests [request req-1 user {tenants.alice.pk}]: GET /account/preferences/ 200" in line


def test_an_anonymous_request_says_no_user(client, tenants, formatted):
    client.get("/account/login/", HTTP_X_REQUEST_ID="req-anon")
    (line,) = request_lines(formatted)
    assert "[request req-anon user -]: GET /account/login/ " in line


def test_records_outside_a_request_have_no_context(formatted):
    logging.getLogger("portal.somewhere").warning("between requests")
    assert formatted.getvalue().strip().endswith("WARNING portal.somewhere: between requests")


def test_a_task_sent_during_a_request_carries_its_id_into_the_worker():
    token = logs.current_request_id.set("req-celery")
    try:
        headers = {}
        logs._carry_request_id(headers=headers)
    finally:
        logs.current_request_id.reset(token)
    assert headers == {"request_id": "req-celery"}

    @app.task(name="tests.request_ids.echo")
    def echo():
        return logs.current_request_id.get()

    assert echo.apply(headers=headers).get() == "req-celery"
    assert echo.apply().get() == "" and logs.current_request_id.get() == ""


def test_an_email_is_one_info_line_without_its_body(settings, caplog):
    settings.EMAIL_BACKEND = "portal.notifications.log_backend.EmailBackend"
    caplog.set_level(logging.INFO, logger="portal.mail")
    sent = mail.send_mail("Job 7\nfinished", "secret link https://x/?token=abc\nline two", "from@x",
                          ["alice@example.com", "bob@example.com"])
    assert sent == 1
    (record,) = [r for r in caplog.records if r.name == "portal.mail"]
    text = record.getMessage()
    assert record.levelname == "INFO" and "\n" not in text
    assert "alice@example.com, bob@example.com" in text and "'Job 7 finished'" in text
    assert re.search(r"message-id <[^>]+>", text)
    assert "token" not in text and "secret" not in text


def test_the_default_email_backend_is_the_log_backend():
    from portal.settings import notifications

    assert notifications.EMAIL_BACKEND == "portal.notifications.log_backend.EmailBackend" or \
        "EMAIL_BACKEND" in __import__("os").environ


def test_workers_log_through_the_platform_handler():
    """Celery's logging set-up hands over to LOGGING: the worker's records get the request context too."""
    app.log.setup_logging_subsystem(loglevel="INFO")
    filters = [f for h in logging.getLogger().handlers for f in h.filters]
    assert any(isinstance(f, logs.RequestContext) for f in filters)

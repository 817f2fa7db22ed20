"""The door in front of Django (portal.door), driven as an ASGI application: bodies over their route's
limit are refused with 413 before they are read (a declared length at once, a chunked body as soon as it
grows past the limit), the routes that carry data take their larger limits, and while the database breaker
is open every request but the probes is answered 503 without reaching Django."""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest
from django.db import OperationalError
from psycopg_pool import PoolTimeout

from portal.breaker import DatabaseBreaker, database_breaker
from portal.door import Door, body_limit
from portal.server_error import server_error

MB = 1024 * 1024
CHUNK = 64 * 1024


@pytest.fixture(autouse=True)
def breaker_closed():
    database_breaker.reset()
    yield
    database_breaker.reset()


class Body:
    """A request body arriving in chunks; counts how many the application pulled."""

    def __init__(self, size: int, chunk: int = CHUNK) -> None:
        self.left, self.chunk, self.pulled = size, chunk, 0

    async def receive(self):
        if self.left <= 0 and self.pulled:
            await asyncio.sleep(3600)  # a client that sent everything waits for the answer
        part = min(self.chunk, self.left)
        self.left -= part
        self.pulled += part
        return {"type": "http.request", "body": b"x" * part, "more_body": self.left > 0}


def call(app, path: str, body: Body, method: str = "POST", declared: int | None = None,
         content_type: bytes = b"application/json") -> tuple[int, dict, bytes]:
    headers = [(b"host", b"testserver"), (b"content-type", content_type)]
    if declared is not None:
        headers.append((b"content-length", str(declared).encode()))
    else:
        headers.append((b"transfer-encoding", b"chunked"))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": headers, "client": ("127.0.0.1", 5000), "server": ("testserver", 80)}
    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    asyncio.run(asyncio.wait_for(app(scope, body.receive, send), 60))
    start = next(m for m in sent if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], {k.decode().lower(): v.decode() for k, v in start["headers"]}, content


@pytest.fixture
def application(transactional_db):
    from portal.asgi import application

    return application


def assert_problem(status, headers, content, expected):
    assert status == expected, content[:500]
    assert headers["content-type"] == "application/problem+json"
    problem = json.loads(content)
    assert problem["status"] == expected and problem["type"].startswith("urn:gpu-platform:problem:")
    return problem


def test_a_declared_length_over_the_limit_is_refused_before_one_byte_is_read(application):
    body = Body(300 * MB)
    status, headers, content = call(application, "/api/v1/jobs/", body, declared=300 * MB)
    problem = assert_problem(status, headers, content, 413)
    assert str(MB) in problem["detail"]
    assert body.pulled == 0


@pytest.mark.parametrize("path", ["/healthz", "/login/", "/api/v1/jobs/"])
def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_limit(application, path):
    body = Body(300 * MB)
    status, headers, content = call(application, path, body)
    assert status == 413, content[:300]
    assert body.pulled <= MB + CHUNK  # the rest was never read, nor spooled
    if path.startswith("/api/"):
        assert_problem(status, headers, content, 413)
    else:  # a page: the styled error page
        assert "text/html" in headers["content-type"] and 'id="domain-error"' in content.decode()


def test_serve_answers_in_the_openai_error_shape(application, settings):
    settings.BODY_LIMIT_SERVE_BYTES = 2 * MB
    body = Body(50 * MB)
    status, headers, content = call(application, "/serve/vision-lab/chat/v1/chat/completions", body)
    assert status == 413 and headers["content-type"] == "application/json"
    error = json.loads(content)["error"]
    assert set(error) == {"message", "type", "code"} and error["code"] == "request_too_large"
    assert body.pulled <= 2 * MB + CHUNK


def test_bodies_within_the_limit_reach_django(application):
    body = Body(MB - 10)
    status, _, content = call(application, "/api/v1/jobs/", body)
    assert status == 401, content[:300]  # Django read it all and answered: no credentials
    assert body.left == 0


@pytest.mark.parametrize(("path", "setting"), [
    ("/api/v1/agent/usage", "BODY_LIMIT_AGENT_BYTES"),
    ("/console/planner/", "BODY_LIMIT_PLANNER_BYTES"),
    ("/serve/vision-lab/chat/v1/completions", "BODY_LIMIT_SERVE_BYTES"),
    ("/nb/vision-lab/lab/api/contents/data.bin", "BODY_LIMIT_NOTEBOOK_BYTES"),
    ("/api/v1/workspaces/vision-lab/volumes/imagenet/files", "BODY_LIMIT_VOLUME_BYTES"),
])
def test_the_routes_that_carry_data_take_their_own_larger_limit(application, settings, path, setting):
    assert body_limit(path) == getattr(settings, setting) > settings.BODY_LIMIT_BYTES == MB
    if setting == "BODY_LIMIT_VOLUME_BYTES":
        return  # no upload route yet: the limit waits for it
    size = min(getattr(settings, setting), 5 * MB) - 10
    body = Body(size)
    status, _, content = call(application, path, body, content_type=b"application/octet-stream")
    assert status != 413, content[:300]
    assert body.left == 0
    body = Body(getattr(settings, setting) + 10 * CHUNK)
    assert call(application, path, body)[0] == 413


def test_the_agent_ingest_still_takes_what_it_took(settings):
    # a batch the agent may send today must pass: Django's own limit was 2.5 MB
    assert settings.BODY_LIMIT_AGENT_BYTES >= 2_621_440
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE >= settings.BODY_LIMIT_AGENT_BYTES


def test_the_planner_takes_its_largest_trace():
    from django.conf import settings

    from portal.console.planner_services import MAX_TRACE_BYTES

    assert settings.BODY_LIMIT_PLANNER_BYTES > MAX_TRACE_BYTES


# --- the database breaker -----------------------------------------------------------------------


class Ticks:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """An inner application that only says whether it was reached."""

    def __init__(self, app=None) -> None:
        self.calls, self.app = [], app

    async def __call__(self, scope, receive, send):
        self.calls.append(scope["path"])
        if self.app is not None:
            return await self.app(scope, receive, send)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def answer_while_handling(cause, request):
    """server_error for a driver error as Django raises it: wrapped, the driver's error its cause."""
    try:
        try:
            raise cause
        except Exception as driver_error:
            raise OperationalError(str(driver_error)) from driver_error
    except OperationalError:
        return server_error(request)


@pytest.mark.parametrize("cause", [
    psycopg.OperationalError("connection failed: Connection refused"),
    psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
])
def test_a_database_out_of_reach_trips_the_breaker_and_answers_503(rf, cause):
    response = answer_while_handling(cause, rf.get("/api/v1/jobs/"))
    assert response.status_code == 503 and int(response["Retry-After"]) > 0
    assert database_breaker.is_open


@pytest.mark.django_db
def test_a_pool_timed_out_trips_only_when_a_connection_of_its_own_fails_too(rf, monkeypatch):
    """A pool busy under load times out as a cut-off one does; a connection of its own tells them apart, so
    a busy portal sheds the one request, not every request for a second."""
    timed_out = PoolTimeout("couldn't get a connection after 2.00 sec")
    response = answer_while_handling(timed_out, rf.get("/api/v1/jobs/"))
    assert response.status_code == 503 and int(response["Retry-After"]) > 0
    assert not database_breaker.is_open  # the database answers: the pool was busy
    monkeypatch.setattr("portal.breaker.database_answers_unpooled", lambda: False)
    answer_while_handling(timed_out, rf.get("/api/v1/jobs/"))
    assert database_breaker.is_open


@pytest.mark.parametrize("cause", [psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),
                                   psycopg.errors.LockNotAvailable("could not obtain lock")])
def test_one_failed_query_answers_503_but_trips_nothing(rf, cause):
    response = answer_while_handling(cause, rf.get("/api/v1/jobs/"))
    assert response.status_code == 503
    assert not database_breaker.is_open


def test_an_open_breaker_answers_503_at_once_without_reaching_django():
    ticks = Ticks()
    breaker = DatabaseBreaker(probe_every_s=1.0, monotonic=ticks)
    inner = Recorder()
    door = Door(inner, breaker=breaker)
    breaker.trip()
    for path in ["/api/v1/jobs/", "/api/v1/agent/usage"]:
        status, headers, content = call(door, path, Body(10), method="POST", declared=10)
        problem = assert_problem(status, headers, content, 503)
        assert int(headers["retry-after"]) > 0 and "database" in problem["detail"]
    status, headers, content = call(door, "/w/vision-lab/", Body(0), method="GET", declared=0)
    assert status == 503 and 'id="domain-error"' in content.decode() and int(headers["retry-after"]) > 0
    status, _, content = call(door, "/serve/vision-lab/chat/v1/models", Body(0), method="GET", declared=0)
    assert status == 503 and json.loads(content)["error"]["code"] == "service_unavailable"
    assert inner.calls == []  # nothing reached Django, so nothing touched the database
    # liveness and readiness (which names what is down) are still asked
    assert call(door, "/readyz", Body(0), method="GET", declared=0)[0] == 200
    assert call(door, "/healthz", Body(0), method="GET", declared=0)[0] == 200
    assert inner.calls == ["/readyz", "/healthz"]


@pytest.mark.django_db(transaction=True)
def test_the_breaker_probes_every_second_and_closes_when_the_database_answers():
    ticks = Ticks()
    breaker = DatabaseBreaker(probe_every_s=1.0, monotonic=ticks)
    breaker.trip()
    assert not breaker.probe_due()  # not before a second has passed
    ticks.now += 1.0
    assert breaker.probe_due() and not breaker.probe_due()  # one probe at a time
    breaker.probed(reachable=False)
    assert breaker.is_open and not breaker.probe_due()
    ticks.now += 1.0
    inner = Recorder()
    door = Door(inner, breaker=breaker)

    async def request_then_let_the_probe_finish():
        sent = []

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "path": "/api/v1/jobs/", "method": "GET", "headers": [], "query_string": b""}
        await door(scope, Body(0).receive, send)
        await asyncio.gather(*door._probes)
        return sent[0]["status"]

    # this request is answered 503 and starts a probe of the real (test) database, which answers
    assert asyncio.run(request_then_let_the_probe_finish()) == 503
    assert not breaker.is_open
    assert call(door, "/api/v1/jobs/", Body(0), method="GET", declared=0)[0] == 200
    assert inner.calls == ["/api/v1/jobs/"]

"""A failing CSV export must not take the portal down: bad parameters are refused before the first
byte, and a query failing mid-stream ends the response and gives its database connection back."""

import asyncio

import pytest
from asgiref.sync import async_to_sync
from django.db import DatabaseError
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.test import Client
from tests_reports_helpers import make_usage

from billing.reports import exports
from portal.asgi import application

RANGE = "start=2026-03-01&end=2026-03-08"


async def _get(path: str, query: str, cookie: str) -> list[dict]:
    """One request through the real ASGI application, as a server would make it."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": query.encode(), "root_path": "",
             "headers": [(b"host", b"testserver"), (b"cookie", cookie.encode())],
             "client": ("127.0.0.1", 50000), "server": ("testserver", 80)}
    asked = False
    sent: list[dict] = []

    async def receive():
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.sleep(3600)  # the client stays connected

    async def send(message):
        sent.append(message)

    await asyncio.wait_for(application(scope, receive, send), timeout=30)
    return sent


def _ended(messages: list[dict]) -> bool:
    return bool(messages) and messages[-1]["type"] == "http.response.body" and not messages[-1].get("more_body")


@pytest.mark.django_db(transaction=True)
def test_fifty_failing_exports_then_a_page_still_answers(cluster, monkeypatch):
    make_usage(cluster)
    client = Client()
    client.force_login(cluster.finance)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    real_rows = exports.line_rows

    def failing_rows(queryset, **kwargs):
        rows = real_rows(queryset, **kwargs)
        first = next(rows)  # one ledger line read, then the query fails (its cursor gone with it)
        rows.close()
        yield first
        raise DatabaseError("the export's query failed")

    monkeypatch.setattr(exports, "line_rows", failing_rows)
    opened, closed = [], []
    real_close = BaseDatabaseWrapper.close

    def counting_close(self):
        if self.connection is not None:
            closed.append(self)
        return real_close(self)

    monkeypatch.setattr(BaseDatabaseWrapper, "close", counting_close)
    connection_created.connect(lambda sender, connection, **kw: opened.append(connection), weak=False,
                               dispatch_uid="export-failure-test")
    try:
        for n in range(50):
            query = f"{RANGE}&queue=%00" if n % 2 else RANGE
            messages = async_to_sync(_get)("/reports/export.csv", query, cookie)
            status = messages[0]["status"]
            assert _ended(messages), f"request {n} did not end"
            if n % 2:
                assert status == 400  # refused before the first byte
            else:
                assert status == 200
                body = b"".join(m.get("body", b"") for m in messages[1:])
                assert body.startswith(",".join(exports.HEADER).encode()) and b"export failed" in body
                assert body.endswith(b'"# export failed: this file is incomplete, try again"\r\n')  # said last
        assert opened and all(any(c is o for c in closed) for o in opened)  # every one given back
    finally:
        connection_created.disconnect(dispatch_uid="export-failure-test")
    monkeypatch.undo()
    page = async_to_sync(_get)("/reports/", RANGE, cookie)
    assert page[0]["status"] == 200 and _ended(page)

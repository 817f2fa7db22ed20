"""The door: the outermost layer of the ASGI application, in front of Django, which reads a whole request
body (to a temporary file) before any middleware or view runs.

- Body limits. A declared Content-Length over the route's limit is refused at once; a chunked body is
  counted as it arrives and refused as soon as it grows past the limit, the rest never read. 413, in the
  form the caller reads (portal.server_error.error_answer). The limits are the BODY_LIMIT_* settings.
- The database breaker (portal.breaker). While the database was just seen down, every request but the
  probes (/healthz, /readyz) and static files is answered 503 with Retry-After without touching it, and
  the database is probed in the background every DB_BREAKER_PROBE_S.
- Requests at once. Django runs each request's view in a thread of its own, so under load dozens of
  threads take turns on the process's one interpreter lock: every page then takes as long as all of them
  together, and a thread back from the database waits its turn behind the others. At most
  WEB_REQUESTS_AT_ONCE requests per process run their view at once; the others wait, first come first
  served, with their body read. A slot is taken when the body is whole and given back when the response
  starts (a stream's rest is sent outside it). The proxies (/serve/, /nb/, a notebook's host), which wait
  on others for long, are not counted.
"""

from __future__ import annotations

import asyncio
import re

from asgiref.sync import sync_to_async
from django.conf import settings

from portal.api.errors import BodyTooLarge
from portal.breaker import DatabaseBreaker, database_breaker, database_reachable
from portal.notebook_origin import on_notebook_host
from portal.server_error import RETRY_AFTER_S, ServiceUnavailable, error_answer

# The routes that carry data, and the setting that bounds their bodies; every other route: BODY_LIMIT_BYTES
ROUTE_LIMITS = (
    (re.compile(r"/api/v1/agent/"), "BODY_LIMIT_AGENT_BYTES"),
    (re.compile(r"/console/planner/"), "BODY_LIMIT_PLANNER_BYTES"),
    (re.compile(r"/serve/"), "BODY_LIMIT_SERVE_BYTES"),
    (re.compile(r"/nb/"), "BODY_LIMIT_NOTEBOOK_BYTES"),
    (re.compile(r"/(api/v1/workspaces|w)/[^/]+/volumes/[^/]+/(files|upload)"), "BODY_LIMIT_VOLUME_BYTES"),
)
# Answered whatever the database's state: liveness, readiness (which names what is down), static files
UNGATED = re.compile(r"/(healthz|readyz)$|/static/")
# Requests that wait on an upstream (a model's replica, a notebook) for as long as it takes: never queued
UNCOUNTED = re.compile(r"/(serve|nb)/")


def body_limit(path: str) -> int:
    """The most bytes a request body to `path` may hold."""
    for pattern, setting in ROUTE_LIMITS:
        if pattern.match(path):
            return getattr(settings, setting)
    return settings.BODY_LIMIT_BYTES


def _declared_length(scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server refuses a malformed length itself
    return None


class _BodyOverLimit(Exception):
    pass


async def _answer(send, path: str, error) -> None:
    response = await sync_to_async(error_answer, thread_sensitive=False)(path, error)  # renders a template
    headers = [(b"content-type", response["Content-Type"].encode()),
               (b"content-length", str(len(response.content)).encode()), (b"connection", b"close")]
    if response.has_header("Retry-After"):
        headers.append((b"retry-after", response["Retry-After"].encode()))
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": response.content})


def _too_large(limit: int) -> BodyTooLarge:
    return BodyTooLarge(f"the body may hold at most {limit} bytes")


class Door:
    def __init__(self, app, breaker: DatabaseBreaker = database_breaker, at_once: int | None = None) -> None:
        self.app = app
        self.breaker = breaker
        self._probes: set[asyncio.Task] = set()
        at_once = settings.WEB_REQUESTS_AT_ONCE if at_once is None else at_once
        self._slots = asyncio.Semaphore(at_once) if at_once > 0 else None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        limit = body_limit(path)
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            return await _answer(send, path, _too_large(limit))
        if self.breaker.is_open and not UNGATED.match(path):
            if self.breaker.probe_due():
                self._start_probe()
            return await _answer(send, path, ServiceUnavailable(
                f"the database was unreachable moments ago; retry in {RETRY_AFTER_S} s"))

        received = 0
        started = False
        slots = None if self._slots is None or UNCOUNTED.match(path) or on_notebook_host(scope) else self._slots
        holding = False

        async def counted_receive():
            nonlocal received, holding
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _BodyOverLimit
                if slots is not None and not holding and not message.get("more_body", False):
                    await slots.acquire()
                    holding = True
            return message

        def give_back():
            nonlocal holding
            if holding:
                holding = False
                slots.release()

        async def tracked_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                give_back()
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except _BodyOverLimit:
            if not started:
                await _answer(send, path, _too_large(limit))
        finally:
            give_back()

    def _start_probe(self) -> None:
        async def probe():
            reachable = False
            try:
                reachable = await sync_to_async(database_reachable, thread_sensitive=False)()
            finally:
                self.breaker.probed(reachable)

        task = asyncio.get_running_loop().create_task(probe())
        self._probes.add(task)  # kept until done: the loop holds tasks only weakly
        task.add_done_callback(self._probes.discard)

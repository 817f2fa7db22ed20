"""Websockets on a notebook's own host (a real JupyterLab's kernel channels): the notebook proxy
(portal/notebook_proxy.py) for websockets, with the same rule of who gets through.

portal/asgi.py sends here every websocket whose Host is a notebook's (portal/notebook_origin.py). The
handshake is refused (closed before it is accepted) for an Origin that is not this notebook's own host
(4403: the host's cookie alone must not let another page, another notebook's included, drive it), for no
valid cookie of this host (4401), a member whose role may not submit (4403), anyone not a member or a
notebook that does not exist (4404, the same), a path outside the notebook's own, and a notebook whose
server does not answer now (4503); the ASGI server turns a refusal into an HTTP 403. The notebook's
server is then reached with its own token (never shown to the browser) and nothing of the browser's
request but the path, the query (less any `token`) and the subprotocols it offers: not its cookies. Once
both sides are open, messages (text and binary) are passed both ways until one side closes; the other is
closed then, with its code where the ASGI servers allow it (1000 and 3000-4999; 1001-1015 become
4001-4015, as 1013 is 4013 in portal/live; a server that went away without a close is 4011).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qsl, quote, urlencode

from channels.db import database_sync_to_async
from django.core.exceptions import PermissionDenied
from django.http import Http404
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidHandshake, InvalidURI
from websockets.typing import Subprotocol

from portal import notebook_origin
from portal.notebook_origin import header
from portal.notebook_proxy import target_by_id
from scheduling.api import Endpoint, base_url

log = logging.getLogger(__name__)

NOT_SIGNED_IN, FORBIDDEN, NOT_FOUND, UNAVAILABLE = 4401, 4403, 4404, 4503
UPSTREAM_FAILED = 4011  # 1011 "internal error" in the application range
OPEN_TIMEOUT_S = 10.0
MAX_MESSAGE = 64 * 1024 * 1024  # a kernel's output with images can be large
# Close codes a websockets client may send (RFC 6455 7.4.1, less those only a server or no one sends).
CLIENT_CODES = frozenset({1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014})


def _endpoint(cookie: str | None, job_id: int, port: int, path: str) -> tuple[Endpoint, str] | int:
    """Where the notebook's server answers and the path under it, or the close code that refuses."""
    user = notebook_origin.user_of_cookie(cookie, job_id, port)
    if user is None:
        return NOT_SIGNED_IN
    try:
        job, endpoint = target_by_id(user, job_id, port)
    except Http404:
        return NOT_FOUND
    except PermissionDenied:
        return FORBIDDEN
    home = base_url(job.workspace.slug, job.name)
    if not path.startswith(home):
        return NOT_FOUND
    return (endpoint, path[len(home):]) if endpoint else UNAVAILABLE


def host_cookie(scope) -> str | None:
    """The notebook host's own cookie from the handshake (the only cookie this host reads)."""
    try:
        jar = SimpleCookie(header(scope, b"cookie") or "")
    except CookieError:
        return None
    morsel = jar.get(notebook_origin.COOKIE_NAME)
    return morsel.value if morsel else None


def upstream_url(endpoint: Endpoint, path: str, query_string: bytes) -> str:
    """The notebook's own websocket address for `path` (the query less any `token`: the token is ours)."""
    base = "ws" + endpoint.url[len("http"):] if endpoint.url.startswith("http") else endpoint.url
    pairs = [(k, v) for k, v in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True) if k != "token"]
    query = urlencode(pairs)
    return base + quote(path, safe="/:@!$&'()*+,;=-._~") + (f"?{query}" if query else "")


def to_client_code(code: int | None) -> int:
    """The upstream's close code as the ASGI servers let an application send it."""
    if code == 1000 or (code is not None and 3000 <= code <= 4999):
        return code
    if code == 1005:  # closed without a code
        return 1000
    if code is not None and 1001 <= code <= 1015 and code != 1006:
        return 4000 + code - 1000
    return UPSTREAM_FAILED


def to_upstream_code(code: int | None) -> int:
    if code is not None and (code in CLIENT_CODES or 3000 <= code <= 4999):
        return code
    return 1001  # the browser went away


class NotebookSocket:
    """The ASGI application of the websockets of notebooks' hosts (the host names the notebook)."""

    async def __call__(self, scope, receive, send):
        if (await receive())["type"] != "websocket.connect":
            return
        job_id, port = notebook_origin.parse_host(header(scope, b"host"))
        if header(scope, b"origin") != notebook_origin.origin_of(job_id, port):
            await send({"type": "websocket.close", "code": FORBIDDEN})
            return
        found = await database_sync_to_async(_endpoint)(host_cookie(scope), job_id, port, scope["path"])
        if isinstance(found, int):
            await send({"type": "websocket.close", "code": found})
            return
        found, path = found
        url = upstream_url(found, path, scope.get("query_string", b""))
        subprotocols = [Subprotocol(p) for p in scope.get("subprotocols", [])] or None
        auth = {"Authorization": f"token {found.token}"} if found.token else None
        try:
            upstream = await connect(url, additional_headers=auth,
                                     subprotocols=subprotocols, open_timeout=OPEN_TIMEOUT_S, max_size=MAX_MESSAGE,
                                     proxy=None)
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as error:
            log.warning("notebook %s: its websocket did not open: %s", job_id, error)
            await send({"type": "websocket.close", "code": 1011})
            return
        try:
            await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})
            await self._pump(receive, send, upstream)
        finally:
            await upstream.close()

    async def _pump(self, receive, send, upstream: ClientConnection) -> None:
        """Both ways until one side closes, then closes the other."""
        client_side = asyncio.ensure_future(self._from_client(receive, upstream))
        upstream_side = asyncio.ensure_future(self._from_upstream(send, upstream))
        try:
            done, _ = await asyncio.wait({client_side, upstream_side}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (client_side, upstream_side):
                task.cancel()
            for task in (client_side, upstream_side):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if client_side in done and not client_side.cancelled() and client_side.exception() is None:
            await upstream.close(to_upstream_code(client_side.result()))
            return
        code = upstream.close_code
        if code is None or code == 1006:
            error = client_side.exception() if client_side in done else upstream_side.exception()
            log.info("a notebook websocket ended without a close: %s", error)
        with contextlib.suppress(Exception):  # the browser may be gone already
            await send({"type": "websocket.close", "code": to_client_code(code)})

    @staticmethod
    async def _from_client(receive, upstream: ClientConnection) -> int | None:
        """The browser's messages to the notebook; returns its close code once it closed."""
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return message.get("code")
            if message["type"] == "websocket.receive":
                data = message.get("text")
                await upstream.send(data if data is not None else message.get("bytes") or b"")

    @staticmethod
    async def _from_upstream(send, upstream: ClientConnection) -> None:
        """The notebook's messages to the browser, until it closes (ConnectionClosed if not cleanly)."""
        async for data in upstream:
            await send({"type": "websocket.send", "text": data} if isinstance(data, str)
                       else {"type": "websocket.send", "bytes": data})

"""`/nb/<workspace>/<name>/<path>`: a notebook reached through the portal.

Only a signed-in member of the notebook's workspace who may submit gets through (a viewer: 403; anyone
else: the same 404 as for a notebook that does not exist). The request goes to the notebook's server (the backend says where:
scheduling/notebooks.py `endpoint_of`) under the same path, with the notebook's own token added here:
the browser never sees it. The portal's cookies and any Authorization header are not forwarded (the
notebook runs the tenant's code), hop-by-hop headers are dropped both ways, and the answer is streamed
back as it comes. Writes (POST, PUT, PATCH, DELETE) must come from a page of the portal itself (the
Origin header), since the session cookie alone would let another site drive the notebook. Websockets
(a real Jupyter's kernel channels) are relayed by portal/notebook_socket.py.
"""

from __future__ import annotations

import logging
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import httpx
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils.translation import gettext
from django.views.decorators.csrf import csrf_exempt

from portal import selectors as portal_selectors
from portal.notebooks import live_notebook
from scheduling.api import endpoint_of, get_backend

log = logging.getLogger(__name__)

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "trailers", "transfer-encoding", "upgrade"})
# Never passed on to the notebook: the portal's session and tokens, and what httpx sets itself.
REQUEST_DROPPED = HOP_BY_HOP | {"host", "cookie", "authorization", "content-length", "x-csrftoken", "origin",
                                "referer"}
# Not passed back: the notebook cannot set the portal's cookies; the portal's own CSP and framing rules apply.
RESPONSE_DROPPED = HOP_BY_HOP | {"set-cookie", "content-security-policy", "content-security-policy-report-only",
                                 "x-frame-options", "server", "date"}
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
METHODS = (*SAFE_METHODS, "POST", "PUT", "PATCH", "DELETE")
TIMEOUT = httpx.Timeout(connect=5.0, read=300.0, write=60.0, pool=5.0)
CHUNK = 64 * 1024


def _same_origin(request) -> bool:
    """A write comes from the portal's own pages: its Origin is this site (or one trusted for CSRF)."""
    origin = request.headers.get("Origin")
    if not origin:
        return request.headers.get("Sec-Fetch-Site") == "same-origin"
    return origin == f"{request.scheme}://{request.get_host()}" or origin in settings.CSRF_TRUSTED_ORIGINS


def _target(user, workspace: str, name: str):
    """(the notebook, where its server answers now or None); Http404 for anyone not a member, 403 for a
    member whose role may not submit (a viewer sees notebooks listed but runs no code in them)."""
    job = live_notebook(user, workspace, name)
    membership = portal_selectors.membership_for(user, job.workspace)
    if membership is None or not membership.can_submit:
        raise PermissionDenied(f"your role in '{job.workspace.slug}' may not open its notebooks")
    return job, endpoint_of(job, get_backend())


def named_in_connection(value: str | None) -> set[str]:
    """Headers a `Connection` header names are hop-by-hop too (RFC 9110, 7.6.1)."""
    return {token.strip().lower() for token in (value or "").split(",") if token.strip()}


def _headers(request, token: str) -> dict[str, str]:
    dropped = REQUEST_DROPPED | named_in_connection(request.headers.get("Connection"))
    headers = {k: v for k, v in request.headers.items() if k.lower() not in dropped}
    headers["Authorization"] = f"token {token}"
    headers["X-Forwarded-Proto"] = request.scheme
    headers["X-Forwarded-Host"] = request.get_host()
    return headers


def _query(request) -> str:
    """The query as sent, less any `token` (the notebook's token is ours to give)."""
    pairs = [(k, v) for k, v in parse_qsl(request.META.get("QUERY_STRING", ""), keep_blank_values=True)
             if k != "token"]
    return urlencode(pairs)


def _location(value: str, upstream: str) -> str:
    """A redirect to the notebook's own address becomes the same path on the portal."""
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(upstream))
    return value[len(origin):] or "/" if value.startswith(origin) else value


def copy_headers(upstream: httpx.Response, response: HttpResponse, url: str) -> None:
    dropped = RESPONSE_DROPPED | named_in_connection(upstream.headers.get("connection"))
    for key, value in upstream.headers.multi_items():
        if key.lower() in dropped:
            continue
        response[key] = _location(value, url) if key.lower() == "location" else value


async def relay(upstream: httpx.Response, client: httpx.AsyncClient):
    try:
        async for chunk in upstream.aiter_raw(CHUNK):
            yield chunk
    finally:
        await upstream.aclose()
        await client.aclose()


async def forward(request, url: str, query: str, headers: dict[str, str]) -> HttpResponse | None:
    """Send the request on to `url` (with `query` and `headers`) and give its answer back, streamed under
    ASGI; None when the upstream did not answer."""
    client = httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False)
    try:
        upstream = await client.send(
            client.build_request(request.method, url + (f"?{query}" if query else ""), headers=headers,
                                 content=request.body or None),
            stream=True)
    except httpx.HTTPError as error:
        await client.aclose()
        log.info("%s did not answer: %s", url, error)
        return None
    if not isinstance(request, ASGIRequest):  # no event loop to stream on (tests' WSGI client): read it whole
        try:
            body = b"".join([chunk async for chunk in upstream.aiter_raw(CHUNK)])  # as sent: still encoded
        finally:
            await upstream.aclose()
            await client.aclose()
        response = HttpResponse(body, status=upstream.status_code)
    else:
        response = StreamingHttpResponse(relay(upstream, client), status=upstream.status_code)
    copy_headers(upstream, response, url)
    response["Cache-Control"] = upstream.headers.get("cache-control", "private, no-store")
    return response


def _unavailable(request, job, status: int, why: str) -> HttpResponse:
    return render(request, "portal/notebook_unavailable.html", {"job": job, "why": why}, status=status)


@csrf_exempt  # writes are checked against their Origin instead: the notebook's own pages send no Django token
async def notebook_proxy(request, workspace: str, name: str, path: str = ""):
    user = await request.auser()
    if not user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if request.method not in METHODS:
        return HttpResponse(status=405, headers={"Allow": ", ".join(METHODS)})
    if request.method not in SAFE_METHODS and not _same_origin(request):
        return HttpResponse("Refused: a write to a notebook must come from the portal's own pages.\n", status=403,
                            content_type="text/plain; charset=utf-8")
    job, endpoint = await sync_to_async(_target)(user, workspace, name)
    if endpoint is None:
        why = (gettext("it is starting") if job.state in ("Pending", "Scheduled")
               else gettext("it is %(state)s") % {"state": job.state.lower()})
        return await sync_to_async(_unavailable)(request, job, 503, why)
    url = endpoint.url + quote(path, safe="/:@!$&'()*+,;=-._~")
    query = _query(request)
    response = await forward(request, url, query, _headers(request, endpoint.token))
    if response is None:
        log.warning("notebook %s/%s did not answer", workspace, name)
        return await sync_to_async(_unavailable)(request, job, 502, gettext("its server did not answer"))
    return response

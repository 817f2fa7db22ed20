"""A notebook reached on its own host (portal/notebook_origin.py), and the portal's `/nb/<workspace>/<name>/`
that sends a member there.

On the portal, `/nb/<workspace>/<name>/<path>` checks who asks: only a signed-in member of the notebook's
workspace who may submit gets through (a viewer: 403; anyone else: the same 404 as for a notebook that does
not exist; a stranger: the login page). The member is redirected to the notebook's host with a fresh ticket.

On the notebook's host (`notebook_host`, the only view there: portal.middleware.NotebookHostMiddleware),
`/_ticket` exchanges the ticket for the host's own cookie, and every other request is checked again (the
cookie's user must still be a member who may submit) and goes to the notebook's server (the backend says
where: scheduling/notebooks.py `endpoint_of`) under the same path, with the notebook's own token added
here: the browser never sees it. Cookies and any Authorization header are not forwarded (the notebook
runs the tenant's code), hop-by-hop headers are dropped both ways, and the answer is streamed back as it
comes. Writes (POST, PUT, PATCH, DELETE) must come from the notebook's own pages (the Origin header): other
notebooks share its site, so SameSite alone would let them drive it. Websockets (a real Jupyter's kernel
channels) are relayed by portal/notebook_socket.py.
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
from django.http import Http404, HttpResponse, HttpResponseRedirect, StreamingHttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils.translation import gettext
from django.views.decorators.csrf import csrf_exempt

from portal import notebook_origin
from portal import selectors as portal_selectors
from portal.notebooks import get_notebook_for_user, live_notebook
from scheduling.api import (
    TENSORBOARD_PORT,
    base_url,
    endpoint_of,
    get_backend,
    tensorboard_endpoint_of,
    tensorboard_logdir_of,
)
from scheduling.models import FINAL_STATES

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


def _same_origin(request, job_id: int, port: int) -> bool:
    """A write comes from the notebook's own pages: its Origin is this notebook's host."""
    origin = request.headers.get("Origin")
    if not origin:
        return request.headers.get("Sec-Fetch-Site") == "same-origin"
    return origin == notebook_origin.origin_of(job_id, port)


def _check_role(user, job) -> None:
    membership = portal_selectors.membership_for(user, job.workspace)
    if membership is None or not membership.can_submit:
        raise PermissionDenied(f"your role in '{job.workspace.slug}' may not open its notebooks")


def _target(user, workspace: str, name: str):
    """(the notebook, where its server answers now or None); Http404 for anyone not a member, 403 for a
    member whose role may not submit (a viewer sees notebooks listed but runs no code in them)."""
    job = live_notebook(user, workspace, name)
    _check_role(user, job)
    return job, endpoint_of(job, get_backend())


def home_of(job, port: int) -> str:
    """The path the server answers under on its host: a notebook's base URL, a TensorBoard's root."""
    return "/" if port == TENSORBOARD_PORT else base_url(job.workspace.slug, job.name)


def target_by_id(user, job_id: int, port: int):
    """The notebook a host names and where its server answers (None when it does not now): Http404 unless it
    is a live notebook of the user's workspaces served on that port, PermissionDenied for a role that may
    not submit. On TensorBoard's port: any live job of the user's workspaces that asks for one (it runs no
    code of theirs: every member may read it)."""
    if port == TENSORBOARD_PORT:
        job = portal_selectors.get_job_for_user(user, job_id)
        if job.state in FINAL_STATES or tensorboard_logdir_of(job) is None:
            raise Http404("No such TensorBoard")
        return job, tensorboard_endpoint_of(job, get_backend())
    if port != notebook_origin.NOTEBOOK_PORT:
        raise Http404("No such server")
    job = get_notebook_for_user(user, job_id)
    if job.state in FINAL_STATES:  # ended: its id opens nothing any more
        raise Http404("No such notebook")
    _check_role(user, job)
    return job, endpoint_of(job, get_backend())


def named_in_connection(value: str | None) -> set[str]:
    """Headers a `Connection` header names are hop-by-hop too (RFC 9110, 7.6.1)."""
    return {token.strip().lower() for token in (value or "").split(",") if token.strip()}


def _headers(request, token: str) -> dict[str, str]:
    dropped = REQUEST_DROPPED | named_in_connection(request.headers.get("Connection"))
    headers = {k: v for k, v in request.headers.items() if k.lower() not in dropped}
    if token:  # a TensorBoard asks for none
        headers["Authorization"] = f"token {token}"
    headers["X-Forwarded-Proto"] = request.scheme
    headers["X-Forwarded-Host"] = request.META.get("HTTP_HOST", "")
    return headers


def _query(request) -> str:
    """The query as sent, less any `token` (the notebook's token is ours to give)."""
    pairs = [(k, v) for k, v in parse_qsl(request.META.get("QUERY_STRING", ""), keep_blank_values=True)
             if k != "token"]
    return urlencode(pairs)


def _location(value: str, upstream: str) -> str:
    """A redirect to the notebook's own address becomes the same path on the notebook's host."""
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(upstream))
    return value[len(origin):] or "/" if value.startswith(origin) else value


def copy_headers(upstream: httpx.Response, response: HttpResponse, url: str) -> None:
    dropped = RESPONSE_DROPPED | named_in_connection(upstream.headers.get("connection"))
    for key, value in upstream.headers.multi_items():
        if key.lower() in dropped:
            continue
        response[key] = _location(value, url) if key.lower() == "location" else value


async def relay(upstream: httpx.Response, client: httpx.AsyncClient, raise_lost: bool = False):
    """The upstream's body as each chunk arrives (a chunk size would hold back a stream's events). An upstream
    lost mid-way ends it quietly unless `raise_lost` (the caller ends it its own way): an exception out of a
    started response leaves the client's connection open under Daphne."""
    try:
        async for chunk in upstream.aiter_raw():
            yield chunk
    except httpx.HTTPError as error:
        if raise_lost:
            raise
        log.warning("%s was lost mid-answer: %s", upstream.url, error)
    finally:
        await upstream.aclose()
        await client.aclose()


async def forward(request, url: str, query: str, headers: dict[str, str],
                  raise_lost: bool = False) -> HttpResponse | None:
    """Send the request on to `url` (with `query` and `headers`) and give its answer back, streamed under
    ASGI (`raise_lost`: see `relay`); None when the upstream did not answer."""
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
        response = StreamingHttpResponse(relay(upstream, client, raise_lost), status=upstream.status_code)
    copy_headers(upstream, response, url)
    response["Cache-Control"] = upstream.headers.get("cache-control", "private, no-store")
    return response


def _unavailable(request, job, status: int, why: str) -> HttpResponse:
    return render(request, "portal/notebook_unavailable.html", {"job": job, "why": why}, status=status)


def _why(job) -> str:
    return (gettext("it is starting") if job.state in ("Pending", "Scheduled")
            else gettext("it is %(state)s") % {"state": job.state.lower()})


async def notebook_redirect(request, workspace: str, name: str, path: str = ""):
    """`/nb/<workspace>/<name>/<path>` on the portal: a member goes on to the notebook's own host with a
    fresh ticket (the same path and query there); the portal itself serves nothing of the notebook."""
    user = await request.auser()
    if not user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if request.method not in SAFE_METHODS:
        return HttpResponse(status=405, headers={"Allow": ", ".join(SAFE_METHODS)})
    job, endpoint = await sync_to_async(_target)(user, workspace, name)
    if endpoint is None:
        return await sync_to_async(_unavailable)(request, job, 503, _why(job))
    url = notebook_origin.ticket_url(user, job, path=base_url(workspace, name) + path, query=_query(request))
    response = HttpResponseRedirect(url)
    response["Cache-Control"] = "no-store"
    return response


def _message(status: int, title: str, message: str) -> HttpResponse:
    """A page of the notebook's host: standalone (the portal's pages, assets and session are not here)."""
    html = render_to_string("portal/notebook_host_message.html", {
        "status": status, "title": title, "message": message, "portal_url": settings.PORTAL_URL.rstrip("/")})
    response = HttpResponse(html, status=status)
    response["Cache-Control"] = "no-store"
    return response


def _no_access() -> HttpResponse:
    return _message(403, gettext("Open this notebook from the portal"),
                    gettext("This address opens a notebook only for a member of its workspace who opened it "
                            "from the portal's notebooks page."))


def _not_found() -> HttpResponse:
    return _message(404, gettext("No such notebook"),
                    gettext("This notebook does not exist, or you are not a member of its workspace."))


def _redeem(request, job_id: int, port: int) -> HttpResponse:
    """`/_ticket?ticket=...&next=...`: the ticket, once, for this host's cookie; then on to `next` (a path of
    this notebook), so that the ticket leaves the address bar and the history."""
    try:
        user_id = notebook_origin.redeem_ticket(request.GET.get("ticket", ""), job_id, port)
    except notebook_origin.TicketRefused as refused:
        log.info("notebook %s: a ticket refused: %s", job_id, refused)
        return _no_access()
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    found = _opened_by(user, job_id, port)
    if isinstance(found, HttpResponse):
        return found
    job, _ = found
    home = home_of(job, port)
    next_ = request.GET.get("next", "")
    response = HttpResponseRedirect(next_ if next_.startswith(home) and "\\" not in next_ else home)
    response.set_cookie(notebook_origin.COOKIE_NAME, notebook_origin.session_cookie(user, job_id, port),
                        max_age=settings.NOTEBOOK_SESSION_SECONDS, path="/", secure=notebook_origin.origin().secure,
                        httponly=True, samesite="Lax")
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"
    return response


def _access(request, job_id: int, port: int):
    """(the notebook, its endpoint or None) for the user of the host's cookie, or the response that refuses."""
    user = notebook_origin.user_of_cookie(request.COOKIES.get(notebook_origin.COOKIE_NAME), job_id, port)
    return _opened_by(user, job_id, port)


def _opened_by(user, job_id: int, port: int):
    """(the notebook, its endpoint or None) for `user`, or the response that refuses (no user: no access)."""
    if user is None:
        return _no_access()
    try:
        return target_by_id(user, job_id, port)
    except Http404:
        return _not_found()
    except PermissionDenied:
        return _no_access()


@csrf_exempt  # writes are checked against their Origin instead: the notebook's own pages send no Django token
async def notebook_host(request):
    """Every request to a notebook's host (portal.middleware.NotebookHostMiddleware sends them here)."""
    job_id, port = notebook_origin.parse_host(request.META.get("HTTP_HOST"))
    if request.path == notebook_origin.TICKET_PATH:
        return await sync_to_async(_redeem)(request, job_id, port)
    if request.method not in METHODS:
        return HttpResponse(status=405, headers={"Allow": ", ".join(METHODS)})
    if request.method not in SAFE_METHODS and not _same_origin(request, job_id, port):
        return HttpResponse("Refused: a write to a notebook must come from its own pages.\n", status=403,
                            content_type="text/plain; charset=utf-8")
    found = await sync_to_async(_access)(request, job_id, port)
    if isinstance(found, HttpResponse):
        return found
    job, endpoint = found
    home = home_of(job, port)
    if not request.path.startswith(home):
        if request.path == "/":
            return HttpResponseRedirect(home)
        return _not_found()
    title = (gettext("TensorBoard of %(name)s cannot be opened now") if port == TENSORBOARD_PORT
             else gettext("Notebook %(name)s cannot be opened now")) % {"name": job.name}
    if endpoint is None:
        return _message(503, title, gettext("It is %(state)s: %(why)s.") % {"state": job.state, "why": _why(job)})
    url = endpoint.url + quote(request.path[len(home):], safe="/:@!$&'()*+,;=-._~")
    response = await forward(request, url, _query(request), _headers(request, endpoint.token))
    if response is None:
        log.warning("job %s's server on port %s did not answer", job_id, port)
        return _message(502, title, gettext("Its server did not answer."))
    return response

"""`/serve/<workspace>/<name>/<path>`: an inference service's endpoint on the portal.

Clients call it with a personal API token (`Authorization: Bearer gpt_...`) of a member of the
workspace whose token has the submit scope; anyone else gets the same 404 as for a service that does
not exist (a viewer, or a token without submit: 403). The request goes to one of the service's ready
replicas under `<path>` (a model server answers at its root: /v1/completions...), with the replicas'
own key in place of the client's token.

A service scaled to zero (or one whose replicas are all still starting) does not refuse the request:
the endpoint wakes it (`scheduling.inference.wake`: back in its queue), holds the request while the
scheduler places a replica and its server loads the model, up to SERVE_COLD_START_TIMEOUT_S, then
sends it on; the wait is recorded as a cold start. Errors are in the OpenAI error shape
(portal.serve_errors), which the OpenAI clients that call it read.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time

import httpx
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions

from portal import selectors as portal_selectors
from portal.api.authentication import ApiTokenAuthentication
from portal.api.errors import NotFound
from portal.models import TokenScope
from portal.notebook_proxy import REQUEST_DROPPED, forward, named_in_connection
from portal.serve_errors import openai_error
from scheduling import kinds
from scheduling.api import (
    DomainError,
    Endpoint,
    Forbidden,
    get_backend,
    inference,
    service_revisions,
    service_usage,
)
from scheduling.models import FINAL_STATES, Job, JobState

log = logging.getLogger(__name__)

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
POLL_S = 0.25
HEALTH_TIMEOUT_S = 2.0


class Unauthorized(DomainError):
    status = 401
    title = "Not allowed"


class Unavailable(DomainError):
    status = 503
    title = "Service unavailable"


class BadGateway(DomainError):
    status = 502
    title = "Service unavailable"


class ServeScopes:
    """What the endpoint asks of a token, whatever the method: submit (it runs the tenant's model)."""

    token_scopes = {method: TokenScope.SUBMIT for method in METHODS}


def _caller(request):
    """The token's user, or a problem: no token (401), bad or expired (401), below submit (403)."""
    request.parser_context = {"view": ServeScopes}
    try:
        found = ApiTokenAuthentication().authenticate(request)
    except exceptions.PermissionDenied as error:
        raise Forbidden(str(error.detail)) from None
    except exceptions.AuthenticationFailed as error:
        raise Unauthorized(str(error.detail)) from None
    if found is None:
        raise Unauthorized("call the endpoint with 'Authorization: Bearer <API token>' (a token with the submit "
                           "scope, from /account/tokens/)")
    return found[0]


def live_service(user, workspace_slug: str, name: str) -> Job:
    """The service the URL names: 404 unless the caller is a member of its workspace who may submit."""
    missing = NotFound(f"no service '{name}' in workspace '{workspace_slug}' that this token may call")
    workspace = portal_selectors.workspaces_for(user).filter(slug=workspace_slug).first()
    if workspace is None:
        raise missing
    membership = portal_selectors.membership_for(user, workspace)
    if membership is None or not membership.can_submit:
        raise Forbidden(f"your role in '{workspace.slug}' may not call its services")
    job = (Job.objects.filter(workspace=workspace, kind__in=kinds.names_where(autoscaled=True), name=name)
           .exclude(state__in=FINAL_STATES).select_related("workspace").order_by("-created", "-id").first())
    if job is None:
        raise missing
    return job


# A server found healthy is trusted this long: a busy service is not probed on every request.
HEALTHY_FOR_S = 5.0
_healthy_until: dict[str, float] = {}


def _healthy(endpoint: Endpoint, health_path: str) -> bool:
    now = time.monotonic()
    try:
        response = httpx.get(endpoint.url + health_path.lstrip("/"), timeout=HEALTH_TIMEOUT_S,
                             headers={"Authorization": f"Bearer {endpoint.token}"} if endpoint.token else {})
    except httpx.HTTPError:
        response = None
    if response is None or response.status_code != 200:
        _healthy_until.pop(endpoint.url, None)
        return False
    if len(_healthy_until) > 1000:   # replicas come and go: forget the expired ones
        for url in [u for u, until in _healthy_until.items() if until <= now]:
            del _healthy_until[url]
    _healthy_until[endpoint.url] = now + HEALTHY_FOR_S
    return True


def ready_endpoint(job: Job) -> Endpoint | None:
    """A running replica whose server answers its health path, tried in random order (which spreads the
    requests); None when there is none. Refreshes `job.state`."""
    job.refresh_from_db(fields=["state"])
    if job.state not in (JobState.RUNNING, JobState.SCHEDULED):
        return None
    endpoints = by_traffic(job, inference.ready_endpoints(job, get_backend()))
    health = None
    for endpoint in endpoints:
        if _healthy_until.get(endpoint.url, 0.0) > time.monotonic():
            return endpoint
        if health is None:
            spec = inference.inference_spec(job)
            health = spec.health_path if spec is not None else "/health"
        if _healthy(endpoint, health):
            return endpoint
    return None


def by_traffic(job: Job, endpoints: list[Endpoint]) -> list[Endpoint]:
    """The endpoints in the order to try them: those of the revision this request draws from the service's
    traffic split first (shuffled), then the rest (shuffled), so a revision with no ready replica yet leaves
    its share to the others (the old one keeps serving until the new one is ready)."""
    random.shuffle(endpoints)
    split = service_revisions.traffic_split(job)
    if len(split) < 2:
        drawn = split[0][0] if split else None
    else:
        drawn = random.choices([revision for revision, _ in split], weights=[p for _, p in split])[0]
    if drawn is None:
        return endpoints
    return sorted(endpoints, key=lambda e: e.revision != drawn)


async def _wait_for_replica(job: Job) -> tuple[Endpoint, float | None]:
    """A ready replica, waking the service and waiting for one when it has none; (endpoint, seconds
    waited when it had to wait)."""
    endpoint = await sync_to_async(ready_endpoint)(job)
    if endpoint is not None:
        return endpoint, None
    started = time.monotonic()
    await sync_to_async(inference.wake)(job)
    deadline = started + settings.SERVE_COLD_START_TIMEOUT_S
    while time.monotonic() < deadline:
        await asyncio.sleep(POLL_S)
        endpoint = await sync_to_async(ready_endpoint)(job)
        if endpoint is not None:
            return endpoint, time.monotonic() - started
        if job.state in FINAL_STATES:   # ready_endpoint read it
            break
    raise Unavailable(f"service '{job.name}' has no ready replica after {time.monotonic() - started:.0f} s "
                      f"(it is {job.state}); try again shortly")


def _headers(request, token: str) -> dict[str, str]:
    dropped = REQUEST_DROPPED | named_in_connection(request.headers.get("Connection"))
    headers = {k: v for k, v in request.headers.items() if k.lower() not in dropped}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    headers["X-Forwarded-Proto"] = request.scheme
    headers["X-Forwarded-Host"] = request.get_host()
    return headers


def error_response(error: DomainError) -> HttpResponse:
    """A refusal of this endpoint in the OpenAI error shape, with Retry-After when it is worth retrying."""
    headers = {"Retry-After": "5"} if isinstance(error, Unavailable) else None
    return openai_error(error.status, str(error) or error.title, headers=headers)


@csrf_exempt  # token-authenticated: no session cookie is read, so no cross-site request can use one
async def serve_proxy(request, workspace: str, name: str, path: str = ""):
    if request.method not in METHODS:
        return openai_error(405, f"method {request.method} is not allowed here",
                            headers={"Allow": ", ".join(METHODS)})
    try:
        request.body  # noqa: B018 - over DATA_UPLOAD_MAX_MEMORY_SIZE: refused before anything is woken
    except RequestDataTooBig:
        return openai_error(413, f"the body may hold at most {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes")
    try:
        user = await sync_to_async(_caller)(request)
        job = await sync_to_async(live_service)(user, workspace, name)
        endpoint, waited = await _wait_for_replica(job)
    except DomainError as error:
        return error_response(error)
    if waited is not None:
        await sync_to_async(inference.record_cold_start)(job, waited)
    query = request.META.get("QUERY_STRING", "")
    response = await forward(request, endpoint.url + path.lstrip("/"), query, _headers(request, endpoint.token))
    if response is None:
        # no answer at all (its process ended since its health was checked: scaled down, restarted, lost): the
        # request never reached a model, so it goes once to another ready replica, waking the service if need be
        log.warning("service %s/%s: a replica did not answer; trying another", workspace, name)
        _healthy_until.pop(endpoint.url, None)
        try:
            endpoint, _waited = await _wait_for_replica(job)
        except DomainError as error:
            return error_response(error)
        response = await forward(request, endpoint.url + path.lstrip("/"), query, _headers(request, endpoint.token))
    if response is None:
        log.warning("service %s/%s did not answer", workspace, name)
        return error_response(BadGateway(f"a replica of service '{name}' did not answer; try again"))
    if waited is not None:
        response["X-Cold-Start-Seconds"] = f"{waited:.3f}"
    return await metered(response, job, getattr(request, "service_key_id", None), endpoint)


# --------------------------------------------------------------------------- metering

METERED_BODY_MAX = 4 * 1024 * 1024   # a JSON answer longer than this is passed on unmetered


def record_usage(service: Job, key_id: int | None, usage: dict | None, replica: Endpoint, *,
                 prefill_s=None, decode_s=None, ttft_s=None) -> bool:
    """Meter one answer's `usage` for the service, per key (None: a member's token), minute and the replica
    that gave it (and its revision). Both the JSON and the streamed answers end here."""
    return service_usage.record_usage(service, key_id, usage, replica.replica, revision=replica.revision,
                                      prefill_s=prefill_s, decode_s=decode_s, ttft_s=ttft_s)


def _answer_usage(body: bytes) -> dict | None:
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    return answer.get("usage") if isinstance(answer, dict) else None


def _phases(response) -> dict[str, str | None]:
    """The phase seconds and time to first token the replica reported with its answer (the simulated server
    does; vLLM does not, and its phases come from its metrics instead)."""
    return {"prefill_s": response.get("X-Prefill-Seconds"), "decode_s": response.get("X-Decode-Seconds"),
            "ttft_s": response.get("X-Time-To-First-Token-Seconds")}


async def metered(response: HttpResponse, job: Job, key_id: int | None, endpoint: Endpoint) -> HttpResponse:
    """The answer as it is, metered when it is a successful JSON answer: a whole one at once, a streamed one
    (ASGI) chunk by chunk as it passes, its body kept aside up to METERED_BODY_MAX and read at its end."""
    if response.status_code != 200 or not response.get("Content-Type", "").startswith("application/json") \
            or response.get("Content-Encoding", "identity") != "identity":
        return response
    phases = _phases(response)
    if not isinstance(response, StreamingHttpResponse):
        await sync_to_async(record_usage)(job, key_id, _answer_usage(response.content), endpoint, **phases)
        return response
    upstream = response.streaming_content

    async def passing():
        kept, size = [], 0
        async for chunk in upstream:
            size += len(chunk)
            if size <= METERED_BODY_MAX:
                kept.append(chunk)
            yield chunk
        if size <= METERED_BODY_MAX:
            await sync_to_async(record_usage)(job, key_id, _answer_usage(b"".join(kept)), endpoint, **phases)

    response.streaming_content = passing()
    return response


@csrf_exempt  # it changes nothing; any method gets the same 404
def serve_not_found(request, *args, **kwargs) -> HttpResponse:
    """A /serve/ path that names no service (/serve/<workspace>/<name>/...)."""
    return openai_error(404, f"no service at {request.path}; call /serve/<workspace>/<service>/<path>")

"""`/serve/<workspace>/<name>/<path>`: an inference service's endpoint on the portal.

Clients call it with one of the service's own keys (`Authorization: Bearer gsk_...` or `api-key`:
portal.service_keys), which opens that service only, or with a personal API token (`gpt_...`) of a
member of the workspace whose token has the submit scope; anyone else gets the same 404 as for a
service that does not exist (a viewer, or a token without submit: 403). Over a limit of the service or
of the key, or with the portal's queue full at max replicas: 429 (portal.serve_limits). The request goes to one of the service's ready
replicas under `<path>` (a model server answers at its root: /v1/completions...), with the replicas'
own key in place of the client's token.

A service scaled to zero (or one whose replicas are all still starting) does not refuse the request:
the endpoint wakes it (`scheduling.inference.wake`: back in its queue), holds the request while the
scheduler places a replica and its server loads the model, up to SERVE_COLD_START_TIMEOUT_S, then
sends it on; the wait is recorded as a cold start. Answers are streamed as they come (server-sent events
chunk by chunk); a client that goes away cancels the request upstream (Django cancels the response, which
closes the connection to the replica). Each answer's time to first token is kept (portal.serve_metrics),
its tokens counted against the limits; a key revoked or expired while its stream is open ends the stream.
Errors are in the OpenAI error shape (portal.serve_errors), which the OpenAI clients that call it read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError, close_old_connections
from django.http import HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions

from portal import selectors as portal_selectors
from portal import serve_limits, serve_metrics, service_keys
from portal.api.authentication import ApiTokenAuthentication
from portal.api.errors import NotFound
from portal.credentials import presented
from portal.models import ServiceKey, TokenScope
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
from scheduling.models import FINAL_STATES, Job, JobState, ServiceScale

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


class OverLimit(DomainError):
    status = 429
    title = "Too many requests"

    def __init__(self, message: str, retry_after_s: int):
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class Caller:
    """Who calls: one of the service's keys, or a member by a personal token."""

    user: object = None
    key: ServiceKey | None = None

    @property
    def ident(self) -> str:
        """Whom the queue is fair between."""
        return f"key:{self.key.pk}" if self.key is not None else f"user:{getattr(self.user, 'pk', '')}"


def _caller(request) -> Caller:
    """A service key (unknown, revoked or expired: 401), or a personal token's user (see `_token_user`)."""
    found = presented(request.META)
    if found is not None and not found.malformed and service_keys.is_service_key(found.token):
        try:
            return Caller(key=service_keys.authenticate(found.token))
        except service_keys.KeyRefused as refused:
            raise Unauthorized(str(refused)) from None
    return Caller(user=_token_user(request))


def _token_user(request):
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
    job = (Job.objects.filter(workspace=workspace, kind__in=kinds.autoscaled(), name=name)
           .exclude(state__in=FINAL_STATES).select_related("workspace").order_by("-created", "-id").first())
    if job is None:
        raise missing
    return job


def service_for(caller: Caller, workspace_slug: str, name: str) -> Job:
    """The service the URL names, if the caller may call it: a key opens its own service only (any other
    is the same 404 as a service that does not exist)."""
    if caller.key is None:
        return live_service(caller.user, workspace_slug, name)
    job = caller.key.job
    if job.workspace.slug != workspace_slug or job.name != name or job.state in FINAL_STATES:
        raise NotFound(f"no service '{name}' in workspace '{workspace_slug}' that this key may call")
    return job


def limit_scopes(job: Job, caller: Caller) -> list[serve_limits.Scope]:
    """The limits this request counts against: the service's, and its key's."""
    rpm, tpm = ServiceScale.objects.filter(job=job).values_list(
        "requests_per_minute", "tokens_per_minute").first() or (None, None)
    scopes = [serve_limits.Scope("service", f"service:{job.pk}", rpm, tpm)]
    if caller.key is not None:
        scopes.append(serve_limits.Scope("key", f"key:{caller.key.pk}", caller.key.requests_per_minute,
                                         caller.key.tokens_per_minute))
    return scopes


def queue_capacity(job: Job) -> int | None:
    """Requests the service takes at once when it is at its max replicas (running replicas x
    SERVE_REPLICA_CONCURRENCY); None below its max (the autoscaler adds replicas instead)."""
    top = ServiceScale.objects.filter(job=job).values_list("max_replicas", flat=True).first()
    running = job.replicas.filter(state=JobState.RUNNING).count()
    if top is None or running < top:
        return None
    return running * settings.SERVE_REPLICA_CONCURRENCY


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


def ready_endpoint(job: Job, avoid: str | None = None) -> Endpoint | None:
    """A running replica whose server answers its health path, tried in random order (which spreads the
    requests), the one at `avoid` (it just failed) last: asked again, not trusted, it is taken only when it
    answers its health path and no other does (a connection that timed out on a busy machine, to a service's
    only replica); None when there is none. Refreshes `job.state`."""
    job.refresh_from_db(fields=["state"])
    if job.state not in (JobState.RUNNING, JobState.SCHEDULED):
        return None
    endpoints = by_traffic(job, inference.ready_endpoints(job, get_backend()))
    endpoints.sort(key=lambda e: e.url == avoid)
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


# While the portal holds a request for a service (from its admission until a replica has it) the service is
# told so this often, once per service whoever holds: the autoscaler sees held requests in no replica's
# figures, and a replica that runs but still loads its model, or a portal slowed by load, must not have the
# service scaled away under them (scheduling.inference.HELD_FRESH_S).
HELD_MARK_S = 1.0
_held_marked: dict[int, float] = {}


# Its own thread: a mark that waits on the database must not hold a thread of the event loop's default
# executor, which also resolves the replicas' addresses for the connections to them.
_MARKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="serve-held")


def _mark_held(job: Job) -> None:
    try:
        inference.still_held(job)   # a service stopped meanwhile is woken: a held request needs a replica
    except DatabaseError as error:   # busy: the next beat says it again
        log.info("service %s: held requests not marked: %s", job.pk, error)
    finally:
        close_old_connections()


async def _heartbeat(job: Job) -> None:
    await asyncio.sleep(HELD_MARK_S)   # a request that passes within it writes nothing
    while True:
        now = time.monotonic()
        if now - _held_marked.get(job.pk, 0.0) >= HELD_MARK_S:
            _held_marked[job.pk] = now
            await asyncio.get_running_loop().run_in_executor(_MARKER, _mark_held, job)
        await asyncio.sleep(HELD_MARK_S / 4)


@contextlib.asynccontextmanager
async def _held(job: Job):
    """The request is in the portal on its way to a replica for the block's time: the service is told so."""
    beat = asyncio.create_task(_heartbeat(job))
    try:
        yield
    finally:
        beat.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await beat


async def _wait_for_replica(job: Job, avoid: str | None = None) -> tuple[Endpoint, float | None]:
    """A ready replica (the one at `avoid` last), waking the service and waiting for one when it has none;
    (endpoint, seconds waited when it had to wait)."""
    endpoint = await sync_to_async(ready_endpoint)(job, avoid)
    if endpoint is not None:
        return endpoint, None
    started = time.monotonic()
    await sync_to_async(inference.wake)(job)
    _held_marked[job.pk] = time.monotonic()   # the heartbeat need not say it again at once
    deadline = started + settings.SERVE_COLD_START_TIMEOUT_S
    while time.monotonic() < deadline:
        await asyncio.sleep(POLL_S)
        endpoint = await sync_to_async(ready_endpoint)(job, avoid)
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
    if isinstance(error, OverLimit):
        headers = {"Retry-After": str(error.retry_after_s)}
    return openai_error(error.status, str(error) or error.title, headers=headers)


def over_limit(over: serve_limits.OverLimit, job: Job) -> OverLimit:
    whose = f"service '{job.name}'" if over.scope.name == "service" else "this key"
    return OverLimit(f"{whose} may make {over.limit} {over.what} a minute and has used them; retry in "
                     f"{over.retry_after_s} s", over.retry_after_s)


async def _through_gate(gate: serve_limits.Gate, job: Job) -> None:
    """Past the portal's queue when the service is at its max replicas (OverLimit when it is full)."""
    capacity = await sync_to_async(queue_capacity)(job)
    try:
        await gate.enter(capacity, settings.SERVE_COLD_START_TIMEOUT_S)
    except serve_limits.QueueFull as full:
        raise OverLimit(f"service '{job.name}' is at its max replicas and {full.waiting} requests are waiting "
                        f"already; retry shortly", 2) from None
    except TimeoutError:
        raise Unavailable(f"service '{job.name}' is at its max replicas and this request waited "
                          f"{settings.SERVE_COLD_START_TIMEOUT_S:.0f} s; try again shortly") from None


@dataclass(frozen=True)
class Metering:
    """Where an answer's tokens are metered: the replica that gave it, the service key it was asked with
    (None: a member's token), and the phase seconds the replica reported in its headers."""

    endpoint: Endpoint
    key_id: int | None
    phases: dict


class Usage:
    """The tokens of an answer, read as it passes: `usage` of a JSON answer, or of a stream's chunks (the
    last, with stream_options.include_usage); else a stream's chunks with text, one token each."""

    MAX_JSON = 4 * 1024 * 1024

    def __init__(self, content_type: str, metering: Metering | None = None):
        self.metering = metering
        self.ttft_s: float | None = None   # a stream's first chunk, as the proxy saw it
        self.stream = content_type.startswith("text/event-stream")
        self.json = content_type.startswith("application/json")
        self.buffer = b""
        self.prompt = self.completion = 0
        self.reported = False

    def feed(self, chunk: bytes) -> None:
        if not (self.stream or self.json):
            return
        self.buffer += chunk
        if self.json:
            if len(self.buffer) > self.MAX_JSON:
                self.json, self.buffer = False, b""
            return
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            if not line.startswith(b"data: {"):
                continue
            if b'"usage": {' in line or b'"usage":{' in line:   # only the usage chunk is parsed: a stream is
                self._event(line[6:])                          # mostly tokens, each one a chunk
            elif not self.reported:
                self.completion += 1

    def _event(self, data: bytes) -> None:
        try:
            event = json.loads(data)
        except ValueError:
            return
        usage = event.get("usage") if isinstance(event, dict) else None
        if isinstance(usage, dict):
            self._usage(usage)

    def _usage(self, usage: dict) -> None:
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int) and isinstance(completion, int):
            self.prompt, self.completion, self.reported = prompt, completion, True

    def close(self) -> None:
        if self.json and self.buffer:
            try:
                body = json.loads(self.buffer)
            except ValueError:
                return
            if isinstance(body, dict) and isinstance(body.get("usage"), dict):
                self._usage(body["usage"])

    @property
    def tokens(self) -> int:
        return self.prompt + self.completion


def answered(job: Job, caller: Caller, scopes: list[serve_limits.Scope], usage: Usage, ttft_s: float | None) -> None:
    """An answer has ended: its tokens count against the limits, its time to first token is kept."""
    usage.close()
    serve_limits.add_tokens(scopes, usage.tokens)
    if ttft_s is not None:
        serve_metrics.record_ttft(job.pk, ttft_s)
    if usage.metering is not None and (usage.reported or usage.tokens):
        seen = ttft_s if ttft_s is not None else usage.ttft_s
        phases = {**usage.metering.phases, **({"ttft_s": seen} if seen is not None else {})}
        record_usage(job, usage.metering.key_id, {"prompt_tokens": usage.prompt, "completion_tokens": usage.completion},
                     usage.metering.endpoint, **phases)


KEY_RECHECK_S = 0.25   # an open stream's key is checked again at most this often
KEY_ENDED = (b'data: {"error": {"message": "this service key was revoked or has expired", '
             b'"type": "authentication_error", "code": "invalid_api_key"}}\n\n')
UPSTREAM_LOST = (b'data: {"error": {"message": "the replica serving this answer stopped before its end; retry the '
                 b'request", "type": "server_error", "code": "upstream_lost"}}\n\n')


async def _observed(first: bytes | None, content, job: Job, caller: Caller, scopes, gate: serve_limits.Gate,
                    usage: Usage):
    """The answer's body as it comes, chunk by chunk, from its first (already read, its TTFT kept); a key
    revoked or expired on the way ends the stream at its next chunk. A replica lost mid-way ends the stream
    with an error event (never an exception: the ASGI server would leave the client's connection open)."""
    checked = time.monotonic()
    try:
        if first is not None:
            usage.feed(first)
            yield first
        async for chunk in content:
            if caller.key is not None and time.monotonic() - checked >= KEY_RECHECK_S:
                checked = time.monotonic()
                if not await sync_to_async(service_keys.still_valid)(caller.key.pk):
                    yield KEY_ENDED if usage.stream else b""
                    return
            usage.feed(chunk)
            yield chunk
    except Exception as error:   # the replica went (scaled down past its grace, crashed) or did not finish
        log.warning("service %s: an answer's replica was lost mid-way: %s", job.pk, error)
        yield UPSTREAM_LOST if usage.stream else b""
    finally:
        if content is not None:   # the replica's connection closes now, not when the generator is collected
            with contextlib.suppress(Exception):
                await content.aclose()
        gate.leave()
        # shielded: a client that closes as soon as it has the body cancels this generator, not its metering
        await asyncio.shield(sync_to_async(answered)(job, caller, scopes, usage, None))


class ObservedStream(StreamingHttpResponse):
    """A streamed answer whose own generator is closed when the response is, however it ends (Django closes
    only the outermost of its wrappers: a client that goes after the last chunk would leave ours open). Its
    place in the service's queue is given back when it is closed even if its body was never read (a generator
    never started runs no `finally`)."""

    gate: serve_limits.Gate | None = None

    def close(self):
        if self.gate is not None:
            self.gate.leave()   # a no-op when the body's end already left
        super().close()

    async def __aiter__(self):
        try:
            async for part in self._iterator:
                yield part
        finally:
            await self._iterator.aclose()


async def _whole(response: HttpResponse, job: Job, caller: Caller, scopes, gate: serve_limits.Gate,
                 started: float, metering: Metering) -> HttpResponse:
    """The answer read whole (no event loop to stream on, the tests' WSGI client): measured once."""
    usage = Usage(response.get("Content-Type", ""), metering)
    usage.feed(response.content)
    gate.leave()
    await sync_to_async(answered)(job, caller, scopes, usage, time.monotonic() - started)
    return response


@csrf_exempt  # token-authenticated: no session cookie is read, so no cross-site request can use one
async def serve_proxy(request, workspace: str, name: str, path: str = ""):
    if request.method not in METHODS:
        return openai_error(405, f"method {request.method} is not allowed here",
                            headers={"Allow": ", ".join(METHODS)})
    try:
        request.body  # noqa: B018 - over DATA_UPLOAD_MAX_MEMORY_SIZE: refused before anything is woken
    except RequestDataTooBig:
        return openai_error(413, f"the body may hold at most {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes")
    started = time.monotonic()
    try:
        caller = await sync_to_async(_caller)(request)
        job = await sync_to_async(service_for)(caller, workspace, name)
        scopes = await sync_to_async(limit_scopes)(job, caller)
        over = await sync_to_async(serve_limits.admit, thread_sensitive=False)(scopes)
        if over is not None:
            raise over_limit(over, job)
    except DomainError as error:
        return error_response(error)
    gate = serve_limits.Gate(job.pk, caller.ident)
    async with _held(job):
        try:
            endpoint, waited = await _wait_for_replica(job)
            if waited is not None:
                await sync_to_async(inference.record_cold_start)(job, waited)
            await _through_gate(gate, job)
            response, endpoint, first, first_at, rest = await _forwarded(request, job, endpoint, path, workspace,
                                                                         name)
        except DomainError as error:
            gate.leave()
            return error_response(error)
        except BaseException:   # cancelled (the client went) or failed: its place is given back
            gate.leave()
            raise
    if waited is not None:
        response["X-Cold-Start-Seconds"] = f"{waited:.3f}"
    metering = Metering(endpoint, caller.key.pk if caller.key is not None else None, _phases(response))
    if isinstance(response, StreamingHttpResponse):
        usage = Usage(response.get("Content-Type", ""), metering)
        if first is not None:   # kept at once: the client may go before the answer's end
            usage.ttft_s = first_at - started
            await sync_to_async(serve_metrics.record_ttft, thread_sensitive=False)(job.pk, usage.ttft_s)
        observed = ObservedStream(_observed(first, rest, job, caller, scopes, gate, usage),
                                  status=response.status_code)
        observed.gate = gate
        for header, value in response.items():
            if header.lower() != "content-length":   # an answer cut short must end, not leave the client waiting
                observed[header] = value
        return observed
    return await _whole(response, job, caller, scopes, gate, started, metering)


async def _first_part(response: HttpResponse):
    """(the first chunk of a streamed answer or None when it has none, the rest to read); a replica that fails
    before it raises httpx.HTTPError, its connection closed. A whole answer: (None, None)."""
    if not isinstance(response, StreamingHttpResponse):
        return None, None
    content = aiter(response.streaming_content)
    try:
        return await anext(content), content
    except StopAsyncIteration:
        return None, content
    except BaseException:
        await content.aclose()
        raise


FORWARD_ATTEMPTS = 3   # replicas a request is sent to before it is refused with 502


async def _forwarded(request, job: Job, endpoint: Endpoint, path: str, workspace: str, name: str):
    """(the replica's answer, the replica that gave it, a streamed answer's first chunk, when it came, the rest
    of its body); from another replica when one failed before its first chunk (its process ended since its
    health was checked: scaled down, restarted, lost): nothing reached the client yet. Up to FORWARD_ATTEMPTS
    replicas (the third only within the cold-start timeout)."""
    query = request.META.get("QUERY_STRING", "")
    deadline = time.monotonic() + settings.SERVE_COLD_START_TIMEOUT_S
    for attempt in range(1, FORWARD_ATTEMPTS + 1):
        try:
            response = await forward(request, endpoint.url + path.lstrip("/"), query,
                                     _headers(request, endpoint.token), raise_lost=True)
            if response is not None:
                first, rest = await _first_part(response)
                return response, endpoint, first, time.monotonic(), rest
        except httpx.HTTPError as error:
            log.info("%s failed before its first chunk: %s", endpoint.url, error)
        _healthy_until.pop(endpoint.url, None)
        if attempt == FORWARD_ATTEMPTS or (attempt > 1 and time.monotonic() >= deadline):   # a second always
            break
        log.warning("service %s/%s: a replica did not answer; trying another", workspace, name)
        endpoint, _waited = await _wait_for_replica(job, avoid=endpoint.url)
    log.warning("service %s/%s did not answer", workspace, name)
    raise BadGateway(f"a replica of service '{name}' did not answer; try again")


# --------------------------------------------------------------------------- metering


def record_usage(service: Job, key_id: int | None, usage: dict | None, replica: Endpoint, *,
                 prefill_s=None, decode_s=None, ttft_s=None) -> bool:
    """Meter one answer's `usage` for the service, per key (None: a member's token), minute and the replica
    that gave it (and its revision). Both the JSON and the streamed answers end here."""
    return service_usage.record_usage(service, key_id, usage, replica.replica, revision=replica.revision,
                                      prefill_s=prefill_s, decode_s=decode_s, ttft_s=ttft_s)


def _phases(response) -> dict[str, str | None]:
    """The phase seconds and time to first token the replica reported with its answer (the simulated server
    does; vLLM does not, and its phases come from its metrics instead)."""
    return {"prefill_s": response.get("X-Prefill-Seconds"), "decode_s": response.get("X-Decode-Seconds"),
            "ttft_s": response.get("X-Time-To-First-Token-Seconds")}


@csrf_exempt  # it changes nothing; any method gets the same 404
def serve_not_found(request, *args, **kwargs) -> HttpResponse:
    """A /serve/ path that names no service (/serve/<workspace>/<name>/...)."""
    return openai_error(404, f"no service at {request.path}; call /serve/<workspace>/<service>/<path>")

"""Pages' one mapping from a refused request (DomainError) to HTTP: a styled error page.

A NUL byte in the path or a parameter is refused here, before any view: databases reject it
mid-query (PostgreSQL), which would otherwise surface as a server error."""

from asgiref.sync import async_to_sync, iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone, translation
from django.views.defaults import page_not_found

from portal import notebook_origin, ratelimit
from portal.scim.errors import is_scim_path, scim_error
from portal.selectors import page_language, time_zone_for
from portal.serve_errors import is_serve_path, openai_error
from scheduling.api import DomainError


def _nul_in_request(request) -> str | None:
    """The name of the first part of the request that holds a NUL byte, or None."""
    if "\x00" in request.path:
        return "path"
    # the API and /serve/ read their bodies themselves (/serve/ forwards it as sent): reading POST here would
    # consume a multipart stream before them
    raw_body = request.path.startswith("/api/") or is_serve_path(request.path) or is_scim_path(request.path)
    forms = [request.GET] if raw_body else [request.GET, request.POST]
    for form in forms:
        for key, values in form.lists():
            if "\x00" in key or any("\x00" in v for v in values):
                return key.replace("\x00", "")
    return None


class NotebookHostMiddleware:
    """A request to a notebook's host (NOTEBOOK_ORIGIN) goes to the notebook proxy alone, before any other
    middleware: no portal page, API, static file or metric is ever served there. A request to the portal
    that a notebook's page sent (its Origin) is refused: notebooks may share the portal's site, and
    SameSite cookies alone would let a notebook's script use the portal's session."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    @staticmethod
    def _refused(request) -> HttpResponse | None:
        if notebook_origin.is_notebook_origin(request.headers.get("Origin")):
            return HttpResponse("Refused: a notebook's page may not call the portal.\n", status=403,
                                content_type="text/plain; charset=utf-8")
        return None

    def __call__(self, request):
        if self.is_async:
            return self.__acall__(request)
        from portal.notebook_proxy import notebook_host

        if notebook_origin.parse_host(request.META.get("HTTP_HOST")) is not None:
            return async_to_sync(notebook_host)(request)
        return self._refused(request) or self.get_response(request)

    async def __acall__(self, request):
        from portal.notebook_proxy import notebook_host

        if notebook_origin.parse_host(request.META.get("HTTP_HOST")) is not None:
            return await notebook_host(request)
        return self._refused(request) or await self.get_response(request)


class DomainErrorMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if (name := _nul_in_request(request)) is not None:
            error = DomainError("must not contain a NUL character", field=name)
            if request.path.startswith("/api/"):
                from portal.api.errors import problem_response

                return problem_response(error)
            if is_scim_path(request.path):
                return scim_error(400, f"{name} must not contain a NUL character", "invalidValue")
            return self.process_exception(request, error)
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, DomainError):
            return None
        return render(request, "error.html", {"error": exception, "errors": exception.to_dicts()},
                      status=exception.status)


class RateLimitMiddleware:
    """429 with Retry-After for too many sign-in posts (per client address, both sign-in forms), API
    requests (per token digest, else per signed-in user), `gpuctl login`'s device endpoints and the /device/
    page's posts (per client address), node-agent requests (per node token), /serve/ calls (per caller and
    service) and SCIM calls (per token, else per address). Rates in settings.RATE_LIMITS. After
    authentication: a signed-in user is counted by id."""

    SIGN_IN_PATHS = ("login", "admin:login")
    DEVICE_API = "/api/v1/auth/device/"  # gpuctl login's start and polls

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if rule := self.rule(request):
            scope, ident = rule
            rate = settings.RATE_LIMITS.get(scope)  # a scope left out of the setting is not limited
            if rate and (wait := ratelimit.hit(scope, ident, rate)) is not None:
                return self.refused(request, wait)
        return self.get_response(request)

    @staticmethod
    def refused(request, wait: int) -> HttpResponse:
        path = request.path_info
        if path.startswith("/api/"):  # the API answers problem details, as documented
            from portal.api.errors import TooManyRequests, problem_response

            response = problem_response(TooManyRequests(f"retry in {wait} s"))
        elif is_serve_path(path):
            response = openai_error(429, f"Too many requests to this service; retry in {wait} s.")
        elif is_scim_path(path):
            response = scim_error(429, f"too many requests; retry in {wait} s")
        else:
            response = HttpResponse(f"Too many requests; retry in {wait} s.\n", status=429,
                                    content_type="text/plain")
        response["Retry-After"] = str(wait)
        return response

    @classmethod
    def rule(cls, request) -> tuple[str, str] | None:
        path = request.path_info
        if request.method == "POST" and path in {reverse(name) for name in cls.SIGN_IN_PATHS}:
            return "login", ratelimit.client_address(request)
        if is_scim_path(path):  # only a SCIM token opens it: a session is never counted here
            token = ratelimit.token_identity(request.META)
            if token in (None, "malformed"):
                return "scim", "address:" + ratelimit.client_address(request)
            return "scim", token
        if path.startswith(cls.DEVICE_API) or (request.method == "POST" and path == reverse("device")):
            return "device", ratelimit.client_address(request)  # no credential yet: by address (codes are guessed)
        if not (path.startswith("/api/") or is_serve_path(path)):
            return None
        token = ratelimit.token_identity(request.META)
        if token == "malformed":  # refused by authentication; counted by address, not by spelling
            token = "malformed:" + ratelimit.client_address(request)
        if path.startswith("/api/v1/agent/"):
            return "agent", token or "address:" + ratelimit.client_address(request)
        if is_serve_path(path):
            service = "/".join(path.split("/")[2:4])  # /serve/<workspace>/<name>/...
            return "serve", f"{token or 'address:' + ratelimit.client_address(request)}@{service}"
        if token:
            return "api_token", token
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            return "api_token", f"user:{user.pk}"
        return None


class TimeZoneMiddleware:
    """Pages (templates, forms, the admin) show times in the signed-in user's zone, else the
    platform's. The API keeps the platform's zone, whoever asks, so its times never depend on who
    is signed in. The zone is set for this request only: nothing carries over to the next one."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        with timezone.override(self.zone_for(request)):  # None: the platform's zone
            return self.get_response(request)

    @staticmethod
    def zone_for(request) -> str | None:
        if request.path_info.startswith("/api/") or not request.user.is_authenticated:
            return None
        return time_zone_for(request.user)


class UserLanguageMiddleware:
    """A signed-in user's chosen language wins over the cookie and Accept-Language that
    LocaleMiddleware read. The API answers by Accept-Language only, whoever asks."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path_info.startswith("/api/") or not request.user.is_authenticated:
            return self.get_response(request)
        if not (language := page_language(request.user)):
            return self.get_response(request)
        with translation.override(language):
            request.LANGUAGE_CODE = translation.get_language()
            response = self.get_response(request)
            response.headers.setdefault("Content-Language", request.LANGUAGE_CODE)
            return response


class StyledNotFoundMiddleware:
    """The styled 404 page under DEBUG too (make run): Django would answer a missing page with its
    technical page there. Only 404s that Django makes (no URL matched, or a view raised Http404) are
    replaced; a 404 a view answers itself (the API's problem details) is left as it is. 403 needs no
    help: PermissionDenied renders templates/403.html whatever DEBUG says."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if settings.DEBUG and response.status_code == 404 and request.resolver_match is None:
            return page_not_found(request, Http404())  # no URL matched
        return response

    def process_exception(self, request, exception):
        if settings.DEBUG and isinstance(exception, Http404):
            return page_not_found(request, exception)
        return None

"""The API's one mapping from errors to HTTP: RFC 9457 problem details (application/problem+json).

Every error body has type, title, status and detail, plus `errors`: one entry per message with the
field it belongs to (and a line and column for spec errors), the shape gpuctl reads."""

from __future__ import annotations

import re
from http import HTTPStatus

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, JsonResponse
from django.utils.translation import gettext, gettext_noop
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from scheduling.api import DomainError

PROBLEM_JSON = "application/problem+json"


def problem_type(name: str) -> str:
    """A stable identifier per kind of problem, e.g. urn:gpu-platform:problem:spec-error."""
    return "urn:gpu-platform:problem:" + re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


# Titles of the platform's errors, in the catalogue so title (and a detail that is only the title)
# reads in the request's language (Accept-Language). type and the errors' field stay as they are.
KNOWN_TITLES = [
    gettext_noop("The request was refused"), gettext_noop("Not allowed"),
    gettext_noop("Conflicts with the current state"), gettext_noop("Not found"),
    gettext_noop("The spec is not valid"), gettext_noop("No pool can run the spec"),
    gettext_noop("The job could never run on this cluster"),
    gettext_noop("Billed records cannot be changed"), gettext_noop("Request body too large"),
    gettext_noop("Too many requests"), gettext_noop("Invalid request"),
    gettext_noop("Service unavailable"), gettext_noop("Server error"),
    gettext_noop("Method not allowed"), gettext_noop("Unsupported media type"),
]
# DRF exceptions whose default detail is a template ('Method "{method}" not allowed.'): a title of their own.
# Any other template falls back to the status's phrase.
DRF_TITLES = {
    exceptions.MethodNotAllowed: "Method not allowed",
    exceptions.UnsupportedMediaType: "Unsupported media type",
    exceptions.Throttled: "Too many requests",
}


def _drf_title(exc: exceptions.APIException, status: int) -> str:
    if isinstance(exc, exceptions.ValidationError):
        return "Invalid request"
    for kind, title in DRF_TITLES.items():
        if isinstance(exc, kind):
            return title
    title = str(exc.default_detail)
    return HTTPStatus(status).phrase if "{" in title else title


def _localized(text: str) -> str:
    """text in the active language when the catalogue has it, else as it is."""
    return gettext(text) if text else text


def problem(status: int, title: str, detail: str, errors: list[dict], kind: str) -> Response:
    body = {"type": problem_type(kind), "title": _localized(title), "status": status,
            "detail": _localized(detail), "errors": errors}
    return Response(body, status=status, content_type=PROBLEM_JSON)


def problem_body(exc: DomainError) -> dict:
    """The problem details of a domain error, as a body or as one item's answer in a batch."""
    return {"type": problem_type(type(exc).__name__), "title": _localized(exc.title), "status": exc.status,
            "detail": _localized(str(exc) or exc.title), "errors": exc.to_dicts()}


def problem_response(exc: DomainError) -> JsonResponse:
    """The same body for a request refused before it reaches a DRF view (portal.middleware)."""
    return JsonResponse(problem_body(exc), status=exc.status, content_type=PROBLEM_JSON)


class BodyTooLarge(DomainError):
    status = 413
    title = "Request body too large"


class TooManyRequests(DomainError):
    status = 429
    title = "Too many requests"


def _drf_errors(data, field: str = "") -> list[dict]:
    """DRF's error data (a dict by field, a list, or {"detail": ...}) as one entry per field."""
    if isinstance(data, dict):
        if set(data) == {"detail"}:
            return []
        return [entry for key, value in data.items()
                for entry in _drf_errors(value, "" if key == "non_field_errors" else key)]
    if isinstance(data, list) and all(not isinstance(v, dict | list) for v in data):
        return [{"line": None, "column": None, "field": field, "message": " ".join(str(m) for m in data)}]
    if isinstance(data, list):
        return [entry for value in data for entry in _drf_errors(value, field)]
    return [{"line": None, "column": None, "field": field, "message": str(data)}]


def exception_handler(exc, context):
    if isinstance(exc, RequestDataTooBig):  # DATA_UPLOAD_MAX_MEMORY_SIZE, raised on reading request.data
        exc = BodyTooLarge(f"the body may hold at most {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes")
    if isinstance(exc, DomainError):
        return problem(exc.status, exc.title, str(exc) or exc.title, exc.to_dicts(), type(exc).__name__)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or None)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # not an API error: a server error, left to Django
    errors = _drf_errors(response.data)
    if isinstance(response.data, dict) and "detail" in response.data:
        detail = str(response.data["detail"])
    else:
        detail = "; ".join(f"{e['field']}: {e['message']}" if e["field"] else e["message"] for e in errors)
    title = _drf_title(exc, response.status_code)
    body = problem(response.status_code, title, detail, errors, type(exc).__name__)
    for header in ("WWW-Authenticate", "Retry-After", "Allow"):
        if header in response:
            body[header] = response[header]
    return body


@csrf_exempt  # it changes nothing; a POST must get the same 404, not the CSRF page
def not_found(request, *args, **kwargs) -> JsonResponse:
    """Any /api/v1/ path that names no operation."""
    return problem_response(NotFound(gettext("no API operation at %(path)s") % {"path": request.path}))


class NotFound(DomainError):
    status = 404
    title = "Not found"

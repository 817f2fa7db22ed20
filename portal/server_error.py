"""Django's last resort for an exception nobody handled (handler500).

A database that cannot be reached is the platform being unavailable, not broken: it answers 503
with Retry-After, so agents, gpuctl and browsers come back later. The API answers problem details
like every other API error; pages get the styled error page. Neither touches the database again:
the page is rendered without the request's context (no user, no session)."""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpResponse
from django.template import loader

from portal.api.errors import problem_response
from portal.serve_errors import is_serve_path, openai_error
from scheduling.api import DomainError

RETRY_AFTER_S = 5


class ServiceUnavailable(DomainError):
    status = 503
    title = "Service unavailable"


class ServerError(DomainError):
    status = 500
    title = "Server error"


def _error_for(exception: BaseException | None) -> DomainError:
    if isinstance(exception, OperationalError | InterfaceError):
        return ServiceUnavailable(f"the database cannot be reached just now; retry in {RETRY_AFTER_S} s")
    return ServerError("the server failed to answer this request; it has been logged")


def server_error(request) -> HttpResponse:
    error = _error_for(sys.exc_info()[1])
    if request.path_info.startswith("/api/"):
        response = problem_response(error)
    elif is_serve_path(request.path_info):  # its callers are OpenAI clients
        response = openai_error(error.status, str(error))
    else:
        page = loader.get_template("error.html").render({"error": error, "errors": error.to_dicts()})
        response = HttpResponse(page, status=error.status)
    if error.status == 503:
        response["Retry-After"] = str(RETRY_AFTER_S)
    return response

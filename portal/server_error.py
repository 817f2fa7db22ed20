"""Django's last resort for an exception nobody handled (handler500), and the answers given to a request
refused before it reaches a view (portal.door).

A database or Redis that cannot be reached is the platform being unavailable, not broken: it answers 503
with Retry-After, so agents, gpuctl and browsers come back later, and the database breaker (portal.door)
answers the next requests at once. The API answers problem details like every other API error, `/serve/`
the OpenAI error shape its clients read; pages get the styled error page. None touches the database again:
the page is rendered without the request's context (no user, no session)."""

from __future__ import annotations

import sys

import redis
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse
from django.template import loader
from django.utils.translation import gettext

from portal.api.errors import problem_response
from portal.breaker import database_breaker, means_unreachable
from portal.scim.errors import is_scim_path, scim_error
from portal.serve_errors import is_serve_path, openai_error
from scheduling.api import DomainError

RETRY_AFTER_S = 5


class ServiceUnavailable(DomainError):
    status = 503
    title = "Service unavailable"


class ServerError(DomainError):
    status = 500
    title = "Server error"


def is_database_outage(exception: BaseException | None) -> bool:
    """Django wraps the driver's errors, psycopg_pool's PoolTimeout among them, in these two."""
    return isinstance(exception, OperationalError | InterfaceError)


def _error_for(exception: BaseException | None) -> DomainError:
    if is_database_outage(exception):
        return ServiceUnavailable(f"the database cannot be reached just now; retry in {RETRY_AFTER_S} s")
    if isinstance(exception, redis.ConnectionError | redis.TimeoutError):
        return ServiceUnavailable(f"Redis cannot be reached just now; retry in {RETRY_AFTER_S} s")
    return ServerError("the server failed to answer this request; it has been logged")


def error_answer(path: str, error: DomainError) -> HttpResponse:
    """The answer to a request that failed with `error`, in the form its caller reads."""
    if path.startswith("/api/"):
        response = problem_response(error)
    elif is_serve_path(path):  # its callers are OpenAI clients
        response = openai_error(error.status, gettext(str(error) or error.title))
    elif is_scim_path(path):  # identity providers read SCIM's error shape
        response = scim_error(error.status, str(error) or error.title)
    else:
        page = loader.get_template("error.html").render({"error": error, "errors": error.to_dicts()})
        response = HttpResponse(page, status=error.status)
    if error.status == 503:
        response["Retry-After"] = str(RETRY_AFTER_S)
    return response


def server_error(request) -> HttpResponse:
    exception = sys.exc_info()[1]
    if is_database_outage(exception) and means_unreachable(exception):
        database_breaker.trip()  # the next requests are answered at once
    return error_answer(request.path_info, _error_for(exception))

"""The error answer of `/serve/` in the shape OpenAI clients read: `{"error": {"message", "type", "code"}}`.

Inference endpoints are called by OpenAI SDKs, which look for `error.message` (and raise by status);
every other API of the portal answers RFC 9457 problem details (portal.api.errors)."""

from __future__ import annotations

from django.http import JsonResponse

# OpenAI's error types by status; any other 4xx is an invalid request, any 5xx a server error.
ERROR_TYPES = {
    401: "authentication_error", 403: "permission_error", 404: "not_found_error",
    409: "conflict_error", 429: "rate_limit_error",
}
ERROR_CODES = {
    400: "invalid_request", 401: "invalid_api_key", 403: "permission_denied", 404: "not_found",
    405: "method_not_allowed", 413: "request_too_large", 415: "unsupported_media_type",
    429: "rate_limit_exceeded", 500: "server_error", 502: "bad_gateway", 503: "service_unavailable",
    504: "gateway_timeout",
}


def openai_error(status: int, message: str, *, code: str | None = None,
                 headers: dict[str, str] | None = None) -> JsonResponse:
    """An OpenAI-shaped error answer with `status` (and `headers`, e.g. Retry-After)."""
    kind = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = {"error": {"message": message, "type": kind, "code": code or ERROR_CODES.get(status, str(status))}}
    return JsonResponse(body, status=status, headers=headers)


def is_serve_path(path: str) -> bool:
    """Whether `path` (request.path_info) is an inference endpoint's, answered in this shape."""
    return path.startswith("/serve/")

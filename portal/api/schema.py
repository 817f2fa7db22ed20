"""OpenAPI description of the token authentication (imported by the app config)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "portal.api.authentication.ApiTokenAuthentication"
    name = "ApiToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer",
                "description": "A personal API token (gpt_...) with one scope: read (GET only), submit (read, and "
                               "submit and cancel jobs; quotes and the image form need only read) or manage "
                               "(everything the user may do). A missing scope answers 403 naming it; an expired "
                               "or revoked token answers 401."}


class NodeTokenScheme(OpenApiAuthenticationExtension):
    target_class = "portal.api.agent.NodeTokenAuthentication"
    name = "NodeToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A node agent's token (gpn_...)."}


# What every operation may answer besides its success: the problem details of portal/api/errors.py.
PROBLEM_STATUSES = {
    "400": "The request was refused (invalid parameters or body)",
    "401": "No credentials, or unknown, expired or revoked ones",
    "403": "Not allowed for this caller",
    "404": "Not found, or not visible to this caller",
    "409": "Conflicts with the current state",
    "413": "Request body too large",
    "415": "Request body in a media type the operation does not take",
    "422": "Understood but cannot be processed",
    "429": "Too many requests (see Retry-After)",
}

PROBLEM_DETAIL = {
    "type": "object",
    "description": "RFC 9457 problem details; `errors` holds one entry per message.",
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "errors": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "line": {"type": "integer", "nullable": True},
                "column": {"type": "integer", "nullable": True},
                "field": {"type": "string"},
                "message": {"type": "string"},
            },
            "required": ["field", "message"],
        }},
    },
    "required": ["type", "title", "status", "detail", "errors"],
}


def add_problem_responses(result, generator, request, public):
    """drf-spectacular postprocessing hook: document the problem-details errors on every operation,
    so a client (and the schema checks) know every 4xx the API may answer."""
    result.setdefault("components", {}).setdefault("schemas", {})["ProblemDetail"] = PROBLEM_DETAIL
    ref = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/ProblemDetail"}}}
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            for status, description in PROBLEM_STATUSES.items():
                operation["responses"].setdefault(status, {"description": description, "content": ref})
    return result


def declare_what_is_enforced(result, generator, request, public):
    """drf-spectacular postprocessing hook for what its annotations cannot say: a body given as a plain JSON
    schema with required properties is itself required, and a query parameter whose empty value the server
    takes as unset says so (`allowEmptyValue`; drf-spectacular passes on only x- extensions)."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict):
                continue
            for parameter in operation.get("parameters", []):
                if parameter.pop("x-allow-empty", False):
                    parameter["allowEmptyValue"] = True
            body = operation.get("requestBody")
            if body and any(media.get("schema", {}).get("required") for media in body.get("content", {}).values()):
                body["required"] = True
    return result

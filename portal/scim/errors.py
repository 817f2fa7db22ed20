"""SCIM's error shape (RFC 7644 §3.12), for every answer under /scim/: the views' own, and those the
portal gives before a view runs (rate limit, body limit, database down, server error)."""

from __future__ import annotations

import json

from django.http import HttpResponse
from django_scim.constants import SCIM_CONTENT_TYPE, SchemaURI

PREFIX = "/scim/"


def is_scim_path(path: str) -> bool:
    return path.startswith(PREFIX)


def scim_error(status: int, detail: str, scim_type: str | None = None) -> HttpResponse:
    body = {"schemas": [SchemaURI.ERROR], "status": str(status), "detail": detail}
    if scim_type:
        body["scimType"] = scim_type
    return HttpResponse(json.dumps(body), status=status, content_type=SCIM_CONTENT_TYPE)

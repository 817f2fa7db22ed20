"""The one error type for a request the platform refuses. Pure Python, so every layer may raise it.

HTTP mapping lives in one place per surface: portal.api.errors (API, problem details) and
portal.middleware (pages, a styled error page)."""

from __future__ import annotations

from collections.abc import Mapping


class DomainError(ValueError):
    """Messages by field ("" for the request as a whole). Nothing was changed."""

    status = 400
    title = "The request was refused"
    field = ""  # where a bare message belongs

    def __init__(self, errors: Mapping[str, list[str] | str] | str, *, field: str | None = None):
        if isinstance(errors, str):
            errors = {self.field if field is None else field: errors}
        self.errors = {k: [v] if isinstance(v, str) else list(v) for k, v in errors.items()}
        super().__init__("; ".join(f"{k}: {m}" if k else m for k, ms in self.errors.items() for m in ms))

    def to_dicts(self) -> list[dict[str, int | str | None]]:
        """Per field, in the shape of spec errors (line and column are None)."""
        return [{"line": None, "column": None, "field": f, "message": m} for f, ms in self.errors.items() for m in ms]


class Forbidden(DomainError):
    status = 403
    title = "Not allowed"


class Conflict(DomainError):
    """The request is sound but the current state refuses it (e.g. cancelling a finished job)."""

    status = 409
    title = "Conflicts with the current state"


class Unprocessable(DomainError):
    """Each part is well-formed, but together they say something that cannot be done (e.g. one GPU reported
    twice): what no schema of the request's parts can state, so 422 rather than 400."""

    status = 422

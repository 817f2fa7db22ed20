"""Notebooks on their own origin: one host per notebook (`NOTEBOOK_ORIGIN`, e.g. `https://{id}.nb.example.org`),
never the portal's, so that what a notebook serves (a member's HTML and JavaScript in an output) cannot use
the portal's session.

The portal hands the browser a short-lived signed ticket (bound to the user, the notebook and its port;
`NOTEBOOK_TICKET_SECONDS`), which the notebook's host exchanges once for a cookie of its own, scoped to
that host alone. Every request on the host reads that cookie and checks again that its user may still
open the notebook. The template's `{id}` is the leftmost label of the host: the notebook's id for its
own server (port 8888), `<id>-<port>` for another web server of the same job: `<id>-6006` is the job's
TensorBoard (any job whose spec asks for one), served at the host's root.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured

from scheduling.api import base_url, clock

NOTEBOOK_PORT = 8888  # the notebook's own server (Jupyter's port); the host label is then the id alone
TICKET_PATH = "/_ticket"
COOKIE_NAME = "notebook_session"
_TICKET_SALT = "portal.notebook_origin.ticket"
_COOKIE_SALT = "portal.notebook_origin.cookie"
_LABEL = re.compile(r"^(?P<job>[1-9][0-9]{0,17})(?:-(?P<port>[1-9][0-9]{0,4}))?$")


class TicketRefused(Exception):
    """A ticket that opens nothing: forged, for another notebook, expired or already used."""


@dataclass(frozen=True)
class Origin:
    scheme: str
    suffix: str  # the host after "{id}", with its leading dot: ".nb.example.org"
    port: int | None

    @property
    def secure(self) -> bool:
        return self.scheme == "https"


@lru_cache(maxsize=4)
def _parse(template: str) -> Origin:
    parts = urlsplit(template)
    host = parts.netloc.rsplit(":", 1)[0] if parts.port else parts.netloc
    if parts.scheme not in ("http", "https") or not host.startswith("{id}.") or host.count("{") != 1 \
            or parts.path not in ("", "/") or parts.query or parts.fragment or len(host) <= len("{id}."):
        raise ImproperlyConfigured(
            f"NOTEBOOK_ORIGIN must look like https://{{id}}.nb.example.org[:port], not {template!r}")
    return Origin(scheme=parts.scheme, suffix=host[len("{id}"):].lower(), port=parts.port)


def origin() -> Origin:
    return _parse(settings.NOTEBOOK_ORIGIN)


def label(job_id: int, port: int = NOTEBOOK_PORT) -> str:
    return str(job_id) if port == NOTEBOOK_PORT else f"{job_id}-{port}"


def origin_of(job_id: int, port: int = NOTEBOOK_PORT) -> str:
    """`http://7.nb.localhost:8001`: where the notebook's pages are served."""
    return settings.NOTEBOOK_ORIGIN.rstrip("/").replace("{id}", label(job_id, port))


def header(scope, name: bytes) -> str | None:
    """An ASGI scope's header `name` (lower case), or None."""
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def on_notebook_host(scope) -> bool:
    """Whether an ASGI request or websocket is addressed to a notebook's host rather than the portal."""
    return parse_host(header(scope, b"host")) is not None


def parse_host(host: str | None) -> tuple[int, int] | None:
    """(job id, port) that a Host header names on the notebook origin; None for any other host (the
    portal's). The port of the Host header must be the origin's own."""
    if not host:
        return None
    o = origin()
    host = host.lower()
    name, _, port = host.rpartition(":") if not host.endswith("]") and ":" in host else (host, "", "")
    default = 443 if o.secure else 80
    if (int(port) if port.isdigit() else None if port else default) != (o.port or default):
        return None
    if not name.endswith(o.suffix):
        return None
    found = _LABEL.match(name[: -len(o.suffix)])
    if found is None:
        return None
    return int(found["job"]), int(found["port"] or NOTEBOOK_PORT)


def is_notebook_origin(value: str | None) -> bool:
    """Whether an Origin header is a page of some notebook (never to be trusted by the portal)."""
    if not value:
        return False
    parts = urlsplit(value)
    return parts.scheme == origin().scheme and parse_host(parts.netloc) is not None


def _now() -> float:
    return clock.now().timestamp()


def issue_ticket(user, job_id: int, port: int = NOTEBOOK_PORT) -> str:
    return signing.dumps({"u": user.pk, "j": job_id, "p": port, "n": secrets.token_urlsafe(16), "t": _now()},
                         salt=_TICKET_SALT, compress=False)


def ticket_url(user, job, path: str = "", query: str = "", port: int = NOTEBOOK_PORT) -> str:
    """Where the portal sends a member who opens the notebook (or another server of the job, by `port`):
    its host's ticket exchange, which then goes on to `path` (the notebook's own base path unless given)
    and `query`."""
    next_ = (path or base_url(job.workspace.slug, job.name)) + (f"?{query}" if query else "")
    params = urlencode({"ticket": issue_ticket(user, job.pk, port), "next": next_})
    return f"{origin_of(job.pk, port)}{TICKET_PATH}?{params}"


def redeem_ticket(ticket: str, job_id: int, port: int) -> int:
    """The user id a ticket was issued to, for this notebook and port only, within its lifetime, once."""
    try:
        data = signing.loads(ticket, salt=_TICKET_SALT)
    except signing.BadSignature:
        raise TicketRefused("not a ticket") from None
    if not isinstance(data, dict) or data.get("j") != job_id or data.get("p") != port:
        raise TicketRefused("a ticket for another notebook")
    age = _now() - float(data.get("t", 0))
    if not -5 <= age <= settings.NOTEBOOK_TICKET_SECONDS:
        raise TicketRefused("an expired ticket")
    if not cache.add(f"notebook-ticket:{data['n']}", 1, timeout=settings.NOTEBOOK_TICKET_SECONDS + 60):
        raise TicketRefused("a ticket already used")
    return int(data["u"])


def session_cookie(user, job_id: int, port: int) -> str:
    """The value of the notebook host's own cookie (signed; its user's password change ends it)."""
    return signing.dumps({"u": user.pk, "j": job_id, "p": port, "h": user.get_session_auth_hash(),
                          "t": _now()}, salt=_COOKIE_SALT, compress=False)


def user_of_cookie(value: str | None, job_id: int, port: int):
    """The active user a notebook host's cookie names for this notebook and port; None otherwise."""
    if not value:
        return None
    try:
        data = signing.loads(value, salt=_COOKIE_SALT)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or data.get("j") != job_id or data.get("p") != port:
        return None
    if not 0 <= _now() - float(data.get("t", 0)) <= settings.NOTEBOOK_SESSION_SECONDS:
        return None
    user = get_user_model().objects.filter(pk=data.get("u"), is_active=True).first()
    if user is None or not secrets.compare_digest(user.get_session_auth_hash(), str(data.get("h", ""))):
        return None
    return user


def check_cookie_domains() -> None:
    """The portal's cookies stay host-only: a parent domain would send its session to every notebook."""
    for name in ("SESSION_COOKIE_DOMAIN", "CSRF_COOKIE_DOMAIN", "LANGUAGE_COOKIE_DOMAIN"):
        if getattr(settings, name, None):
            raise ImproperlyConfigured(f"{name} must stay unset: the portal's cookies are host-only, "
                                       "so that notebook hosts never receive them")

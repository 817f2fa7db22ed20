"""Each user's signed-in sessions: a `UserSession` row per browser session, so a user can see theirs and
end one, and an operator can end all of a user's.

The session's data stay in the session store (SESSION_ENGINE); the row is written at sign-in
(`user_logged_in`), its last_seen touched by `SessionSeenMiddleware` at most once a minute (the time of
the last touch is kept in the session, so other requests read and write nothing more), and it goes at
sign-out or when the session is ended here. Ending a session deletes it from the store: its next request
is anonymous. A session whose store entry has gone, or that has not been seen for longer than a session
lives (SESSION_COOKIE_AGE: it has expired), is dropped when the list is read.
"""

from __future__ import annotations

from datetime import timedelta
from importlib import import_module

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext

from portal.models import UserSession
from portal.ratelimit import client_address
from scheduling.api import clock

TOUCH_EVERY_S = 60
SEEN_KEY = "_portal_seen"  # the session's own note of its last touch (epoch seconds)
USER_AGENT_CHARS = 400

# Checked in order: Edge and Opera also say Chrome, Chrome also says Safari, Android also says Linux.
BROWSERS = (("Edg/", "Edge"), ("OPR/", "Opera"), ("Firefox/", "Firefox"), ("Chrome/", "Chrome"),
            ("CriOS/", "Chrome"), ("Safari/", "Safari"), ("curl/", "curl"))
SYSTEMS = (("Android", "Android"), ("iPhone", "iOS"), ("iPad", "iOS"), ("CrOS", "ChromeOS"),
           ("Windows", "Windows"), ("Mac OS X", "macOS"), ("Macintosh", "macOS"), ("Linux", "Linux"))


def _store(session_key: str | None = None):
    return import_module(settings.SESSION_ENGINE).SessionStore(session_key)


def device(user_agent: str) -> str:
    """A short name for the browser and system a User-Agent names, e.g. "Firefox on Linux"."""
    ua = user_agent or ""
    browser = next((name for token, name in BROWSERS if token in ua), None)
    system = next((name for token, name in SYSTEMS if token in ua), None)
    if browser and system:
        return gettext("%(browser)s on %(system)s") % {"browser": browser, "system": system}
    return browser or system or gettext("Unknown device")


def on_logged_in(sender, request=None, user=None, **kwargs) -> None:
    """Index the new session (login() has just given it its key)."""
    if request is None or user is None or not hasattr(request, "session"):
        return
    if request.session.session_key is None:
        request.session.save()
    now = clock.now()
    UserSession.objects.update_or_create(session_key=request.session.session_key, defaults={
        "user": user, "ip": client_address(request)[:45], "created": now, "last_seen": now,
        "user_agent": request.META.get("HTTP_USER_AGENT", "")[:USER_AGENT_CHARS]})
    request.session[SEEN_KEY] = int(now.timestamp())


def on_logged_out(sender, request=None, user=None, **kwargs) -> None:
    """logout() flushes the session after this signal: its row goes with it."""
    if request is not None and hasattr(request, "session") and request.session.session_key:
        UserSession.objects.filter(session_key=request.session.session_key).delete()


def touch(request) -> bool:
    """Note that this session is in use, at most once every TOUCH_EVERY_S: True when it wrote."""
    session = request.session
    now = clock.now()
    seen = session.get(SEEN_KEY)
    if isinstance(seen, int) and 0 <= now.timestamp() - seen < TOUCH_EVERY_S:
        return False
    key = session.session_key
    if key is None:
        return False
    if not UserSession.objects.filter(session_key=key).update(last_seen=now):
        # a session signed in before the index existed
        UserSession.objects.get_or_create(session_key=key, defaults={
            "user": request.user, "ip": client_address(request)[:45], "created": now, "last_seen": now,
            "user_agent": request.META.get("HTTP_USER_AGENT", "")[:USER_AGENT_CHARS]})
    session[SEEN_KEY] = int(now.timestamp())
    return True


class SessionSeenMiddleware:
    """After authentication: touch the signed-in user's session row (throttled, see `touch`)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated and hasattr(request, "session"):
            touch(request)
        return self.get_response(request)


def sessions_of(user) -> list[UserSession]:
    """The user's live sessions, the latest seen first. Dropped: rows whose session has left the store, and
    rows unseen for longer than a session lives (its store entry expired, not yet cleared)."""
    rows = list(UserSession.objects.filter(user=user))
    store = _store()
    expired = clock.now() - timedelta(seconds=settings.SESSION_COOKIE_AGE + TOUCH_EVERY_S)
    gone = [row.pk for row in rows if row.last_seen < expired or not store.exists(row.session_key)]
    if gone:
        UserSession.objects.filter(pk__in=gone).delete()
    return [row for row in rows if row.pk not in gone]


def end(row: UserSession) -> None:
    """End one session: out of the store (its next request is anonymous) and out of the index."""
    _store(row.session_key).delete()
    row.delete()


@transaction.atomic
def end_all(user) -> int:
    """End every session of the user; how many there were."""
    rows = list(UserSession.objects.select_for_update().filter(user=user))
    for row in rows:
        end(row)
    return len(rows)


"""Quiet logs: one line per request at INFO, what repeats on a timer at DEBUG.

- `RequestLogMiddleware` writes the one line per HTTP request (`portal.requests`): method, path, status,
  duration, and (by `RequestContext`, as on every line) the request id and user id. It gives every request an id (the caller's `X-Request-ID` when it is
  sane, else a new one), echoes it in the response's `X-Request-ID`, and `RequestContext` adds it (and the
  user id) to every record logged during the request; Celery tasks sent from it carry it. Node agents' calls, page polling, health checks, scrapes and static files are DEBUG. The web
  server's own access log is off (`portal.run.web_command`), so nothing is logged twice.
- `Routine` demotes to DEBUG what Celery says about the beat's own tasks every few seconds (sent, received,
  succeeded) and what uvicorn says when a websocket opens and closes; failures keep their level.
- `Repeats` lets through one of each repeated record a minute, with a count of those dropped: the channel
  layer's receive task logs a traceback a second while Redis is away.
- `logging_config` is the LOGGING setting that wires them: every process (web, worker, beat, manage.py)
  logs through one handler and one format.
"""

from __future__ import annotations

import contextvars
import logging
import re
import time
import uuid

REQUESTS = logging.getLogger("portal.requests")

REQUEST_ID_HEADER = "X-Request-ID"
# What a caller's id may be: short, printable, no spaces (it goes into log lines and a response header).
SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,127}")
# The request being served in this context, and its id (Celery tasks have the id of the request that sent them).
current_request: contextvars.ContextVar = contextvars.ContextVar("current_request", default=None)
current_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("current_request_id", default="")


def request_id_of(header: str | None) -> str:
    """The caller's id when it is sane, else a new one."""
    if header and SANE_REQUEST_ID.fullmatch(header):
        return header
    return uuid.uuid4().hex


def user_id_of(request, *, load: bool) -> str:
    """The signed-in user's id, or "-". Without `load` only a user the request has already read (no query
    from inside a log call)."""
    if request is None:
        return "-"
    if load:
        user = getattr(request, "user", None)
    else:
        user = getattr(request, "_cached_user", None)
    return str(user.pk) if user is not None and getattr(user, "is_authenticated", False) else "-"

# Requests that repeat on a timer or come from machines: DEBUG, not INFO.
ROUTINE_PATHS = re.compile(
    r"^/(?:api/v1/agent/|healthz$|readyz$|metrics$|favicon\.ico$|static/)"  # node agents, probes, scrapes, files
    r"|/jobs/\d+/log/$"  # a running job's log, polled by its page
    r"|^/reports/exports/[0-9a-f-]+/$"  # an Excel export's progress, polled by the reports page
)


# a notebook's one-use ticket (portal/notebook_origin.py); an OIDC provider's authorization code; a device
# login's user code
SECRET_PARAMS = re.compile(r"([?&](?:ticket|code|user_code)=)[^&]*")
# a password reset link's key; an invitation's token (portal/invitations.py)
SECRET_PATHS = re.compile(r"(/password/reset/key/[0-9A-Za-z]+-|^/invitations/)[^/?]+")


def logged_path(request) -> str:
    """The path and query as logged: secrets in the query and path are left out."""
    path = SECRET_PATHS.sub(r"\1[redacted]", request.get_full_path())
    return SECRET_PARAMS.sub(r"\1[redacted]", path)[:300]


def is_routine(request) -> bool:
    return bool(ROUTINE_PATHS.search(request.path_info)) or (
        request.method == "GET" and "partial" in request.GET)  # live pages re-reading a fragment


class RequestLogMiddleware:
    """Outermost: the request's id, then one line per request after the response is made (streams: when
    they start)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        request.request_id = request_id_of(request.headers.get(REQUEST_ID_HEADER))
        tokens = current_request_id.set(request.request_id), current_request.set(request)
        try:
            response = self.get_response(request)
            response[REQUEST_ID_HEADER] = request.request_id
            level = logging.DEBUG if is_routine(request) else logging.INFO
            if REQUESTS.isEnabledFor(level):
                user_id_of(request, load=True)   # read now, so that RequestContext puts it on the line
                REQUESTS.log(level, "%s %s %d %.0f ms", request.method, logged_path(request),
                             response.status_code, (time.perf_counter() - started) * 1000)
            return response
        finally:
            current_request.reset(tokens[1])
            current_request_id.reset(tokens[0])


class RequestContext(logging.Filter):
    """On the handler: every record gets `context`, " [request ID user ID]" while a request (or a Celery task
    it sent) is being served, else empty."""

    def filter(self, record: logging.LogRecord) -> bool:
        request_id = current_request_id.get()
        if request_id:
            record.context = f" [request {request_id} user {user_id_of(current_request.get(), load=False)}]"
        else:
            record.context = ""
        return True


def _carry_request_id(headers=None, **_):
    """before_task_publish: a task sent while serving a request carries the request's id."""
    request_id = current_request_id.get()
    if request_id and headers is not None:
        headers.setdefault("request_id", request_id)


_task_tokens: dict[str, contextvars.Token] = {}


def _adopt_request_id(task_id=None, task=None, **_):
    request = getattr(task, "request", None)
    # a worker makes the message's headers attributes of the request; an eager run keeps them in `headers`
    request_id = getattr(request, "request_id", None) or (getattr(request, "headers", None) or {}).get("request_id")
    if request_id and task_id:
        _task_tokens[task_id] = current_request_id.set(request_id_of(str(request_id)))


def _drop_request_id(task_id=None, **_):
    token = _task_tokens.pop(task_id, None)
    if token is not None:
        current_request_id.reset(token)


def connect_celery_signals() -> None:
    from celery import signals

    signals.before_task_publish.connect(_carry_request_id, dispatch_uid="logs-request-id-out", weak=False)
    signals.task_prerun.connect(_adopt_request_id, dispatch_uid="logs-request-id-in", weak=False)
    signals.task_postrun.connect(_drop_request_id, dispatch_uid="logs-request-id-done", weak=False)


def beat_task_names() -> set[str]:
    from django.conf import settings

    return {entry["task"] for entry in getattr(settings, "CELERY_BEAT_SCHEDULE", {}).values()}


class Routine(logging.Filter):
    """On a logger: its INFO records about routine work become DEBUG (dropped unless DEBUG is on).

    `celery`: records naming a task of the beat schedule ("Sending due task", "received", "succeeded");
    `websocket`: uvicorn's "connection open" and "connection closed" (the handshake line stays INFO)."""

    WEBSOCKET = ("connection open", "connection closed")

    def __init__(self, kind: str = "celery"):
        super().__init__()
        self.kind = kind
        self._tasks: set[str] | None = None

    def routine(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self.kind == "websocket":
            return message in self.WEBSOCKET
        if self._tasks is None:
            self._tasks = beat_task_names()
        return any(task in message for task in self._tasks)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or not self.routine(record):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


class Repeats(logging.Filter):
    """On a logger: a record like one let through within `window_s` (the same message, the same exception
    class) is dropped and counted; the next one let through after that says how many were."""

    KEEP = 256  # records remembered before those with nothing to tell are forgotten

    def __init__(self, window_s: float = 60.0):
        super().__init__()
        self.window_s = window_s
        self.now = time.monotonic   # a seam for tests: a log filter's window, not the platform's clock
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}  # -> (let through at, dropped since)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record that cannot be formatted is the handler's to report
            return True
        error = record.exc_info[0] if record.exc_info and record.exc_info[0] else None
        key = (message, f"{error.__module__}.{error.__qualname__}" if error else "")
        now = self.now()
        seen = self._seen.get(key)
        if seen is not None and now - seen[0] < self.window_s:
            self._seen[key] = (seen[0], seen[1] + 1)
            return False
        if seen is not None and seen[1]:
            record.msg = f"{message} ({seen[1]} more like it in the {self.window_s:.0f} s after the last one logged)"
            record.args = None
        if len(self._seen) >= self.KEEP:
            self._seen = {k: v for k, v in self._seen.items() if v[1] or now - v[0] < self.window_s}
        self._seen[key] = (now, 0)
        return True


def logging_config(level: str = "INFO") -> dict:
    """The LOGGING setting: one plain format on stderr for every process."""
    routine = {"()": "portal.logs.Routine", "kind": "celery"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s%(context)s: %(message)s"}},
        "filters": {"routine_tasks": routine, "routine_websockets": {"()": "portal.logs.Routine",
                                                                     "kind": "websocket"},
                    "request_context": {"()": "portal.logs.RequestContext"},
                    "repeats": {"()": "portal.logs.Repeats"}},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain",
                                 "filters": ["request_context"]}},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "httpx": {"level": "WARNING"},  # a line per call (portal.wait, the Kubernetes client...)
            # 4xx are in the request line already; 5xx keep their traceback (ERROR)
            "django.request": {"level": "ERROR"},
            "celery.beat": {"filters": ["routine_tasks"]},
            "celery.worker.strategy": {"filters": ["routine_tasks"]},
            "celery.app.trace": {"filters": ["routine_tasks"]},
            # uvicorn: its lines in our format; its access log is replaced by portal.requests
            "uvicorn": {"handlers": ["console"], "level": level, "propagate": False},
            "uvicorn.error": {"filters": ["routine_websockets"]},
            "uvicorn.access": {"level": "WARNING"},
            # its receive task logs a traceback a second while Redis is away, until the live watch resets it
            "channels_redis.pubsub": {"filters": ["repeats"]},
        },
    }

"""Quiet logs: one line per request at INFO, what repeats on a timer at DEBUG.

- `RequestLogMiddleware` writes the one line per HTTP request (`portal.requests`): method, path, status,
  duration. Node agents' calls, page polling, health checks, scrapes and static files are DEBUG. The web
  server's own access log is off (`portal.run.web_command`), so nothing is logged twice.
- `Routine` demotes to DEBUG what Celery says about the beat's own tasks every few seconds (sent, received,
  succeeded) and what uvicorn says when a websocket opens and closes; failures keep their level.
- `logging_config` is the LOGGING setting that wires them: every process (web, worker, beat, manage.py)
  logs through one handler and one format.
"""

from __future__ import annotations

import logging
import re
import time

REQUESTS = logging.getLogger("portal.requests")

# Requests that repeat on a timer or come from machines: DEBUG, not INFO.
ROUTINE_PATHS = re.compile(
    r"^/(?:api/v1/agent/|healthz$|readyz$|metrics$|favicon\.ico$|static/)"  # node agents, probes, scrapes, files
    r"|/jobs/\d+/log/$"  # a running job's log, polled by its page
    r"|^/reports/exports/[0-9a-f-]+/$"  # an Excel export's progress, polled by the reports page
)


def is_routine(request) -> bool:
    return bool(ROUTINE_PATHS.search(request.path_info)) or (
        request.method == "GET" and "partial" in request.GET)  # live pages re-reading a fragment


class RequestLogMiddleware:
    """Outermost: one line per request, after the response is made (streams: when they start)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        level = logging.DEBUG if is_routine(request) else logging.INFO
        if REQUESTS.isEnabledFor(level):
            REQUESTS.log(level, "%s %s %d %.0f ms", request.method, request.get_full_path()[:300],
                         response.status_code, (time.perf_counter() - started) * 1000)
        return response


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


def logging_config(level: str = "INFO") -> dict:
    """The LOGGING setting: one plain format on stderr for every process."""
    routine = {"()": "portal.logs.Routine", "kind": "celery"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
        "filters": {"routine_tasks": routine, "routine_websockets": {"()": "portal.logs.Routine",
                                                                     "kind": "websocket"}},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "axes": {"level": "WARNING"},
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
        },
    }

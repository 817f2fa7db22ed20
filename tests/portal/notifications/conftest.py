"""Fixtures for the notification tests: a real HTTP server that receives webhooks, Celery tasks run
in this process (the real task code, without a worker), and a fast simulated cluster."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass
class Received:
    path: str
    headers: dict
    body: bytes

    @property
    def json(self) -> dict:
        return json.loads(self.body)


@dataclass
class WebhookReceiver:
    """Answers each POST with the next status of `statuses` (the last one repeats) and records it."""

    url: str
    statuses: list[int] = field(default_factory=lambda: [200])
    received: list[Received] = field(default_factory=list)

    def next_status(self) -> int:
        return self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]


@pytest.fixture
def local_receivers_allowed(settings):
    """The operator's allow-list names this machine: how a receiver on 127.0.0.1 gets deliveries."""
    settings.WEBHOOK_ALLOW_PRIVATE_CIDRS = ["127.0.0.1/32"]


@pytest.fixture
def webhook_receiver(local_receivers_allowed, receiving_server):
    """A receiver on 127.0.0.1 that the operator allowed."""
    return receiving_server


@pytest.fixture
def receiving_server():
    """A receiver on 127.0.0.1, on no allow-list: whatever it receives was sent to an inside address."""
    state: dict = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            receiver = state["receiver"]
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            receiver.received.append(Received(self.path, dict(self.headers.items()), body))
            self.send_response(receiver.next_status())
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state["receiver"] = WebhookReceiver(url=f"http://127.0.0.1:{server.server_address[1]}/hooks/gpu")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state["receiver"]
    server.shutdown()
    server.server_close()


@pytest.fixture
def closed_port_url(local_receivers_allowed):
    """A URL nothing listens on: a refused connection."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


@pytest.fixture
def eager_tasks(monkeypatch):
    """Celery tasks run here, when sent by name (their retries at once): the real tasks, no worker."""
    from portal.celery import app
    from portal.notifications import tasks  # noqa: F401 - registers the tasks sent by name

    monkeypatch.setattr(app.conf, "task_always_eager", True)
    monkeypatch.setattr(app.conf, "task_eager_propagates", False)  # True would raise a task's Retry, not retry
    monkeypatch.setattr(app, "send_task", lambda name, args=(), **options: app.tasks[name].apply(args=args))


@pytest.fixture
def backend(clock):
    from scheduling.backends.simulated.backend import SimulatedBackend

    return SimulatedBackend(speedup=3600, failure_rate=0, clock=clock)  # a 1 h job runs 1 s


@pytest.fixture
def failing_backend(clock):
    from scheduling.backends.simulated.backend import SimulatedBackend

    return SimulatedBackend(speedup=3600, failure_rate=1, clock=clock)

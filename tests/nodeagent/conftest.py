"""A fake portal over real HTTP (stdlib ThreadingHTTPServer on 127.0.0.1) for the node agent tests."""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

TOKEN = "node-token-1"


class FakePortal:
    """Stores samples once by id, like the real portal; can be made to fail in the ways that matter."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.token = TOKEN
        self.samples: dict[str, dict] = {}
        self.times_received: Counter[str] = Counter()  # id -> how many posts carried it
        self.batch_sizes: list[int] = []
        self.heartbeats: list[dict] = []
        self.posts: list[str] = []  # the paths POSTed to, in the order they came
        self.assignments: list[dict] = []
        self.status = 200  # answer every request with this status when it is not 200
        self.reject: dict[str, str] = {}  # id -> reason
        self.unanswered: set[str] = set()  # ids left out of both lists (and not stored)
        self.lose_answers = 0  # store the next N batches, then drop the connection without answering
        self.max_batch: int | None = None  # larger batches get 413
        self.echo_rejected_ids = True  # False: rejected entries name the sample by index only
        self.port = 0
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler_for(self))
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def take_usage(self, body: dict) -> dict | None:
        with self.lock:
            samples = body["samples"]
            if self.max_batch is not None and len(samples) > self.max_batch:
                return {"status": 413}
            self.batch_sizes.append(len(samples))
            accepted, rejected = [], []
            for index, sample in enumerate(samples):
                self.times_received[sample["id"]] += 1
                if sample["id"] in self.unanswered:
                    continue
                if sample["id"] in self.reject:
                    rejected.append({"index": index, "id": sample["id"] if self.echo_rejected_ids else None,
                                     "reason": self.reject[sample["id"]]})
                    continue
                self.samples.setdefault(sample["id"], sample)  # dedup by id
                accepted.append(sample["id"])
            if self.lose_answers:
                self.lose_answers -= 1
                return None
            return {"accepted": accepted, "rejected": rejected}


def _handler_for(portal: FakePortal) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _answer(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _refused(self) -> bool:
            if self.headers.get("Authorization") != f"Bearer {portal.token}":
                self._answer(401, {"detail": "invalid token"})
                return True
            if portal.status != 200:
                self._answer(portal.status, {"detail": "unavailable"})
                return True
            return False

        def do_GET(self) -> None:  # noqa: N802 (http.server naming)
            if self._refused():
                return
            if self.path.startswith("/api/v1/agent/assignments"):
                self._answer(200, {"assignments": portal.assignments})
            else:
                self._answer(404, {"detail": "not found"})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self._refused():
                return
            with portal.lock:
                portal.posts.append(self.path)
            if self.path == "/api/v1/agent/usage":
                answer = portal.take_usage(body)
                if answer is None:  # stored, but the answer never reaches the agent
                    self.close_connection = True
                    return
                if answer.get("status") == 413:
                    self._answer(413, {"detail": "too large"})
                    return
                self._answer(200, answer)
            elif self.path == "/api/v1/agent/heartbeat":
                with portal.lock:
                    portal.heartbeats.append(body)
                self._answer(200, {"ok": True})
            else:
                self._answer(404, {"detail": "not found"})

    return Handler


@pytest.fixture
def portal():
    fake = FakePortal()
    fake.start()
    yield fake
    fake.stop()

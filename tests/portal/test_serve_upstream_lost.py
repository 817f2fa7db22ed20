"""A replica lost under a request on the ASGI path (Django's async client: the answer streams): one that
fails before the first chunk is tried again on another replica (or a clear 503 when there is none); one
lost mid-stream ends the stream with an OpenAI-shaped error event, never leaving the client waiting. The
replicas are small raw HTTP servers of the test, each failing its own way."""

from __future__ import annotations

import json
import socket
import socketserver
import threading

import pytest
from django.test import AsyncClient

from portal import serve_proxy, service_keys
from scheduling import services
from scheduling.backends.base import Endpoint
from tests.portal.test_serve_live import SERVICE

pytestmark = pytest.mark.django_db(transaction=True)

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(payload: dict | str) -> bytes:
    return chunk(b"data: " + (payload if isinstance(payload, str) else json.dumps(payload)).encode() + b"\n\n")


TOKEN = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "llm",
         "choices": [{"index": 0, "delta": {"content": "the "}, "finish_reason": None}]}
USAGE = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "llm", "choices": [],
         "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}
WHOLE = HEAD + event(TOKEN) + event(TOKEN) + event(USAGE) + event("[DONE]") + b"0\r\n\r\n"


class Upstream:
    """A replica that reads a request and answers `reply` bytes, then closes (an abrupt end: what a killed
    process leaves); `reply` None: it closes without a byte."""

    def __init__(self, reply: bytes | None):
        self.reply, self.requests = reply, 0
        upstream = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                data = b""
                while b"\r\n\r\n" not in data:
                    data += self.request.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(body) < length:
                    body += self.request.recv(65536)
                upstream.requests += 1
                if upstream.reply:
                    self.request.sendall(upstream.reply)
                self.request.shutdown(socket.SHUT_RDWR)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.endpoint = Endpoint(url=f"http://127.0.0.1:{self.server.server_address[1]}/", replica="worker-0-0")

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def upstreams():
    made = []

    def make(reply):
        made.append(Upstream(reply))
        return made[-1]

    yield make
    for upstream in made:
        upstream.close()


@pytest.fixture
def service_key(cluster, settings):
    settings.SERVE_COLD_START_TIMEOUT_S = 1
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SERVICE)
    return job, service_keys.create_key(cluster.alice, job, "app", days=0)[1]


def replicas(monkeypatch, *ups: Upstream) -> None:
    """The service's ready replicas, in the order the proxy tries them (a failed one is avoided after)."""
    def ready(job, avoid=None):
        return next((u.endpoint for u in ups if u.endpoint.url != avoid), None)

    monkeypatch.setattr(serve_proxy, "ready_endpoint", ready)


async def chat(raw: str):
    response = await AsyncClient().post(
        "/serve/vision-lab/llm/v1/chat/completions", content_type="application/json",
        data={"model": "llm", "messages": [{"role": "user", "content": "hi"}], "stream": True,
              "stream_options": {"include_usage": True}}, headers={"Authorization": f"Bearer {raw}"})
    body = b"".join([part async for part in response.streaming_content]) if response.streaming else response.content
    return response, body


async def test_a_replica_that_fails_before_its_first_chunk_is_tried_again_on_another(service_key, upstreams,
                                                                                      monkeypatch):
    job, raw = service_key
    for dead in (upstreams(None), upstreams(HEAD)):   # no answer at all; its headers, then nothing
        good = upstreams(WHOLE)
        replicas(monkeypatch, dead, good)
        response, body = await chat(raw)
        assert response.status_code == 200
        assert body.endswith(b"data: [DONE]\n\n") and b'"completion_tokens": 2' in body
        assert (dead.requests, good.requests) == (1, 1)


async def test_with_no_other_replica_it_is_a_503_in_the_openai_shape(service_key, upstreams, monkeypatch):
    job, raw = service_key
    dead = upstreams(HEAD)
    replicas(monkeypatch, dead)
    response, body = await chat(raw)
    assert response.status_code == 503 and response["Retry-After"]
    error = json.loads(body)["error"]
    assert error["type"] == "server_error" and "no ready replica" in error["message"]


async def test_a_replica_lost_mid_stream_ends_the_stream_with_an_error_event(service_key, upstreams, monkeypatch):
    job, raw = service_key
    cut = upstreams(HEAD + event(TOKEN) + event(TOKEN))   # two tokens, then the process is gone
    replicas(monkeypatch, cut)
    response, body = await chat(raw)
    assert response.status_code == 200 and not response.has_header("Content-Length")
    events = [line[6:] for line in body.split(b"\n") if line.startswith(b"data: ")]
    assert len(events) == 3 and b"[DONE]" not in body
    assert json.loads(events[-1])["error"] == {
        "message": "the replica serving this answer stopped before its end; retry the request",
        "type": "server_error", "code": "upstream_lost"}
    assert cut.requests == 1

"""The door on a real uvicorn server, as production runs it: a 300 MB chunked upload with no credentials is
refused with 413 after about the limit, not read to its end (the client counts what it got to send); a
declared oversized length is refused at once; an ordinary body still reaches Django."""

from __future__ import annotations

import select
import socket
import subprocess
import sys

import httpx
import pytest

from portal.testing import ROOT, child_env, free_port, stop_processes, wait_for_http

pytestmark = pytest.mark.timeout(180)
MB = 1024 * 1024


@pytest.fixture(scope="module")
def uvicorn_server(django_db_setup, redis_server, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("uvicorn") / "uvicorn.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "portal.asgi:application", "--host", "127.0.0.1",
                                 "--port", str(port), "--lifespan", "off"],
                                cwd=ROOT, env=child_env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/healthz", timeout=60, proc=proc)
        yield port
    finally:
        stop_processes([proc])


def upload_chunked(port: int, path: str, total: int, chunk: int = 64 * 1024) -> tuple[int, bytes]:
    """POST `total` bytes in chunks until the server answers (or closes); (bytes sent, the answer)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n".encode())
    piece = f"{chunk:x}\r\n".encode() + b"x" * chunk + b"\r\n"
    sent, answer = 0, b""
    try:
        while sent < total:
            if select.select([sock], [], [], 0)[0]:
                break  # the server answered before the body ended
            sock.sendall(piece)
            sent += chunk
        else:
            sock.sendall(b"0\r\n\r\n")
        while True:
            data = sock.recv(65536)
            if not data:
                break
            answer += data
            if b"\r\n\r\n" in answer and b"content-length" in answer.lower():
                head, _, rest = answer.partition(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                if len(rest) >= length:
                    break
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server stopped reading and closed: what it answered, if it reached us, is in `answer`
    finally:
        sock.close()
    return sent, answer


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/healthz", "/login/", "/api/v1/jobs/"])
def test_a_huge_chunked_upload_without_credentials_is_refused_early(uvicorn_server, path):
    sent, answer = upload_chunked(uvicorn_server, path, 300 * MB)
    print(f"\nDOOR {path}: the client got to send {sent / MB:.1f} MB of 300 MB; answer: {answer[:12]!r}", flush=True)
    assert sent < 50 * MB, sent  # the limit (1 MB) and what the sockets buffer, not the whole body
    if answer:
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


@pytest.mark.django_db(transaction=True)
def test_a_declared_oversized_length_is_refused_at_once(uvicorn_server):
    response = httpx.post(f"http://127.0.0.1:{uvicorn_server}/api/v1/jobs/", content=b"x" * (2 * MB),
                          headers={"Content-Type": "application/json"}, timeout=30)
    assert response.status_code == 413 and response.headers["content-type"] == "application/problem+json"
    assert response.json()["status"] == 413


@pytest.mark.django_db(transaction=True)
def test_ordinary_and_agent_sized_bodies_reach_django(uvicorn_server):
    base = f"http://127.0.0.1:{uvicorn_server}"
    small = httpx.post(f"{base}/api/v1/jobs/", content=b"{}", headers={"Content-Type": "application/json"})
    assert small.status_code == 401, small.text  # read and answered by the API: no credentials
    batch = b'{"node": "n", "samples": [], "pad": "' + b"x" * (2 * MB) + b'"}'
    agent = httpx.post(f"{base}/api/v1/agent/usage", content=batch, headers={"Content-Type": "application/json"})
    assert agent.status_code in (401, 403), agent.text  # past the door (its limit is larger), refused for no token

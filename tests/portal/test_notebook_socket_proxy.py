"""A notebook's websockets on its own host (portal/notebook_socket.py), and the simulated notebook's own
kernel websocket (scheduling/backends/simulated/notebook_server.py).

On the real ASGI server, in front of a real notebook process: a member runs code over Jupyter's kernel
channels with the notebook host's cookie and the kernel's activity shows; another tenant, a viewer, a
stranger, the portal's session, another site's page and another notebook's page are refused. In process (Channels' communicator): the close code of each refusal, and
the relay itself against a websocket server standing in for the notebook (the token added, no cookie, the
query's `token` dropped, the subprotocol agreed, text and binary both ways, close codes passed on). Against
the notebook process: the RFC 6455 handshake and frames."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import subprocess
import sys
import uuid
from datetime import datetime

import httpx
import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings
from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from billing.services import submit_quoted_job
from portal.notebook_origin import COOKIE_NAME, NOTEBOOK_PORT, session_cookie
from scheduling import services
from scheduling.backends.base import Endpoint
from scheduling.notebooks import notebook_token
from tests.portal.conftest import NOTEBOOK  # the running notebook fixture's spec
from tests.portal.notebook_host import host_of, on_host, open_from_portal, origin_of

JUPYTER_SUBPROTOCOL = "v1.kernel.websocket.jupyter.org"  # what JupyterLab offers; the simulated one picks none


def cookie(client, user) -> str:
    """The portal's session cookie, as a Cookie header."""
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def host_cookie(live_daphne, client, user, job_id: int) -> str:
    """The notebook host's cookie for `user`, got the browser's way (the portal's ticket, exchanged)."""
    client.force_login(user)
    portal = httpx.Client(cookies={settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value})
    with portal:
        return f"{COOKIE_NAME}={open_from_portal(live_daphne, portal, job_id)}"


def connect_host(live_daphne, job_id: int, path: str, **kwargs):
    """A websocket to the notebook's host on the live server (its name resolves to nothing here)."""
    port = int(live_daphne.url.rsplit(":", 1)[1])
    return connect(f"ws://{host_of(live_daphne, job_id)}{path}",
                   sock=socket.create_connection(("127.0.0.1", port)), **kwargs)


def execute_request(code: str) -> dict:
    header = {"msg_id": uuid.uuid4().hex, "session": uuid.uuid4().hex, "username": "alice", "date": "",
              "msg_type": "execute_request", "version": "5.3"}
    return {"header": header, "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False}}


def answers(receive) -> list[dict]:
    """The kernel's messages up to its `status: idle`."""
    messages = []
    while not messages or messages[-1]["header"]["msg_type"] != "status" or \
            messages[-1]["content"]["execution_state"] != "idle":
        messages.append(json.loads(receive()))
    return messages


def assert_ran(messages: list[dict], request: dict, output: tuple[str, str, dict]) -> None:
    assert [(m["channel"], m["header"]["msg_type"]) for m in messages] == [
        ("iopub", "status"), ("iopub", "execute_input"), output[:2], ("shell", "execute_reply"), ("iopub", "status")]
    assert all(m["parent_header"] == request["header"] for m in messages)
    assert messages[0]["content"] == {"execution_state": "busy"}
    assert output[2].items() <= messages[2]["content"].items()
    assert messages[3]["content"]["status"] == "ok"
    assert messages[3]["content"]["execution_count"] == messages[1]["content"]["execution_count"]


# --------------------------------------------------------------------------- through the real ASGI server


def ws_url(live_daphne, path: str) -> str:
    return live_daphne.url.replace("http://", "ws://") + path


@pytest.mark.django_db(transaction=True)
def test_a_member_runs_code_over_the_kernel_channels(live_daphne, cluster, running_notebook, client):
    job_id, own = running_notebook.pk, origin_of(live_daphne, running_notebook.pk)
    alice_cookie = host_cookie(live_daphne, client, cluster.alice, job_id)
    with on_host(live_daphne, job_id, headers={"Cookie": alice_cookie}) as alice:
        url = "/nb/vision-lab/lab/"
        kernel = alice.post(url + "api/kernels", json={"name": "python3"}, headers={"Origin": own})
        assert kernel.status_code == 201, kernel.text
        kernel_id = kernel.json()["id"]
        before = alice.get(url + "api/status").json()

        with connect_host(live_daphne, job_id, f"/nb/vision-lab/lab/api/kernels/{kernel_id}/channels?session_id=s1",
                          origin=own, additional_headers={"Cookie": alice_cookie},
                          subprotocols=[JUPYTER_SUBPROTOCOL], open_timeout=10) as channels:
            assert channels.subprotocol is None  # the single-socket JSON protocol
            assert alice.get(url + "api/status").json()["connections"] == 1
            request = execute_request('print("hello from the portal")')
            channels.send(json.dumps(request))
            printed = answers(lambda: channels.recv(timeout=10))
            assert_ran(printed, request, ("iopub", "stream", {"name": "stdout", "text": "hello from the portal\n"}))
            request = execute_request("[1, 2, 3]")
            channels.send(json.dumps(request))
            result = answers(lambda: channels.recv(timeout=10))
            assert_ran(result, request, ("iopub", "execute_result", {"data": {"text/plain": "[1, 2, 3]"}}))
            assert result[3]["content"]["execution_count"] == 2
            assert notebook_token(running_notebook.pk) not in json.dumps(printed + result)

        status = alice.get(url + "api/status").json()
        assert datetime.fromisoformat(status["last_activity"]) > datetime.fromisoformat(before["last_activity"])
        assert alice.get(url + f"api/kernels/{kernel_id}").json()["execution_count"] == 2


@pytest.mark.django_db(transaction=True)
def test_other_tenants_viewers_strangers_and_other_sites_are_refused(live_daphne, cluster, running_notebook,
                                                                     client):
    job_id, own = running_notebook.pk, origin_of(live_daphne, running_notebook.pk)
    alice_cookie = host_cookie(live_daphne, client, cluster.alice, job_id)
    with on_host(live_daphne, job_id, headers={"Cookie": alice_cookie}) as alice:
        kernel = alice.post("/nb/vision-lab/lab/api/kernels", json={}, headers={"Origin": own}).json()
    path = f"/nb/vision-lab/lab/api/kernels/{kernel['id']}/channels"
    forged = {name: f"{COOKIE_NAME}={session_cookie(getattr(cluster, name), job_id, NOTEBOOK_PORT)}"
              for name in ("bob", "finance")}  # as if they had got a ticket
    attempts = {
        "bob (another tenant)": (forged["bob"], own),
        "finance (a viewer)": (forged["finance"], own),
        "a stranger": ("", own),
        "alice with the portal's session only": (cookie(client.__class__(), cluster.alice), own),
        "alice from another site's page": (alice_cookie, "https://evil.example"),
        "alice from the portal's page": (alice_cookie, live_daphne.url),
        "alice from another notebook's page": (alice_cookie, origin_of(live_daphne, job_id + 1)),
    }
    for who, (session, origin) in attempts.items():
        with pytest.raises(InvalidStatus) as refused:
            connect_host(live_daphne, job_id, path, origin=origin, open_timeout=10,
                         additional_headers={"Cookie": session} if session else {})
        assert refused.value.response.status_code == 403, who
    with pytest.raises(InvalidStatus):  # the portal no longer serves notebooks' sockets
        connect(live_daphne.url.replace("http://", "ws://") + path, origin=live_daphne.url,
                additional_headers={"Cookie": cookie(client.__class__(), cluster.alice)}, open_timeout=10)
    with on_host(live_daphne, job_id, headers={"Cookie": alice_cookie}) as alice:
        assert alice.get("/nb/vision-lab/lab/api/status").json()["connections"] == 0  # none reached the notebook


# --------------------------------------------------------------------------- in process: codes and the relay


@pytest.fixture
def pending_notebook(cluster):
    return submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)


@pytest.fixture
def cookies(cluster, pending_notebook, monkeypatch) -> dict[str, str]:
    """Each user's cookie of the pending notebook's host (as if each had got a ticket)."""
    monkeypatch.setattr(f"{__name__}.NOTEBOOK_JOB", pending_notebook.pk)
    return {name: f"{COOKIE_NAME}={session_cookie(getattr(cluster, name), pending_notebook.pk, NOTEBOOK_PORT)}"
            for name in ("alice", "bob", "finance")}


def communicator(path: str, session: str | None = None, subprotocols=None, job_id: int | None = None,
                 origin: str | None = None) -> WebsocketCommunicator:
    """A websocket to the notebook's host (NOTEBOOK_ORIGIN's default: `<id>.nb.localhost:8001`) from its own page."""
    from portal.asgi import application

    host = f"{job_id or NOTEBOOK_JOB}.nb.localhost:8001"
    headers = [(b"origin", (origin or f"http://{host}").encode()), (b"host", host.encode())]
    if session:
        headers.append((b"cookie", session.encode()))
    return WebsocketCommunicator(application, path, headers=headers, subprotocols=subprotocols)


NOTEBOOK_JOB = 0  # set by the `cookies` fixture: the pending notebook's id


@pytest.mark.django_db(transaction=True)
async def test_each_refusal_has_its_close_code(cluster, pending_notebook, cookies):
    path = "/nb/vision-lab/lab/api/kernels/k1/channels"
    for session, where, code in (
        (None, path, 4401),
        (cookies["bob"], path, 4404),
        (cookies["alice"], "/nb/nlp-group/lab/api/kernels/k1/channels", 4404),  # not its path
        (cookies["alice"], "/nb/vision-lab/other/api/kernels/k1/channels", 4404),
        (cookies["alice"], "/api/v1/workspaces/", 4404),
        (cookies["finance"], path, 4403),
        (cookies["alice"], path, 4503),  # pending: its server does not answer yet
    ):
        socket_ = communicator(where, session)
        assert await socket_.connect(timeout=10) == (False, code), (session, where)
        await socket_.disconnect()
    for origin in ("http://testserver", f"http://{pending_notebook.pk + 1}.nb.localhost:8001"):
        socket_ = communicator(path, cookies["alice"], origin=origin)
        assert await socket_.connect(timeout=10) == (False, 4403), origin
    socket_ = communicator(path, cookies["alice"], job_id=pending_notebook.pk + 1)  # its cookie on another host
    assert await socket_.connect(timeout=10) == (False, 4401)


@pytest.fixture
def upstream():
    """A websocket server standing in for the notebook: it says hello, echoes text, reverses bytes, closes
    with 4242 when asked; it records what it was sent."""
    seen: dict = {"closed": asyncio.Event()}

    async def handler(connection):
        seen["path"], seen["headers"] = connection.request.path, connection.request.headers
        await connection.send("hello")
        try:
            async for message in connection:
                if message == "close please":
                    await connection.close(4242, "done")
                elif isinstance(message, bytes):
                    await connection.send(message[::-1])
                else:
                    await connection.send(f"echo:{message}")
        except ConnectionClosed:
            pass
        finally:
            seen["close_code"] = connection.close_code
            seen["closed"].set()

    return handler, seen


async def start_upstream(handler, monkeypatch):
    def select(connection, offered):  # Jupyter's when offered; none is fine too
        return JUPYTER_SUBPROTOCOL if JUPYTER_SUBPROTOCOL in offered else None

    server = await serve(handler, "127.0.0.1", 0, select_subprotocol=select)
    port = server.sockets[0].getsockname()[1]
    endpoint = Endpoint(url=f"http://127.0.0.1:{port}/nb/vision-lab/lab/", token="the-notebooks-token")
    monkeypatch.setattr("portal.notebook_proxy.endpoint_of", lambda job, backend: endpoint)
    return server


@pytest.mark.django_db(transaction=True)
async def test_the_relay_passes_messages_both_ways_with_the_token_and_no_cookie(cluster, pending_notebook, cookies,
                                                                               upstream, monkeypatch):
    handler, seen = upstream
    server = await start_upstream(handler, monkeypatch)
    try:
        socket_ = communicator("/nb/vision-lab/lab/api/kernels/k1/channels?session_id=s1&token=from-the-page",
                               cookies["alice"], subprotocols=[JUPYTER_SUBPROTOCOL])
        assert await socket_.connect(timeout=10) == (True, JUPYTER_SUBPROTOCOL)
        assert await socket_.receive_from(timeout=10) == "hello"
        await socket_.send_to(text_data="ping")
        assert await socket_.receive_from(timeout=10) == "echo:ping"
        await socket_.send_to(bytes_data=b"\x00\x01binary")
        assert await socket_.receive_from(timeout=10) == b"yranib\x01\x00"
        await socket_.send_to(text_data="close please")
        assert await socket_.receive_output(timeout=10) == {"type": "websocket.close", "code": 4242}
        await socket_.wait(timeout=10)
    finally:
        server.close()
        await server.wait_closed()
    assert seen["path"] == "/nb/vision-lab/lab/api/kernels/k1/channels?session_id=s1"
    assert seen["headers"]["Authorization"] == "token the-notebooks-token"
    assert "Cookie" not in seen["headers"] and "Origin" not in seen["headers"]


@pytest.mark.django_db(transaction=True)
async def test_a_browser_closing_closes_the_notebook_side(cluster, pending_notebook, cookies, upstream, monkeypatch):
    handler, seen = upstream
    server = await start_upstream(handler, monkeypatch)
    try:
        socket_ = communicator("/nb/vision-lab/lab/api/kernels/k1/channels", cookies["alice"])
        assert (await socket_.connect(timeout=10))[0] is True
        assert await socket_.receive_from(timeout=10) == "hello"
        await socket_.send_input({"type": "websocket.disconnect", "code": 4100})
        await socket_.wait(timeout=10)
        await asyncio.wait_for(seen["closed"].wait(), 10)
    finally:
        server.close()
        await server.wait_closed()
    assert seen["close_code"] == 4100


@pytest.mark.django_db(transaction=True)
async def test_a_notebook_that_does_not_answer_is_1011(cluster, pending_notebook, cookies, monkeypatch):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    endpoint = Endpoint(url=f"http://127.0.0.1:{port}/nb/vision-lab/lab/", token="t")
    monkeypatch.setattr("portal.notebook_proxy.endpoint_of", lambda job, backend: endpoint)
    socket_ = communicator("/nb/vision-lab/lab/api/kernels/k1/channels", cookies["alice"])
    assert await socket_.connect(timeout=10) == (False, 1011)


@pytest.mark.django_db(transaction=True)
def test_a_stopped_notebook_refuses_its_sockets(live_daphne, cluster, running_notebook, client):
    alice_cookie = host_cookie(live_daphne, client, cluster.alice, running_notebook.pk)
    services.stop_workload(cluster.alice, running_notebook, "")
    with pytest.raises(InvalidStatus):
        connect_host(live_daphne, running_notebook.pk, "/nb/vision-lab/lab/api/kernels/k1/channels",
                     origin=origin_of(live_daphne, running_notebook.pk),
                     additional_headers={"Cookie": alice_cookie}, open_timeout=10)


# --------------------------------------------------------------------------- the notebook process's websocket

RFC_KEY, RFC_ACCEPT = "dGhlIHNhbXBsZSBub25jZQ==", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455, 1.3
TEXT, CONTINUATION, BINARY, CLOSE, PING, PONG = 0x1, 0x0, 0x2, 0x8, 0x9, 0xA


@pytest.fixture
def notebook_process():
    """The simulated notebook as a process; yields (host, port, base path)."""
    process = subprocess.Popen([sys.executable, "-m", "scheduling.backends.simulated.notebook_server",
                                "--base-url", "/nb/vision-lab/scratch/"], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "JUPYTER_TOKEN": "t0k"})
    try:
        started = json.loads(process.stdout.readline())
        yield "127.0.0.1", started["port"], "/nb/vision-lab/scratch/"
    finally:
        process.terminate()
        process.wait(10)
        process.stdout.close()


def start_kernel(notebook) -> str:
    host, port, base = notebook
    response = httpx.post(f"http://{host}:{port}{base}api/kernels", json={},
                          headers={"Authorization": "token t0k"})
    assert response.status_code == 201
    return response.json()["id"]


def open_raw(notebook, path: str, *, key: str = RFC_KEY, auth: str = "Authorization: token t0k\r\n",
             upgrade: str = "Upgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n") -> tuple[socket.socket, str]:
    host, port, _ = notebook
    connection = socket.create_connection((host, port), timeout=10)
    connection.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{upgrade}Sec-WebSocket-Key: {key}\r\n"
                        f"Sec-WebSocket-Version: 13\r\n{auth}\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = connection.recv(1)
        assert chunk, head
        head += chunk
    return connection, head.decode()


def client_frame(opcode: int, payload: bytes, *, fin: bool = True, masked: bool = True) -> bytes:
    size = len(payload)
    length = bytes([size]) if size < 126 else (bytes([126]) + size.to_bytes(2, "big") if size < 1 << 16
                                               else bytes([127]) + size.to_bytes(8, "big"))
    mask = b"\x37\xfa\x21\x3d"
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload)) if masked else payload
    return (bytes([(0x80 if fin else 0) | opcode, length[0] | (0x80 if masked else 0)]) + length[1:]
            + (mask if masked else b"") + body)


def read_exact(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        assert chunk, "the connection was closed"
        data += chunk
    return data


def server_frame(connection: socket.socket) -> tuple[int, bytes]:
    first, second = read_exact(connection, 2)
    assert first & 0x80 and not second & 0x80  # final and unmasked, as a server's frames are
    size = second & 0x7F
    if size == 126:
        size = int.from_bytes(read_exact(connection, 2), "big")
    elif size == 127:
        size = int.from_bytes(read_exact(connection, 8), "big")
    return first & 0x0F, read_exact(connection, size)


def test_the_notebook_process_speaks_rfc_6455(notebook_process):
    kernel_id = start_kernel(notebook_process)
    channels = f"{notebook_process[2]}api/kernels/{kernel_id}/channels"
    connection, head = open_raw(notebook_process, channels)
    with connection:
        assert head.startswith("HTTP/1.1 101 ") and f"Sec-WebSocket-Accept: {RFC_ACCEPT}\r\n" in head
        request = execute_request('print("' + "x" * 70_000 + '")')  # over 64 KiB: 8-byte lengths both ways
        data = json.dumps(request).encode()
        connection.sendall(client_frame(TEXT, data[:100], fin=False) + client_frame(PING, b"still there?")
                           + client_frame(CONTINUATION, data[100:]))
        assert server_frame(connection) == (PONG, b"still there?")
        messages = answers(lambda: server_frame(connection)[1])
        assert_ran(messages, request, ("iopub", "stream", {"text": "x" * 70_000 + "\n"}))

        info = {"header": {"msg_id": "info-1", "msg_type": "kernel_info_request"}, "content": {}, "channel": "shell"}
        packed = json.dumps(info).encode()  # Jupyter's binary framing: count, offsets, the message
        connection.sendall(client_frame(BINARY, (1).to_bytes(4, "big") + (8).to_bytes(4, "big") + packed))
        replies = [json.loads(server_frame(connection)[1]) for _ in range(3)]
        assert [m["header"]["msg_type"] for m in replies] == ["status", "kernel_info_reply", "status"]
        assert replies[1]["content"]["protocol_version"] == "5.3" and replies[1]["parent_header"]["msg_id"] == "info-1"

        connection.sendall(client_frame(CLOSE, (1000).to_bytes(2, "big") + b"bye"))
        assert server_frame(connection) == (CLOSE, (1000).to_bytes(2, "big"))
    host, port, base = notebook_process
    kernel = httpx.get(f"http://{host}:{port}{base}api/kernels/{kernel_id}", headers={"Authorization": "token t0k"})
    assert kernel.json()["execution_count"] == 1 and kernel.json()["connections"] == 0


def test_a_websockets_client_talks_to_the_notebook_process(notebook_process):
    host, port, base = notebook_process
    kernel_id = start_kernel(notebook_process)
    with connect(f"ws://{host}:{port}{base}api/kernels/{kernel_id}/channels?token=t0k", open_timeout=10) as kernel:
        request = execute_request("{'loss': 0.25}")
        kernel.send(json.dumps(request))
        assert_ran(answers(lambda: kernel.recv(timeout=10)), request,
                   ("iopub", "execute_result", {"data": {"text/plain": "{'loss': 0.25}"}}))
        kernel.ping().wait(10)


def test_the_notebook_process_refuses_before_the_upgrade_or_closes_on_bad_frames(notebook_process):
    kernel_id = start_kernel(notebook_process)
    base = notebook_process[2]
    channels = f"{base}api/kernels/{kernel_id}/channels"
    for path, kwargs, status in (
        (f"{base}api/kernels/{'0' * 32}/channels", {}, "404"),   # no such kernel
        (channels, {"auth": ""}, "403"),                          # no token
        (channels, {"auth": "Authorization: token wrong\r\n"}, "403"),
        (channels, {"upgrade": ""}, "400"),                        # plain GET
        (channels, {"key": base64.b64encode(b"short").decode()}, "400"),
    ):
        connection, head = open_raw(notebook_process, path, **kwargs)
        connection.close()
        assert head.split(" ")[1] == status, (path, kwargs, head)

    connection, head = open_raw(notebook_process, channels)
    with connection:
        connection.sendall(client_frame(TEXT, b"{}", masked=False))
        assert server_frame(connection)[1][:2] == (1002).to_bytes(2, "big")  # a client's frames are masked
    connection, head = open_raw(notebook_process, channels)
    with connection:
        # text that is no Jupyter message is ignored; a continuation with nothing to continue is an error
        connection.sendall(client_frame(TEXT, b"not json") + client_frame(CONTINUATION, b"stray"))
        assert server_frame(connection)[1][:2] == (1002).to_bytes(2, "big")

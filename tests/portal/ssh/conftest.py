"""The SSH gateway, started once per test session in a thread of the test process (it reads the test database
through its own connection: the tests that use it are transactional), and a user's key pair made by ssh-keygen."""

from __future__ import annotations

import asyncio
import subprocess
import threading

import pytest


@pytest.fixture(scope="session")
def gateway(tmp_path_factory):
    from django.test import override_settings

    from portal import ssh_gateway

    folder = tmp_path_factory.mktemp("gateway")
    settings = override_settings(SSH_HOST_KEY_PATH=str(folder / "host_key"))
    settings.enable()
    loop = asyncio.new_event_loop()
    started: dict = {}
    ready = threading.Event()

    def run():
        asyncio.set_event_loop(loop)
        acceptor = loop.run_until_complete(ssh_gateway.serve("127.0.0.1", 0))
        started["acceptor"], started["port"] = acceptor, acceptor.sockets[0].getsockname()[1]
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, name="ssh-gateway", daemon=True)
    thread.start()
    assert ready.wait(30)
    yield started["port"]
    loop.call_soon_threadsafe(started["acceptor"].close)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    settings.disable()


def make_key(folder, name="id_ed25519", kind="ed25519", bits=None):
    path = folder / name
    argv = ["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path), "-C", f"{name}@test"]
    if bits:
        argv += ["-b", str(bits)]
    subprocess.run(argv, check=True)
    return path, (folder / f"{name}.pub").read_text().strip()


def ssh_options(port: int, key) -> list[str]:
    return ["-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "IdentityAgent=none",
            "-i", str(key), "-p", str(port)]

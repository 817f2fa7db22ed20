"""Start the simulated backend's servers as real processes and talk HTTP to them."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

START_TIMEOUT_S = 20


class Process:
    def __init__(self, module: str, *args: str):
        self.popen = subprocess.Popen([sys.executable, "-m", module, *args], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.popen.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        if not line or not line[0]:
            self.stop()
            raise RuntimeError(f"{module} did not start: {self.popen.stderr.read()}")
        self.started = json.loads(line[0])
        self.url = self.started["listening"].rstrip("/")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        for stream in (self.popen.stdout, self.popen.stderr):
            if stream:
                stream.close()

    def call(self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None,
             raw: bytes | None = None) -> tuple[int, Any]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers or {})
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, text, kind = response.status, response.read().decode(), response.headers.get("Content-Type", "")
        except urllib.error.HTTPError as error:
            status, text, kind = error.code, error.read().decode(), error.headers.get("Content-Type", "")
        return status, (json.loads(text) if text and kind.startswith("application/json") else text)


@pytest.fixture
def start_process() -> Iterator:
    started: list[Process] = []

    def start(module: str, *args: str) -> Process:
        process = Process(module, *args)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()

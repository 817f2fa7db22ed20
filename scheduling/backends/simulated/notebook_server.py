"""A simulated notebook: a real local HTTP server that looks enough like Jupyter to be proxied and culled.

    python -m scheduling.backends.simulated.notebook_server --base-url /nb/vision-lab/scratch/ --home DIR --token T

Under `--base-url` (Jupyter's base_url: the path the portal's proxy forwards) it serves a page (`/`,
`lab`), Jupyter's `api`, `api/status` (started, last_activity, connections, kernels), `api/kernels`
(list, start with POST, stop with DELETE `api/kernels/<id>`), `api/contents` (the files of the
persistent home directory `--home`: list, read, and write with PUT `api/contents/<name>`), `api/mounts/<path>`
(a file of a mounted volume or dataset by its path in the replica, through $SIM_MOUNTS), `files/<name>`
(a home file as it is, its type from its name, as Jupyter serves one: an HTML file's scripts run), and
`metrics` (Prometheus text; `?format=json` for JSON). The simulation's own call,
POST `api/kernels/<id>/execute` `{"code", "seconds", "gpu"}`, keeps that kernel busy for `seconds`
using `gpu` (0..1) of the slice; it answers at once (202).

`api/kernels/<id>/channels` is Jupyter's kernel websocket (websocket.py; messaging v5 as JSON text frames,
each with its `channel`, as Jupyter's single-socket protocol without a subprotocol): `kernel_info_request`
and `execute_request` are answered as a kernel does (status busy, execute_input, the output, the reply,
status idle, each with the request's header as parent). Nothing is evaluated: `print(<literals>)` prints
them, a literal expression is its result, anything else only says it ran. Running code there counts as
kernel activity, as the execute call does (a run of 0 seconds).

Kernel activity is what counts for the idle policy: starting a kernel and running code, not opening
the page. The figures give it as an age (`last_kernel_activity_age_s`, seconds since, measured by this
process) and the simulated GPU use: the slice's share held since the start, busy in proportion to
the running code's `gpu`. The process also measures its own CPU use (itself and its ended children, one
sample a second): `cpu.percent` (of one core, over the last 10 s) and, with `?cpu_pct=P`, `cpu.busy_age_s`,
seconds since a sample was above P (null: never). The execute call's `cpu` (0..1) burns that share of a core
for the run's `seconds`, so a test can make the CPU busy for real. With `--token` every path needs `Authorization: token <T>` or `?token=<T>`,
as Jupyter does (or from $JUPYTER_TOKEN, kept off the command line). Standard library only (and asyncssh for its
SSH server, scheduling/backends/ssh_endpoint.py, started when $SIM_SSH_TOKEN is set); no Django. On start it prints one JSON line to stdout: {"listening": "http://HOST:PORT/BASE", "port": PORT}.
"""

from __future__ import annotations

import argparse
import ast
import html
import json
import mimetypes
import os
import re
import sys
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from scheduling.backends import ssh_endpoint
from scheduling.backends.simulated import mounts, websocket
from scheduling.backends.simulated.json_body import read_json_object

MAX_BODY = 1024 * 1024
MAX_KERNELS = 16
MAX_FILES = 1000
MAX_RUN_S = 24 * 3600
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_MESSAGE = 16 * 1024 * 1024  # one websocket message
PROTOCOL_VERSION = "5.3"  # Jupyter's messaging protocol


class NotebookError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass
class Run:
    start: float
    end: float
    gpu: float


@dataclass
class Kernel:
    ident: str
    name: str
    started: float
    last_activity: float
    runs: list[Run]
    execution_count: int = 0

    def busy(self, now: float) -> bool:
        return any(r.start <= now < r.end for r in self.runs)

    def activity(self, now: float) -> float:
        """The last moment the kernel did something: a start, a run's start or its end once past."""
        return max([self.last_activity, *(min(now, r.end) for r in self.runs)])


CPU_SAMPLE_S = 1.0
CPU_RECENT_S = 10.0      # cpu.percent is the mean over this long
CPU_HISTORY_S = 24 * 3600


class CpuMeter:
    """The process's own CPU use (itself and its ended children), one sample a second, a day kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.samples: deque[tuple[float, float]] = deque(maxlen=int(CPU_HISTORY_S / CPU_SAMPLE_S))
        self._last = (time.monotonic(), self._used())

    @staticmethod
    def _used() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def sample(self) -> None:
        now, used = time.monotonic(), self._used()
        with self._lock:
            then, before = self._last
            if now - then > 0:
                self.samples.append((now, 100.0 * max(0.0, used - before) / (now - then)))
            self._last = (now, used)

    def run(self) -> None:
        while True:
            time.sleep(CPU_SAMPLE_S)
            self.sample()

    def figures(self, threshold: float | None) -> dict[str, Any]:
        now = time.monotonic()
        with self._lock:
            recent = [pct for at, pct in self.samples if at >= now - CPU_RECENT_S]
            busy = next((at for at, pct in reversed(self.samples) if pct > threshold), None) \
                if threshold is not None else None
        out: dict[str, Any] = {"percent": round(sum(recent) / len(recent), 2) if recent else 0.0}
        if threshold is not None:
            out["busy_age_s"] = None if busy is None else now - busy
        return out


def burn_cpu(seconds: float, share: float) -> None:
    """Keep `share` of a core busy for `seconds` (a run's real CPU use), in slices of 50 ms."""
    end = time.monotonic() + seconds
    while (now := time.monotonic()) < end:
        busy_until = now + 0.05 * share
        while time.monotonic() < busy_until:
            pass
        time.sleep(0.05 * (1 - share))


def _iso(monotonic: float) -> str:
    """A monotonic instant as ISO 8601 on this machine's clock (as Jupyter reports it)."""
    return datetime.fromtimestamp(time.time() - (time.monotonic() - monotonic), UTC).isoformat()


class Notebook:
    """Kernels, runs and the GPU they use; thread-safe."""

    def __init__(self, *, share: float, home: Path | None):
        self.share, self.home = share, home
        self._lock = threading.Lock()
        self.started = time.monotonic()
        self.kernels: dict[str, Kernel] = {}
        self.ended_runs: list[Run] = []           # runs of stopped kernels still count as GPU used
        self.last_kernel_activity = self.started
        self.connections: dict[str, int] = {}     # open kernel websockets, by kernel
        self.cpu = CpuMeter()

    def start_kernel(self, name: str) -> Kernel:
        with self._lock:
            if len(self.kernels) >= MAX_KERNELS:
                raise NotebookError(409, f"at most {MAX_KERNELS} kernels")
            now = time.monotonic()
            kernel = Kernel(uuid.uuid4().hex, name, now, now, [])
            self.kernels[kernel.ident] = kernel
            self.last_kernel_activity = now
            return kernel

    def stop_kernel(self, ident: str) -> None:
        with self._lock:
            kernel = self.kernels.pop(ident, None)
            if kernel is None:
                raise NotebookError(404, f"no kernel {ident}")
            now = time.monotonic()
            self.ended_runs.extend(Run(r.start, min(r.end, now), r.gpu) for r in kernel.runs)
            self.last_kernel_activity = max(self.last_kernel_activity, kernel.activity(now), now)

    def execute(self, ident: str, seconds: float, gpu: float) -> Kernel:
        with self._lock:
            kernel = self.kernels.get(ident)
            if kernel is None:
                raise NotebookError(404, f"no kernel {ident}")
            now = time.monotonic()
            begin = max([now, *(r.end for r in kernel.runs)])   # one cell at a time, as a kernel runs them
            kernel.runs.append(Run(begin, begin + seconds, gpu))
            kernel.last_activity = now
            kernel.execution_count += 1
            self.last_kernel_activity = max(self.last_kernel_activity, now)
            return kernel

    def connected(self, ident: str, change: int) -> None:
        with self._lock:
            self.connections[ident] = self.connections.get(ident, 0) + change
            if self.connections[ident] <= 0:
                del self.connections[ident]

    def _runs(self) -> list[Run]:
        return [*self.ended_runs, *(r for k in self.kernels.values() for r in k.runs)]

    def figures(self) -> dict[str, Any]:
        with self._lock:
            now = time.monotonic()
            runs = self._runs()
            busy_seconds = sum(r.gpu * max(0.0, min(now, r.end) - r.start) for r in runs) * self.share
            running = [r.gpu for r in runs if r.start <= now < r.end]
            last = max([self.last_kernel_activity, *(k.activity(now) for k in self.kernels.values())])
            return {
                "uptime_s": now - self.started, "kernels": len(self.kernels),
                "busy_kernels": sum(k.busy(now) for k in self.kernels.values()),
                "last_kernel_activity_age_s": now - last,
                "gpu": {"share": self.share, "utilisation": min(1.0, sum(running)),
                        "busy_seconds_total": busy_seconds, "held_seconds_total": self.share * (now - self.started)},
            }

    def kernel_model(self, kernel: Kernel) -> dict[str, Any]:
        now = time.monotonic()
        return {"id": kernel.ident, "name": kernel.name, "last_activity": _iso(kernel.activity(now)),
                "execution_state": "busy" if kernel.busy(now) else "idle",
                "connections": self.connections.get(kernel.ident, 0),
                "execution_count": kernel.execution_count}

    def status(self) -> dict[str, Any]:
        figures = self.figures()
        now = time.monotonic()
        return {"started": _iso(self.started), "last_activity": _iso(now - figures["last_kernel_activity_age_s"]),
                "connections": sum(self.connections.values()), "kernels": figures["kernels"]}

    # -- the home directory ---------------------------------------------------------------------
    def _file(self, name: str) -> Path:
        if self.home is None:
            raise NotebookError(404, "this notebook has no home directory")
        if not FILE_NAME.fullmatch(name):
            raise NotebookError(400, "a file name is letters, digits, '.', '_' and '-' (no folders)")
        return self.home / name

    def contents(self) -> list[dict[str, Any]]:
        if self.home is None:
            return []
        return [{"name": p.name, "type": "file", "size": p.stat().st_size} for p in sorted(self.home.iterdir())
                if p.is_file()][:MAX_FILES]

    def read(self, name: str) -> str:
        path = self._file(name)
        if not path.is_file():
            raise NotebookError(404, f"no file {name}")
        return path.read_text(encoding="utf-8", errors="replace")

    def write(self, name: str, content: str) -> None:
        path = self._file(name)
        if not path.exists() and len(self.contents()) >= MAX_FILES:
            raise NotebookError(409, f"at most {MAX_FILES} files")
        path.write_text(content, encoding="utf-8")


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title} - JupyterLab (simulated)</title></head>
<body><main><h1>{title}</h1><p>JupyterLab (simulated) on {share:g} GPU.</p>
<p>Kernels: <span id="kernels">{kernels}</span>. Files in home: <span id="files">{files}</span>.</p>
</main></body></html>
"""


class Handler(BaseHTTPRequestHandler):
    server_version = "SimulatedNotebook/1"
    protocol_version = "HTTP/1.1"
    notebook: Notebook
    base_url: str = "/"
    token: str | None = None
    title: str = "notebook"

    def log_message(self, format: str, *args: Any) -> None:   # noqa: A002 - the base class's name
        pass

    def _send(self, status: int, payload: Any = None, content_type: str = "application/json") -> None:
        data = b"" if payload is None else (payload.encode() if isinstance(payload, str) else json.dumps(payload).encode())
        self.send_response(status)
        if data:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self) -> tuple[str, dict[str, list[str]]]:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if self.token is not None:
            header = self.headers.get("Authorization", "")
            if header != f"token {self.token}" and query.get("token") != [self.token]:
                raise NotebookError(403, "a valid token is required")
        if not (url.path + "/").startswith(self.base_url):
            raise NotebookError(404, f"not under {self.base_url}")
        return url.path[len(self.base_url):] if len(url.path) >= len(self.base_url) else "", query

    def _body(self) -> dict[str, Any]:
        return read_json_object(self, MAX_BODY, NotebookError, empty=b"{}")

    def _handle(self, method: str) -> None:
        try:
            path, query = self._route()
            self._dispatch(method, path, query)
        except NotebookError as error:
            self.close_connection = True   # the body may be unread: never reuse the connection
            self._send(error.status, {"message": str(error), "reason": None})

    def do_GET(self) -> None:   # noqa: N802 - http.server's name
        self._handle("GET")

    def do_POST(self) -> None:   # noqa: N802
        self._handle("POST")

    def do_PUT(self) -> None:   # noqa: N802
        self._handle("PUT")

    def do_DELETE(self) -> None:   # noqa: N802
        self._handle("DELETE")

    def _dispatch(self, method: str, path: str, query: dict[str, list[str]]) -> None:
        nb = self.notebook
        parts = [p for p in path.split("/") if p]
        if method == "GET" and parts in ([], ["lab"], ["tree"]):
            page = PAGE.format(title=html.escape(self.title), share=nb.share, kernels=len(nb.kernels),
                               files=len(nb.contents()))
            self._send(200, page, "text/html; charset=utf-8")
        elif method == "GET" and parts == ["api"]:
            self._send(200, {"version": "2.14.0-simulated"})
        elif method == "GET" and parts == ["api", "status"]:
            self._send(200, nb.status())
        elif method == "GET" and parts == ["metrics"]:
            figures = nb.figures()
            threshold = _number(query.get("cpu_pct", [""])[0])
            figures["cpu"] = nb.cpu.figures(threshold)
            if query.get("format") == ["json"]:
                self._send(200, figures)
            else:
                self._send(200, prometheus(figures), "text/plain; version=0.0.4; charset=utf-8")
        elif parts[:2] == ["api", "kernels"]:
            self._kernels(method, parts[2:])
        elif parts[:2] == ["api", "contents"]:
            self._contents(method, parts[2:])
        elif method == "GET" and parts[:2] == ["api", "mounts"]:
            self._mounted("/".join(parts[2:]))
        elif method == "GET" and len(parts) == 2 and parts[0] == "files":
            content_type = mimetypes.guess_type(parts[1])[0] or "application/octet-stream"
            self._send(200, nb.read(parts[1]), f"{content_type}; charset=utf-8")
        else:
            raise NotebookError(404 if method == "GET" else 405, f"{method} /{path} is not served here")

    def _kernels(self, method: str, rest: list[str]) -> None:
        nb = self.notebook
        if method == "GET" and not rest:
            self._send(200, [nb.kernel_model(k) for k in list(nb.kernels.values())])
        elif method == "POST" and not rest:
            name = self._body().get("name", "python3")
            if not isinstance(name, str) or not FILE_NAME.fullmatch(name):
                raise NotebookError(400, "name must be a kernel name such as python3")
            self._send(201, nb.kernel_model(nb.start_kernel(name)))
        elif method == "GET" and len(rest) == 1:
            kernel = nb.kernels.get(rest[0])
            if kernel is None:
                raise NotebookError(404, f"no kernel {rest[0]}")
            self._send(200, nb.kernel_model(kernel))
        elif method == "DELETE" and len(rest) == 1:
            nb.stop_kernel(rest[0])
            self._send(204)
        elif method == "GET" and len(rest) == 2 and rest[1] == "channels":
            self._channels(rest[0])
        elif method == "POST" and len(rest) == 2 and rest[1] == "execute":
            body = self._body()
            seconds, gpu, cpu = body.get("seconds", 1.0), body.get("gpu", 0.0), body.get("cpu", 0.0)
            if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 <= seconds <= MAX_RUN_S:
                raise NotebookError(400, f"seconds must be a number from 0 to {MAX_RUN_S}")
            if isinstance(gpu, bool) or not isinstance(gpu, int | float) or not 0 <= gpu <= 1:
                raise NotebookError(400, "gpu must be a number from 0 to 1 (the share of the slice the code uses)")
            if isinstance(cpu, bool) or not isinstance(cpu, int | float) or not 0 <= cpu <= 1:
                raise NotebookError(400, "cpu must be a number from 0 to 1 (the share of a core the code uses)")
            kernel = nb.execute(rest[0], float(seconds), float(gpu))
            if cpu:
                threading.Thread(target=burn_cpu, args=(float(seconds), float(cpu)), daemon=True).start()
            self._send(202, nb.kernel_model(kernel))
        else:
            raise NotebookError(405, f"{method} is not allowed here")

    def _channels(self, ident: str) -> None:
        """Jupyter's kernel websocket: an unknown kernel or a request that is no handshake is refused before
        the upgrade (404, 400)."""
        if ident not in self.notebook.kernels:
            raise NotebookError(404, f"no kernel {ident}")
        problem = websocket.handshake_problem(self.command, self.headers)
        if problem:
            raise NotebookError(400, problem)
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", websocket.accept_key(self.headers["Sec-WebSocket-Key"]))
        self.end_headers()
        self.close_connection = True   # no HTTP after the websocket
        socket = websocket.Connection(self.rfile, self.wfile, max_message=MAX_MESSAGE)
        self.notebook.connected(ident, +1)
        try:
            KernelChannels(self.notebook, ident, socket).serve()
        except websocket.Closed:
            pass
        finally:
            self.notebook.connected(ident, -1)

    def _mounted(self, path: str) -> None:
        """A file of a mounted volume or dataset, by its path in the replica (as /data/x.txt would be read)."""
        local = mounts.local_path(path, mounts.from_env())
        if local is None or not local.is_file():
            raise NotebookError(404, f"no mounted file /{path}")
        self._send(200, {"path": "/" + path, "content": local.read_text(encoding="utf-8", errors="replace")})

    def _contents(self, method: str, rest: list[str]) -> None:
        nb = self.notebook
        if method == "GET" and not rest:
            self._send(200, {"type": "directory", "content": nb.contents()})
        elif method == "GET" and len(rest) == 1:
            self._send(200, {"name": rest[0], "type": "file", "format": "text", "content": nb.read(rest[0])})
        elif method == "PUT" and len(rest) == 1:
            content = self._body().get("content")
            if not isinstance(content, str):
                raise NotebookError(400, "content must be text")
            nb.write(rest[0], content)
            self._send(200, {"name": rest[0], "type": "file", "size": len(content.encode())})
        else:
            raise NotebookError(405, f"{method} is not allowed here")


class KernelChannels:
    """One kernel websocket: Jupyter messages in, a simulated kernel's answers out."""

    def __init__(self, notebook: Notebook, ident: str, socket: websocket.Connection):
        self.notebook, self.ident, self.socket = notebook, ident, socket
        self.session = uuid.uuid4().hex

    def serve(self) -> None:
        while True:
            request = jupyter_message(self.socket.receive())
            if request is None:
                continue   # not a Jupyter message: ignored, as a kernel ignores what it cannot read
            answer = {"kernel_info_request": self._kernel_info, "execute_request": self._execute}.get(
                request["header"].get("msg_type"))
            if answer is None:
                continue   # other requests are ignored, as a kernel does
            if self.ident not in self.notebook.kernels:
                self.socket.close(websocket.NORMAL, "the kernel was shut down")
                return
            self._publish(request, "status", {"execution_state": "busy"})
            try:
                reply_type, content = answer(request)
            except NotebookError:   # stopped meanwhile
                self.socket.close(websocket.NORMAL, "the kernel was shut down")
                return
            self._send(request, reply_type, content, request.get("channel") or "shell")
            self._publish(request, "status", {"execution_state": "idle"})

    def _kernel_info(self, request: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return "kernel_info_reply", {
            "status": "ok", "protocol_version": PROTOCOL_VERSION, "implementation": "simulated",
            "implementation_version": "1", "banner": "a simulated kernel: nothing is evaluated",
            "language_info": {"name": "python", "version": "3", "mimetype": "text/x-python",
                              "file_extension": ".py"},
            "help_links": []}

    def _execute(self, request: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        code = request["content"].get("code")
        if not isinstance(code, str):
            return "execute_reply", {"status": "error", "ename": "TypeError", "evalue": "code must be text",
                                     "traceback": [], "execution_count": None}
        count = self.notebook.execute(self.ident, 0.0, 0.0).execution_count   # kernel activity, as the call's
        self._publish(request, "execute_input", {"code": code, "execution_count": count})
        stream, text = simulated_output(code)
        if stream:
            self._publish(request, "stream", {"name": "stdout", "text": text})
        else:
            self._publish(request, "execute_result", {"execution_count": count, "data": {"text/plain": text},
                                                      "metadata": {}})
        return "execute_reply", {"status": "ok", "execution_count": count, "user_expressions": {}, "payload": []}

    def _publish(self, request: dict[str, Any], msg_type: str, content: dict[str, Any]) -> None:
        self._send(request, msg_type, content, "iopub")

    def _send(self, request: dict[str, Any], msg_type: str, content: dict[str, Any], channel: str) -> None:
        header = {"msg_id": uuid.uuid4().hex, "session": self.session, "username": "kernel",
                  "date": _iso(time.monotonic()), "msg_type": msg_type, "version": PROTOCOL_VERSION}
        self.socket.send(json.dumps({"header": header, "parent_header": request["header"], "metadata": {},
                                     "content": content, "buffers": [], "channel": channel}))


def jupyter_message(data: str | bytes) -> dict[str, Any] | None:
    """A Jupyter message from a text frame (JSON) or a binary one (Jupyter's framing: the count of parts,
    their offsets, the JSON first); None when it is none."""
    try:
        if isinstance(data, bytes):
            count = int.from_bytes(data[:4], "big")
            offsets = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(min(count, 2))]
            data = data[offsets[0]: offsets[1] if len(offsets) > 1 else None]
        message = json.loads(data)
    except (ValueError, IndexError):
        return None
    if not isinstance(message, dict) or not isinstance(message.get("header"), dict):
        return None
    if not isinstance(message.get("content", {}), dict):
        return None
    return {**message, "content": message.get("content") or {}}


def simulated_output(code: str) -> tuple[bool, str]:
    """(True, what it prints) or (False, its result's text). Nothing is run: only literals are read."""
    try:
        tree = ast.parse(code)
        last = tree.body[-1].value if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        if (isinstance(last, ast.Call) and isinstance(last.func, ast.Name) and last.func.id == "print"
                and not last.keywords):
            return True, " ".join(str(ast.literal_eval(arg)) for arg in last.args) + "\n"
        if last is not None:
            return False, repr(ast.literal_eval(last))
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        pass
    lines = len([line for line in code.splitlines() if line.strip()])
    return True, f"(simulated) ran {lines} line{'s' if lines != 1 else ''}\n"


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 <= value <= 6400 else None


def prometheus(figures: dict[str, Any]) -> str:
    gpu = figures["gpu"]
    return "\n".join([
        "# TYPE sim_process_cpu_percent gauge", f"sim_process_cpu_percent {figures['cpu']['percent']:g}",
        "# TYPE sim_notebook_kernels gauge", f"sim_notebook_kernels {figures['kernels']}",
        "# TYPE sim_notebook_busy_kernels gauge", f"sim_notebook_busy_kernels {figures['busy_kernels']}",
        "# TYPE sim_notebook_last_kernel_activity_age_seconds gauge",
        f"sim_notebook_last_kernel_activity_age_seconds {figures['last_kernel_activity_age_s']:.3f}",
        "# TYPE sim_gpu_share gauge", f"sim_gpu_share {gpu['share']:g}",
        "# TYPE sim_gpu_utilisation gauge", f"sim_gpu_utilisation {gpu['utilisation']:g}",
        "# TYPE sim_gpu_busy_seconds_total counter", f"sim_gpu_busy_seconds_total {gpu['busy_seconds_total']:.6f}",
        "# TYPE sim_gpu_held_seconds_total counter", f"sim_gpu_held_seconds_total {gpu['held_seconds_total']:.6f}",
    ]) + "\n"


def make_server(args: argparse.Namespace) -> ThreadingHTTPServer:
    base = "/" + args.base_url.strip("/") + "/" if args.base_url.strip("/") else "/"
    home = Path(args.home) if args.home else None
    if home is not None:
        home.mkdir(parents=True, exist_ok=True)
    notebook = Notebook(share=args.gpu, home=home)
    threading.Thread(target=notebook.cpu.run, daemon=True, name="cpu-meter").start()
    attrs = {"notebook": notebook, "base_url": base, "token": args.token, "title": args.title}
    server = ThreadingHTTPServer((args.host, args.port), type("BoundHandler", (Handler,), attrs))
    server.daemon_threads = True
    return server


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed on start)")
    parser.add_argument("--base-url", default="/", help="the path prefix the proxy forwards, e.g. /nb/ws/name/")
    parser.add_argument("--home", default=None, help="the persistent home directory (kept across restarts)")
    parser.add_argument("--gpu", type=float, default=0.5, help="the slice's share of a GPU, e.g. 0.5")
    parser.add_argument("--token", default=os.environ.get("JUPYTER_TOKEN") or None,
                        help="default: $JUPYTER_TOKEN (as Jupyter's images read it), so it is not on the command line")
    parser.add_argument("--title", default="notebook")
    args = parser.parse_args(argv)
    if not 0 < args.gpu <= 64:
        parser.error("--gpu must be above 0")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    server = make_server(args)
    host, port = server.server_address[:2]
    base = server.RequestHandlerClass.base_url  # type: ignore[attr-defined]
    print(json.dumps({"listening": f"http://{host}:{port}{base}", "port": port}), flush=True)
    if os.environ.get(ssh_endpoint.TOKEN_ENV):  # its SSH server, in a thread of this process
        ssh_endpoint.start_in_thread({**os.environ, ssh_endpoint.METRICS_ENV: f"http://{host}:{port}{base}metrics?format=json",
                                      ssh_endpoint.WORKDIR_ENV: os.environ.get(ssh_endpoint.WORKDIR_ENV) or args.home
                                      or os.getcwd()})
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    sys.exit(main())

"""Real local processes for the simulated cluster's replicas (notebooks, model servers, training).

One directory per replica under the runtime root holds `process.json` (pid, command, when, the
process's start time as the kernel counts it) and `output.log` (its stdout and stderr). A server
prints one JSON line `{"listening": URL, ...}` when it is ready; that line is its URL. The records
outlive the worker that started the processes, so a restarted worker finds them again (a pid that
was reused by another program is told apart by its start time). Processes run in their own
session, so stopping one stops what it started too. Standard library only; no Django.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scheduling.backends.base import Endpoint, ReplicaKey, SshEndpoint

log = logging.getLogger(__name__)

RECORD, LOG = "process.json", "output.log"
ROOT, ROOT_ENV = "root", "SIMULATED_ROOT"  # where a replica's mounted files are: its / on a real node
URL_SCAN_BYTES = 16 * 1024  # the ready line comes first; never read a long log to find it
STOP_WAIT_S = 5.0
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
# Children started by this process, kept so that they are reaped (no zombies in a long-lived worker).
_CHILDREN: dict[int, subprocess.Popen] = {}


@dataclass(frozen=True)
class ProcessInfo:
    key: ReplicaKey
    pid: int
    started: float  # epoch seconds, this machine's clock
    alive: bool
    url: str | None  # None until the server said it listens
    token: str
    exit_code: int | None  # known only to the process that started it


def _proc_start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), None where /proc cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    try:
        return int(fields[19])  # field 22 of stat(5), counted after the command name
    except (IndexError, ValueError):
        return None


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:][:1] == "Z"


def _pid_alive(pid: int, ticks: int | None) -> bool:
    child = _CHILDREN.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's process: the pid was reused
    if _is_zombie(pid):
        return False
    now_ticks = _proc_start_ticks(pid)
    return ticks is None or now_ticks is None or now_ticks == ticks


class ProcessRuntime:
    """Start, find and stop one process per replica key under `root`."""

    def __init__(self, root: Path | str):
        self.root = Path(root)

    # -- where -----------------------------------------------------------------------------------
    def folder(self, key: ReplicaKey) -> Path:
        job_id, role, index = key
        return self.root / f"{int(job_id)}-{_SAFE.sub('_', role)[:64]}-{int(index)}"

    def _record(self, key: ReplicaKey) -> dict | None:
        try:
            data = json.loads((self.folder(key) / RECORD).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and isinstance(data.get("pid"), int) else None

    def _records(self) -> list[tuple[ReplicaKey, dict]]:
        found = []
        if not self.root.is_dir():
            return found
        for folder in sorted(self.root.iterdir()):
            try:
                data = json.loads((folder / RECORD).read_text())
                job_id, role, index = data["key"]
                found.append(((int(job_id), str(role), int(index)), data))
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return found

    def keys(self) -> list[ReplicaKey]:
        """Every replica that has a record (running or not)."""
        return [key for key, _ in self._records()]

    def running(self) -> int:
        """How many recorded processes are alive."""
        return sum(1 for _, data in self._records()
                   if isinstance(data.get("pid"), int) and _pid_alive(data["pid"], data.get("ticks")))

    def has(self, key: ReplicaKey) -> bool:
        return self._record(key) is not None

    # -- start ----------------------------------------------------------------------------------
    def start(self, key: ReplicaKey, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              token: str = "", files: Mapping[str, str] | None = None, inherit_environment: bool = True,
              grace_s: float | None = None, drains: bool = False) -> bool:
        """Start the replica's process unless it has one already (running or ended: its record says so
        until stop()). Returns whether it started one now. Does not wait for it to be ready. Its
        environment is this process's plus `env`, or `env` alone without `inherit_environment`.

        `files`: absolute paths (a secret's mountPath and name) to their text, written under the replica's
        `root/` folder, readable by this user only, and named to the process by SIMULATED_ROOT. `grace_s`: how
        long stop() waits after SIGTERM before it kills (default STOP_WAIT_S). `drains`: a server that finishes
        its requests in flight on SIGTERM; stop() does not wait for it (the grace runs in a thread), so its key
        can have a new process at once."""
        folder = self.folder(key)
        if self._record(key) is not None:
            return False
        folder.mkdir(parents=True, exist_ok=True)
        if files:
            env = {**(env or {}), ROOT_ENV: str(self._write_files(folder / ROOT, files))}
        with open(folder / LOG, "wb") as log:
            popen = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=folder, env={**(os.environ if inherit_environment else {}), **(env or {})},
                                     start_new_session=True, close_fds=True)
        _CHILDREN[popen.pid] = popen
        record = {"key": list(key), "pid": popen.pid, "argv": [a for a in argv], "started": time.time(),
                  "ticks": _proc_start_ticks(popen.pid), "token": token}
        if grace_s is not None:
            record["grace_s"] = max(0.0, float(grace_s))
        if drains:
            record["drains"] = True
        tmp = folder / (RECORD + ".tmp")
        tmp.write_text(json.dumps(record))
        tmp.chmod(0o600)  # the token is a secret
        tmp.replace(folder / RECORD)
        return True

    def note(self, key: ReplicaKey, text: str) -> None:
        """Write `text` as the log of a replica that has no process (and no record: it counts for nothing);
        stop() removes it with the folder."""
        if self._record(key) is not None:
            return
        folder = self.folder(key)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / LOG).write_text(text if text.endswith("\n") else text + "\n")

    @staticmethod
    def _write_files(root: Path, files: Mapping[str, str]) -> Path:
        for path, text in files.items():
            target = (root / path.lstrip("/")).resolve()
            if not target.is_relative_to(root.resolve()):
                raise ValueError(f"{path!r} is outside the replica's root")
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
        return root

    # -- read -----------------------------------------------------------------------------------
    def _said(self, key: ReplicaKey, name: str, kind: type):
        """The value of `name` in the first JSON line of the process's log that gives one of type `kind`
        (the process announces its URL and its SSH port so)."""
        try:
            with open(self.folder(key) / LOG, "rb") as log:
                head = log.read(URL_SCAN_BYTES)
        except OSError:
            return None
        for line in head.decode("utf-8", "replace").splitlines():
            if f'"{name}"' not in line:
                continue
            with contextlib.suppress(ValueError):
                said = json.loads(line)
                if isinstance(said, dict) and isinstance(said.get(name), kind):
                    return said[name]
        return None

    def _url(self, key: ReplicaKey) -> str | None:
        return self._said(key, "listening", str)

    def _ssh_port(self, key: ReplicaKey) -> int | None:
        """The port of the replica's SSH server: its JSON line {"ssh": PORT} (scheduling/backends/ssh_endpoint.py)."""
        return self._said(key, "ssh", int)

    def ssh_endpoint(self, key: ReplicaKey) -> SshEndpoint | None:
        info = self.find(key)
        port = self._ssh_port(key) if info is not None and info.alive else None
        return None if port is None else SshEndpoint(host="127.0.0.1", port=port)

    def find(self, key: ReplicaKey) -> ProcessInfo | None:
        record = self._record(key)
        if record is None:
            return None
        pid = record["pid"]
        alive = _pid_alive(pid, record.get("ticks"))
        child = _CHILDREN.get(pid)
        exit_code = child.returncode if child is not None and not alive else None
        return ProcessInfo(key=key, pid=pid, started=float(record.get("started") or 0.0), alive=alive,
                           url=self._url(key), token=str(record.get("token") or ""), exit_code=exit_code)

    def endpoint(self, key: ReplicaKey) -> Endpoint | None:
        """The URL and token of a running replica's server, None before it listens or once it ended."""
        info = self.find(key)
        if info is None or not info.alive or info.url is None:
            return None
        return Endpoint(url=info.url.rstrip("/") + "/", token=info.token)

    def log_tail(self, key: ReplicaKey, lines: int = 200) -> str:
        try:
            text = (self.folder(key) / LOG).read_bytes()[-256 * 1024:].decode("utf-8", "replace")
        except OSError:
            return ""
        kept = text.splitlines()[-lines:] if lines > 0 else []
        return "".join(line + "\n" for line in kept)

    # -- stop -----------------------------------------------------------------------------------
    def stop(self, key: ReplicaKey, wait_s: float | None = None) -> None:
        """Stop the replica's process (its whole session): SIGTERM, then SIGKILL after `wait_s` (default: the
        grace it was started with, else STOP_WAIT_S) and forget its record. Idempotent."""
        record = self._record(key)
        if record is not None:
            grace = record.get("grace_s")
            wait = wait_s if wait_s is not None else grace if isinstance(grace, int | float) else STOP_WAIT_S
            if record.get("drains") and wait_s is None:
                threading.Thread(target=self._terminate, args=(record["pid"], record.get("ticks"), wait),
                                 name="simulated-drain", daemon=True).start()
            else:
                self._terminate(record["pid"], record.get("ticks"), wait)
        shutil.rmtree(self.folder(key), ignore_errors=True)

    @staticmethod
    def _terminate(pid: int, ticks: int | None, wait_s: float) -> None:
        child = _CHILDREN.pop(pid, None)
        if child is None and not _pid_alive(pid, ticks):
            return
        for sig, wait in ((signal.SIGTERM, wait_s), (signal.SIGKILL, STOP_WAIT_S)):   # the grace, then the kill
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, sig)
            if child is not None:
                try:
                    child.wait(wait)
                    return
                except subprocess.TimeoutExpired:
                    continue
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if not _pid_alive(pid, ticks):
                    return
                time.sleep(0.05)

    def stop_all(self) -> None:
        """Every process under the root (tests, and a simulated cluster being torn down)."""
        for key in self.keys():
            self.stop(key, wait_s=2.0)


class Starter:
    """Runs start jobs one after another in one daemon thread of this process, so that the caller (the
    scheduling cycle) does not wait while processes are forked; one job at a time keeps a cap counted
    by the jobs right. A job that raises is logged; the ones after it still run."""

    def __init__(self):
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # a forked worker has none of the parent's thread

    def _reset(self) -> None:
        self._changed = threading.Condition()
        self._jobs: deque[Callable[[], None]] = deque()
        self._unfinished = 0
        self._thread: threading.Thread | None = None

    def submit(self, job: Callable[[], None]) -> None:
        with self._changed:
            self._jobs.append(job)
            self._unfinished += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="simulated-process-starts", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            with self._changed:
                if not self._jobs:
                    self._thread = None
                    return
                job = self._jobs.popleft()
            try:
                job()
            except Exception:
                log.exception("starting simulated processes failed")
            finally:
                with self._changed:
                    self._unfinished -= 1
                    self._changed.notify_all()

    def wait(self, timeout: float = 30.0) -> bool:
        """Until every job submitted so far has run (tests; a worker never waits). False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: self._unfinished == 0, timeout)


STARTS = Starter()  # one per process: every backend's training starts, in order

"""A replica's SSH server (asyncssh): what the SSH gateway connects to.

On the simulated cluster, a notebook server runs it in a thread of its own process (`start_in_thread`); a
training process, which imports no package, starts it as a child (`python -m scheduling.backends.ssh_endpoint`).
Either way it prints one JSON line {"ssh": PORT} to the replica's log (processes.py reads it back). On Kubernetes
it is the pod's SSH sidecar (`--host 0.0.0.0 --port 2222 --authorized-keys FILE`: scheduling/backends/kubernetes/
manifests.py), which also takes the submitter's keys; the chart's network policy lets only the gateway reach it.

It takes one password, the replica's SSH token ($SIM_SSH_TOKEN, which the gateway derives too), and gives:
a real `bash` (with a terminal when asked) starting in the job's working directory with the job's environment,
secrets included, and `sim-smi` on its PATH; exec; SFTP (and scp) rooted at the working directory; local
port forwarding to the replica's own loopback ports. Nothing else: no agent, no remote forwarding.
Development only: the shell runs as the platform's own user, and volumes are path mappings, not mounts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import hmac
import json
import os
import pty
import signal
import struct
import sys
import termios
import threading
from pathlib import Path

import asyncssh

TOKEN_ENV = "SIM_SSH_TOKEN"
WORKDIR_ENV = "SIM_WORKDIR"
JOB_ENV = "SIM_JOB_ENV"  # the names of the job's own variables: the shell gets these (and a base), nothing else
BASE_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "USER", "LOGNAME", "SHELL", "TMPDIR")
SHARE_ENV, MODEL_ENV, MEMORY_ENV, METRICS_ENV = "SIM_GPU_SHARE", "SIM_GPU_MODEL", "SIM_GPU_MEMORY_MIB", "SIM_SMI_METRICS"
LOOPBACK = ("localhost", "127.0.0.1", "::1")
HIDDEN = (TOKEN_ENV,)  # never in the shell's environment

SIM_SMI = r'''#!{python} -IS
"""sim-smi: the simulated GPU slice's figures, laid out as nvidia-smi prints them."""
import json, os, time, urllib.request
share = float(os.environ.get("{share}") or 1)
model = os.environ.get("{model}") or "Simulated GPU"
memory = int(os.environ.get("{memory}") or 81920)
util = 0.0
url = os.environ.get("{metrics}")
if url:
    try:
        headers = {{"Authorization": "token " + os.environ.get("JUPYTER_TOKEN", "")}}
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2) as answer:
            util = float(json.load(answer)["gpu"]["utilisation"])
    except Exception:
        pass
used = int(memory * share * (0.1 + 0.8 * util))
print(time.strftime("%a %b %d %H:%M:%S %Y"))
print("+-----------------------------------------------------------------------------------------+")
print("| NVIDIA-SMI (simulated)           Driver Version: sim            CUDA Version: sim       |")
print("|-----------------------------------------+------------------------+----------------------+")
print("| GPU  Name                              | Memory-Usage           | GPU-Util  Slice      |")
print("|=========================================+========================+======================|")
print("|   0  {{:<35}}| {{:>7}}MiB / {{:>7}}MiB | {{:>6.0f}}%   {{:>5.2f}} GPU  |".format(
    model[:35], used, int(memory * share), util * 100, share))
print("+-----------------------------------------+------------------------+----------------------+")
'''


def write_sim_smi(bin_dir: Path) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "sim-smi"
    script.write_text(SIM_SMI.format(python=sys.executable, share=SHARE_ENV, model=MODEL_ENV, memory=MEMORY_ENV,
                                     metrics=METRICS_ENV))
    script.chmod(0o755)
    return script


def shell_environment(environ: dict[str, str], bin_dir: Path, workdir: Path) -> dict[str, str]:
    """The job's variables (secrets included) and a base; not the rest of the process's environment (a notebook
    process inherits the worker's), never the SSH token."""
    names = set(filter(None, environ.get(JOB_ENV, "").split(","))) if JOB_ENV in environ else set(environ)
    env = {k: v for k, v in environ.items() if (k in names or k in BASE_ENV or k.startswith("SIM_GPU_")
                                                or k == METRICS_ENV) and k not in HIDDEN}
    env["PATH"] = f"{bin_dir}:{env.get('PATH') or '/usr/local/bin:/usr/bin:/bin'}"
    env["PWD"] = str(workdir)
    env.setdefault("HOME", str(workdir))
    return env


def _set_size(fd: int, size: tuple[int, int, int, int]) -> None:
    cols, rows, width, height = size
    with contextlib.suppress(OSError):
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows or 24, cols or 80, width, height))


class Replica:
    def __init__(self, *, token: str, workdir: Path, env: dict[str, str]):
        self.token, self.workdir, self.env = token, workdir, env

    # -- sessions --------------------------------------------------------------------------------
    async def handle(self, process: asyncssh.SSHServerProcess) -> None:
        command = process.command
        argv = ["bash", "-c", command] if command else ["bash", "-i"] if process.get_terminal_type() else ["bash"]
        env = dict(self.env)
        if process.get_terminal_type():
            env["TERM"] = process.get_terminal_type()
            code = await self._with_terminal(process, argv, env)
        else:
            code = await self._with_pipes(process, argv, env)
        process.exit(code if code >= 0 else 128 - code)

    async def _with_pipes(self, process, argv, env) -> int:
        proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                    cwd=self.workdir, env=env, start_new_session=True)

        async def copy_out(source, target):
            while data := await source.read(65536):
                target.write(data)

        async def copy_in():
            with contextlib.suppress(Exception):
                while data := await process.stdin.read(65536):
                    proc.stdin.write(data)
                    await proc.stdin.drain()
            with contextlib.suppress(Exception):
                proc.stdin.close()

        feeding = asyncio.ensure_future(copy_in())
        await asyncio.gather(copy_out(proc.stdout, process.stdout), copy_out(proc.stderr, process.stderr))
        code = await proc.wait()
        feeding.cancel()
        return code

    async def _with_terminal(self, process, argv, env) -> int:
        master, slave = pty.openpty()
        _set_size(slave, process.get_terminal_size())

        def controlling_terminal():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        proc = await asyncio.create_subprocess_exec(*argv, stdin=slave, stdout=slave, stderr=slave, cwd=self.workdir,
                                                    env=env, preexec_fn=controlling_terminal)
        os.close(slave)
        loop, done = asyncio.get_running_loop(), asyncio.Event()

        def readable():
            try:
                data = os.read(master, 65536)
            except OSError:
                data = b""
            if data:
                process.stdout.write(data)
            else:
                loop.remove_reader(master)
                done.set()

        loop.add_reader(master, readable)

        async def feed():
            while True:
                try:
                    data = await process.stdin.read(65536)
                except asyncssh.TerminalSizeChanged as changed:
                    _set_size(master, (changed.width, changed.height, changed.pixwidth, changed.pixheight))
                    continue
                except (asyncssh.BreakReceived, asyncssh.SignalReceived):
                    continue
                if not data:
                    return
                with contextlib.suppress(OSError):
                    os.write(master, data)

        feeding = asyncio.ensure_future(feed())
        await done.wait()
        code = await proc.wait()
        feeding.cancel()
        os.close(master)
        return code


class EndpointServer(asyncssh.SSHServer):
    def __init__(self, replica: Replica):
        self.replica = replica

    def begin_auth(self, username: str) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return True

    def validate_password(self, username: str, password: str) -> bool:
        return bool(self.replica.token) and hmac.compare_digest(password.encode(), self.replica.token.encode())

    def connection_requested(self, dest_host, dest_port, orig_host, orig_port):
        if dest_host not in LOOPBACK:   # the replica's own ports only: never a way into the network
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED,
                                            "only the replica's own ports (localhost) can be forwarded")
        return True

    def server_requested(self, listen_host, listen_port):
        return False


async def serve(*, token: str, workdir: Path, env: dict[str, str], host: str = "127.0.0.1",
                port: int = 0, authorized_keys: str | None = None) -> tuple[asyncssh.SSHAcceptor, int]:
    """`authorized_keys`: a file of public keys accepted besides the token (None: the token only)."""
    replica = Replica(token=token, workdir=workdir, env=env)
    keys = {"authorized_client_keys": authorized_keys} if authorized_keys else {}
    acceptor = await asyncssh.create_server(
        lambda: EndpointServer(replica), host, port, server_host_keys=[asyncssh.generate_private_key("ssh-ed25519")],
        **keys,
        process_factory=replica.handle, encoding=None, line_editor=False, agent_forwarding=False,
        x11_forwarding=False, allow_scp=True,
        sftp_factory=lambda chan: asyncssh.SFTPServer(chan, chroot=str(workdir).encode()))
    return acceptor, acceptor.sockets[0].getsockname()[1]


def environment_for(environ: dict[str, str], bin_dir: Path) -> tuple[str, Path, dict[str, str]]:
    """(token, working directory, the shell's environment) from the replica's environment."""
    workdir = Path(environ.get(WORKDIR_ENV) or os.getcwd())
    workdir.mkdir(parents=True, exist_ok=True)
    write_sim_smi(bin_dir)
    return environ.get(TOKEN_ENV, ""), workdir, shell_environment(environ, bin_dir, workdir)


def start_in_thread(environ: dict[str, str] | None = None, bin_dir: Path | None = None) -> int | None:
    """Serve in a daemon thread of this process (a notebook's); prints {"ssh": PORT} and returns the port.
    None (and nothing served) without a token."""
    environ = dict(os.environ if environ is None else environ)
    if not environ.get(TOKEN_ENV):
        return None
    token, workdir, env = environment_for(environ, bin_dir or Path.cwd() / "bin")
    ready: dict[str, int] = {}
    started = threading.Event()

    def run():
        loop = asyncio.new_event_loop()
        _, ready["port"] = loop.run_until_complete(serve(token=token, workdir=workdir, env=env))
        started.set()
        loop.run_forever()

    threading.Thread(target=run, name="ssh-endpoint", daemon=True).start()
    started.wait(30)
    port = ready.get("port")
    if port is not None:
        print(json.dumps({"ssh": port}), flush=True)
    return port


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a simulated replica's SSH server")
    parser.add_argument("--bin", default=str(Path.cwd() / "bin"), help="where sim-smi is written (first on PATH)")
    parser.add_argument("--host", default="127.0.0.1", help="the address it listens on")
    parser.add_argument("--port", type=int, default=0, help="the port it listens on (0: any free one)")
    parser.add_argument("--authorized-keys", default=None, help="a file of public keys accepted besides the token")
    args = parser.parse_args(argv)
    token, workdir, env = environment_for(dict(os.environ), Path(args.bin))
    if not token:
        print(f"{TOKEN_ENV} is not set: no SSH server", file=sys.stderr)
        return 2

    async def run():
        keys = args.authorized_keys if args.authorized_keys and Path(args.authorized_keys).is_file() else None
        _, port = await serve(token=token, workdir=workdir, env=env, host=args.host, port=args.port,
                              authorized_keys=keys)
        print(json.dumps({"ssh": port}), flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        parent = os.getppid()
        while not stop.is_set():   # ends with the training process that started it
            if os.getppid() != parent:
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The SSH gateway: `ssh -p 2222 <workspace>.<name>[.<replica>]@<gateway>` into a running notebook or job.

    python -m portal.ssh_gateway [--host 0.0.0.0] [--port $SSH_GATEWAY_PORT]

An asyncssh server (`make run` starts it under supervisord). A client signs in with one of its user's SSH keys
(portal.ssh_keys); the gateway then checks that the user may reach the target (portal.ssh_access: owner or
member, SSH on in the workspace, the job running), signs in to the replica's own SSH server with the replica's
token and relays, channel by channel: shells and commands (with their terminal), subsystems (SFTP, so editors
copy files) and local port forwarding (`-L`). Agent forwarding, X11 and remote forwarding (`-R`) are refused.
Each connection is one audited SshSession (bytes counted both ways, written every few seconds); refused
attempts are recorded and rate limited per source address and per key. The host key is made once and kept
(VAR_DIR/ssh_host_ed25519_key, or SSH_HOST_KEY_PATH: a Kubernetes Secret).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys

import asyncssh
from asgiref.sync import sync_to_async

log = logging.getLogger("portal.ssh_gateway")
FLUSH_S = 5.0  # how often a session's byte counts reach the database
UPSTREAM_TIMEOUT_S = 15.0
LOOPBACK = ("localhost", "127.0.0.1", "::1")


def _db(function):
    return sync_to_async(function, thread_sensitive=True)


def load_host_key(path) -> asyncssh.SSHKey:
    """The gateway's host key, made on first start and kept (readable by this user only)."""
    try:
        return asyncssh.read_private_key(str(path))
    except (OSError, asyncssh.KeyImportError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = asyncssh.generate_private_key("ssh-ed25519")
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(key.export_private_key())
    tmp.replace(path)
    return key


class Counter:
    """Bytes in (from the user) and out (from the replica) not yet written to the session's row."""

    def __init__(self):
        self.bytes_in = self.bytes_out = 0

    def take(self) -> tuple[int, int]:
        taken = (self.bytes_in, self.bytes_out)
        self.bytes_in = self.bytes_out = 0
        return taken


class UpstreamSession(asyncssh.SSHClientSession):
    """The replica's side of one relayed channel: what it sends goes to the user's channel."""

    def __init__(self, down: RelaySession):
        self.down = down

    def data_received(self, data, datatype):
        self.down.gateway.counter.bytes_out += len(data)
        self.down.chan.write(data, datatype)

    def eof_received(self):
        with contextlib.suppress(Exception):
            self.down.chan.write_eof()
        return True

    def connection_lost(self, exc):
        up = self.down.up_chan
        signal = up.get_exit_signal() if up else None
        with contextlib.suppress(Exception):
            if signal:
                self.down.chan.exit_with_signal(signal[0], signal[1], signal[2])
            else:
                status = up.get_exit_status() if up else None
                if status is None:   # a subsystem (SFTP) that ended cleanly says none; sshd would say 0
                    status = 0 if self.down.subsystem and exc is None else 255
                self.down.chan.exit(status)


class RelaySession(asyncssh.SSHServerSession):
    """The user's side of one session channel: a shell, a command or a subsystem, opened alike on the replica."""

    def __init__(self, gateway: GatewayServer):
        self.gateway = gateway
        self.chan = self.up_chan = None
        self.command = self.subsystem = None
        self.term = None
        self.env: dict[str, str] = {}
        self.pending: list[tuple[bytes, int | None]] = []
        self.eof = False

    def connection_made(self, chan):
        self.chan = chan

    def pty_requested(self, term_type, term_size, term_modes):
        self.term = (term_type, term_size, term_modes)
        return True

    def shell_requested(self):
        return True

    def exec_requested(self, command):
        self.command = command
        return True

    def subsystem_requested(self, subsystem):
        self.subsystem = subsystem
        return True

    def session_started(self):
        asyncio.ensure_future(self._open())

    async def _open(self):
        await self.gateway.decided.wait()
        if self.gateway.refusal or self.gateway.target is None:
            self.chan.write_stderr(f"gateway: {self.gateway.refusal or 'not allowed'}\r\n".encode())
            self.chan.exit(1)
            return
        try:
            upstream = await self.gateway.upstream()
            options = {}
            if self.term:
                options = {"term_type": self.term[0], "term_size": self.term[1], "term_modes": self.term[2]}
            self.up_chan, _ = await upstream.create_session(lambda: UpstreamSession(self), command=self.command,
                                                            subsystem=self.subsystem, encoding=None, **options)
        except (TimeoutError, OSError, asyncssh.Error) as error:
            log.warning("ssh gateway: the replica's SSH server refused a channel: %s", error)
            self.chan.write_stderr(b"gateway: the replica's SSH server does not answer; try again in a moment\r\n")
            self.chan.exit(255)
            return
        for data, datatype in self.pending:
            self.up_chan.write(data, datatype)
        if self.eof:
            self.up_chan.write_eof()

    def data_received(self, data, datatype):
        self.gateway.counter.bytes_in += len(data)
        if self.up_chan is None:
            self.pending.append((data, datatype))
        else:
            self.up_chan.write(data, datatype)

    def eof_received(self):
        if self.up_chan is None:
            self.eof = True
        else:
            self.up_chan.write_eof()
        return True

    def terminal_size_changed(self, width, height, pixwidth, pixheight):
        if self.up_chan is not None:
            self.up_chan.change_terminal_size(width, height, pixwidth, pixheight)

    def signal_received(self, signal):
        if self.up_chan is not None:
            self.up_chan.send_signal(signal)

    def break_received(self, msec):
        if self.up_chan is not None:
            self.up_chan.send_break(msec)
        return True

    def connection_lost(self, exc):
        if self.up_chan is not None:
            self.up_chan.close()


class GatewayServer(asyncssh.SSHServer):
    """One client connection: who it is (its key), where it goes (its target), its audit row."""

    def __init__(self):
        self.conn = None
        self.source = ""
        self.username = ""
        self.fingerprint = ""
        self.key = None
        self.target = None
        self.refusal = ""
        self.limited = False
        self.session_id: int | None = None
        self.counter = Counter()
        self._upstream: asyncio.Future | None = None
        self._flusher: asyncio.Task | None = None

    # -- connection ------------------------------------------------------------------------------
    def connection_made(self, conn):
        self.conn = conn
        self.decided = asyncio.Event()  # auth_completed runs on: channels wait for its answer
        self.source = (conn.get_extra_info("peername") or ("",))[0]

    def connection_lost(self, exc):
        asyncio.ensure_future(self._ended())

    async def _ended(self):
        from portal import ssh_access

        if self._flusher is not None:
            self._flusher.cancel()
        if self._upstream is not None and self._upstream.done() and not self._upstream.exception():
            self._upstream.result().close()
        if self.session_id is not None:
            await _db(ssh_access.close_session)(self.session_id, *self.counter.take())
        elif self.key is None and not self.limited and (self.fingerprint or self.username):
            await _db(ssh_access.record_failure)(self.source, self.fingerprint, self.username, "key refused")

    # -- authentication --------------------------------------------------------------------------
    async def begin_auth(self, username):
        from portal import ssh_access

        self.username = username
        if await _db(ssh_access.is_limited)(self.source):
            self.limited = True
            self.conn.send_auth_banner("gateway: too many refused attempts from your address; try again later\r\n")
        return True

    def password_auth_supported(self):
        return False

    def kbdint_auth_supported(self):
        return False

    def public_key_auth_supported(self):
        return True

    async def validate_public_key(self, username, key):
        from portal import ssh_access

        if self.limited:
            return False
        fingerprint = key.get_fingerprint("sha256")
        self.fingerprint = fingerprint
        if await _db(ssh_access.is_limited)(self.source, fingerprint):
            self.limited = True
            self.conn.send_auth_banner("gateway: too many refused attempts with this key; try again later\r\n")
            await _db(ssh_access.record_failure)(self.source, fingerprint, username, "rate limited")
            return False
        found = await _db(ssh_access.key_owner)(fingerprint)
        return found is not None

    async def auth_completed(self):
        try:
            await self._decide()
        finally:
            self.decided.set()

    async def _decide(self):
        """The key proved itself: whose it is, and whether its user may reach the target."""
        from portal import ssh_access

        self.key = await _db(ssh_access.authenticate)(self.fingerprint)
        if self.key is None:   # revoked or deactivated between the offer and the signature
            self.refusal = "this key is not accepted"
            return
        decision = await _db(ssh_access.decide)(self.key.user, self.username)
        if decision.target is None:
            self.refusal = decision.refusal
            await _db(ssh_access.record_failure)(self.source, self.fingerprint, self.username, "target refused")
            log.info("ssh gateway: %s refused %s from %s", self.key.user.username, self.username, self.source)
            return
        self.target = decision.target
        self.session_id = await _db(ssh_access.open_session)(self.key, self.target, self.source)
        self._flusher = asyncio.ensure_future(self._flush())

    async def _flush(self):
        from portal import ssh_access

        while True:
            await asyncio.sleep(FLUSH_S)
            taken = self.counter.take()
            if any(taken):
                await _db(ssh_access.count_bytes)(self.session_id, *taken)

    # -- the replica ------------------------------------------------------------------------------
    def upstream(self):
        """One connection to the replica's SSH server per client connection, opened on first use."""
        if self._upstream is None:
            self._upstream = asyncio.ensure_future(asyncio.wait_for(asyncssh.connect(
                self.target.endpoint.host, self.target.endpoint.port, username="gateway",
                password=self.target.token, known_hosts=None, client_keys=None, agent_path=None,
                preferred_auth="password"), UPSTREAM_TIMEOUT_S))
        return asyncio.shield(self._upstream)

    # -- channels --------------------------------------------------------------------------------
    def session_requested(self):
        return RelaySession(self)

    def connection_requested(self, dest_host, dest_port, orig_host, orig_port):
        if dest_host not in LOOPBACK:   # the replica's own ports only, never a way into the cluster's network
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED,
                                            "gateway: only the replica's own ports (localhost:PORT) can be forwarded")
        if self.decided.is_set() and (self.refusal or self.target is None):
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED,
                                            f"gateway: {self.refusal or 'not allowed'}")
        return self._forward(dest_host, dest_port)

    def _forward(self, dest_host, dest_port):
        counter = self.counter

        async def pump(source, target, outbound: bool):
            try:
                while data := await source.read(65536):
                    if outbound:
                        counter.bytes_in += len(data)
                    else:
                        counter.bytes_out += len(data)
                    target.write(data)
            except (OSError, asyncssh.Error):
                pass
            with contextlib.suppress(Exception):
                target.write_eof()

        async def handler(reader, writer):
            await self.decided.wait()
            if self.refusal or self.target is None:
                writer.close()
                return
            try:
                upstream = await self.upstream()
                up_reader, up_writer = await upstream.open_connection(dest_host, dest_port, encoding=None)
            except (TimeoutError, OSError, asyncssh.Error) as error:
                log.info("ssh gateway: forwarding to %s:%s refused: %s", dest_host, dest_port, error)
                writer.close()
                return
            await asyncio.gather(pump(reader, up_writer, True), pump(up_reader, writer, False))
            writer.close()
            up_writer.close()

        return handler

    def server_requested(self, listen_host, listen_port):
        return False   # no remote forwarding (-R)


async def serve(host: str, port: int) -> asyncssh.SSHAcceptor:
    from portal import ssh_access

    key = load_host_key(ssh_access.host_key_path())
    return await asyncssh.create_server(
        GatewayServer, host, port, server_host_keys=[key], encoding=None, agent_forwarding=False,
        x11_forwarding=False, allow_scp=False, login_timeout=30, keepalive_interval=30,
        server_version="gpu-platform-gateway")


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from django.conf import settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=os.environ.get("SSH_GATEWAY_LISTEN", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=settings.SSH_GATEWAY_PORT)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("asyncssh").setLevel(logging.WARNING)

    async def run():
        acceptor = await serve(args.host, args.port)
        bound = acceptor.sockets[0].getsockname()[1]
        from portal import ssh_access

        print(f"ssh gateway listening on {args.host}:{bound} (host key {ssh_access.host_fingerprint()})", flush=True)
        await acceptor.wait_closed()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())

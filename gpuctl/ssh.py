"""SSH through the platform's gateway: `gpuctl ssh-key add|list|rm` (the account's keys, over
/api/v1/account/ssh-keys/), `gpuctl ssh JOB [--replica R]` (a shell: runs the system `ssh`), `gpuctl ssh-config`
(a ~/.ssh/config block per running notebook and job, `Host <workspace>.<name>`, for VS Code's and PyCharm's remote
explorers) and `gpuctl port-forward JOB 6006[:6006]` (`ssh -N -L`). The gateway's host and port come from
/api/v1/account/ssh-gateway/; $GPUCTL_SSH names another ssh program."""

from __future__ import annotations

import argparse
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuctl.errors import EXIT_OK, CliError

KEYS = "/api/v1/account/ssh-keys/"
GATEWAY = "/api/v1/account/ssh-gateway/"
JOBS = "/api/v1/jobs/"
RUNNING = "Running"
DEFAULT_KEYS = ("id_ed25519.pub", "id_rsa.pub")


def _home(run) -> Path:
    return Path(run.env.get("HOME") or os.path.expanduser("~"))


def _program(run) -> str:
    return run.env.get("GPUCTL_SSH") or "ssh"


# --------------------------------------------------------------------------- keys

def cmd_key_add(run) -> int:
    path = Path(run.args.file) if run.args.file else next(
        (p for p in (_home(run) / ".ssh" / n for n in DEFAULT_KEYS) if p.is_file()), None)
    if path is None:
        raise CliError("no public key given and none in ~/.ssh (make one: ssh-keygen -t ed25519)")
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise CliError(f"cannot read {path}: {error}") from None
    name = run.args.name or (text.split()[2] if len(text.split()) > 2 else path.stem)
    made = run.api.call("POST", KEYS, body={"name": name[:100], "public_key": text}, not_found="the server has no SSH keys API")
    if run.structured:
        run.emit(made)
    else:
        run.print(run.say("SSH key {name} added ({fingerprint})", name=made["name"], fingerprint=made["fingerprint"]))
    return EXIT_OK


def cmd_key_list(run) -> int:
    keys = run.api.call("GET", KEYS, not_found="the server has no SSH keys API")
    rows = [[k["id"], k["name"], k["type"], k["fingerprint"], k["created"], k["last_used"] or "-"] for k in keys]
    run.listing(keys, rows, ["ID", "NAME", "TYPE", "FINGERPRINT", "ADDED (UTC)", "LAST USED (UTC)"],
                empty=run.say("no SSH keys yet (gpuctl ssh-key add)"), right=(0,))
    return EXIT_OK


def cmd_key_rm(run) -> int:
    for key_id in run.args.ids:
        run.api.call("DELETE", f"{KEYS}{key_id}/", not_found=f"you have no SSH key {key_id}")
        run.print(run.say("SSH key {id} deleted", id=key_id))
    return EXIT_OK


# --------------------------------------------------------------------------- the gateway

def _gateway(run) -> dict[str, Any]:
    return run.api.call("GET", GATEWAY, not_found="the server has no SSH gateway")


def _running(run) -> list[dict]:
    params = {"state": RUNNING, **({"workspace": run.settings.workspace} if run.settings.workspace else {})}
    return [j for j in run.api.get_all(JOBS, params=params, not_found="no such workspace")
            if j.get("state") == RUNNING and j.get("ssh")]   # its kind runs an SSH server


def find_job(run, ref: str) -> dict:
    """The running job `ref` names: an id, or a name (in -w WORKSPACE, else in any of the caller's)."""
    if ref.isdigit():
        job = run.api.call("GET", f"{JOBS}{ref}/", not_found=f"no such job: {ref}")
        if job.get("state") != RUNNING:
            raise CliError(f"job {ref} ({job.get('name')}) is {job.get('state')}: only a running job takes SSH")
        return job
    found = [j for j in _running(run) if j["name"] == ref]
    if not found:
        where = f" in {run.settings.workspace}" if run.settings.workspace else ""
        raise CliError(f"no running notebook or job named {ref}{where} (gpuctl ssh-config lists them)")
    if len({j["workspace"] for j in found}) > 1:
        spaces = ", ".join(sorted({j["workspace"] for j in found}))
        raise CliError(f"jobs named {ref} run in several of your workspaces ({spaces}): choose one with -w")
    return found[0]


def target(job: dict, replica: str | None = None) -> str:
    return f"{job['workspace']}.{job['name']}" + (f".{replica}" if replica else "")


def _base(run, gateway: dict) -> list[str]:
    return [_program(run), "-p", str(gateway["port"])]


def _exec(run, argv: list[str]) -> int:
    try:
        return subprocess.call(argv)
    except FileNotFoundError:
        raise CliError(f"{argv[0]} is not installed (Debian: apt install openssh-client)") from None


def _options_after_job(args) -> list[str]:
    """The command after JOB, with --replica and -i given after JOB taken out of it (argparse leaves them there)."""
    rest = list(args.command)
    while rest and rest[0] in ("--replica", "-i", "--identity") and len(rest) > 1:
        setattr(args, "replica" if rest[0] == "--replica" else "identity", rest[1])
        rest = rest[2:]
    return rest[1:] if rest[:1] == ["--"] else rest


def cmd_ssh(run) -> int:
    job = find_job(run, run.args.job)
    gateway = _gateway(run)
    command = _options_after_job(run.args)
    argv = [*_base(run, gateway), *(["-i", run.args.identity] if run.args.identity else []),
            f"{target(job, run.args.replica)}@{gateway['host']}", *command]
    return _exec(run, argv)


def parse_ports(text: str) -> tuple[int, int]:
    """6006 or LOCAL:REMOTE -> (local, remote)."""
    parts = text.split(":")
    try:
        ports = [int(p) for p in parts]
    except ValueError:
        ports = []
    if len(ports) not in (1, 2) or not all(0 < p < 65536 for p in ports):
        raise CliError(f"{text!r} is not a port: PORT or LOCAL:REMOTE, each 1-65535")
    return (ports[0], ports[-1])


def cmd_port_forward(run) -> int:
    local, remote = parse_ports(run.args.ports)
    job = find_job(run, run.args.job)
    gateway = _gateway(run)
    run.note(run.say("forwarding localhost:{local} to port {remote} of {target}; Ctrl-C stops", local=local,
                     remote=remote, target=target(job, run.args.replica)))
    argv = [*_base(run, gateway), "-N", "-o", "ExitOnForwardFailure=yes", "-L", f"{local}:localhost:{remote}",
            f"{target(job, run.args.replica)}@{gateway['host']}"]
    return _exec(run, argv)


def config_blocks(jobs: list[dict], gateway: dict, identity: str | None = None) -> str:
    blocks = []
    fingerprint = gateway.get("host_key_fingerprint") or ""
    for job in sorted(jobs, key=lambda j: (j["workspace"], j["name"])):
        name = target(job)
        lines = [f"Host {name}", f"    HostName {gateway['host']}", f"    Port {gateway['port']}", f"    User {name}"]
        if identity:
            lines.append(f"    IdentityFile {identity}")
        if fingerprint:
            lines.insert(1, f"    # the gateway's host key: {fingerprint}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + ("\n" if blocks else "")


def cmd_ssh_config(run) -> int:
    text = config_blocks(_running(run), _gateway(run), run.args.identity)
    if not text:
        run.note(run.say("no running notebooks or jobs to connect to"))
    run.out.write(text)
    return EXIT_OK


def add_ssh_commands(commands, command: Callable[..., argparse.ArgumentParser], add_output: Callable[..., Any]) -> None:
    keys = command(commands, "ssh-key", None, "add, list or delete your SSH keys for the gateway")
    verbs = keys.add_subparsers(dest="ssh_key_command", required=True, metavar="ACTION",
                                parser_class=commands._parser_class)
    add = command(verbs, "add", cmd_key_add, "add a public key (default: ~/.ssh/id_ed25519.pub)")
    add.add_argument("file", nargs="?", metavar="FILE", help="the .pub file")
    add.add_argument("--name", help="default: the key's comment")
    add_output(add)
    listing = command(verbs, "list", cmd_key_list, "your SSH keys, with their fingerprints and last use")
    add_output(listing, headers=True)
    rm = command(verbs, "rm", cmd_key_rm, "delete keys: the gateway refuses them from now on")
    rm.add_argument("ids", nargs="+", type=int, metavar="KEY_ID")

    ssh = command(commands, "ssh", cmd_ssh, "open a shell (or run a command) in a running notebook or job")
    ssh.add_argument("job", metavar="JOB", help="its name (in -w WORKSPACE) or id")
    ssh.add_argument("--replica", metavar="R", help="e.g. worker-1 (default: the first)")
    ssh.add_argument("-i", "--identity", metavar="KEY", help="the private key (default: ssh's)")
    ssh.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                     help="run this instead of a shell")

    config = command(commands, "ssh-config", cmd_ssh_config,
                     "print a ~/.ssh/config block per running notebook and job (Host <workspace>.<name>)")
    config.add_argument("-i", "--identity", metavar="KEY", help="add IdentityFile KEY to each block")

    forward = command(commands, "port-forward", cmd_port_forward,
                      "forward a local port to a port of a running notebook or job, over the gateway")
    forward.add_argument("job", metavar="JOB", help="its name (in -w WORKSPACE) or id")
    forward.add_argument("ports", metavar="PORT[:REMOTE]", help="6006, or LOCAL:REMOTE")
    forward.add_argument("--replica", metavar="R", help="e.g. worker-1 (default: the first)")

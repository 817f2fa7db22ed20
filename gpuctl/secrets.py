"""`gpuctl secret set|list|rm` and `gpuctl registry add|list|rm`: a workspace's secrets and registry credentials
(in -w WORKSPACE, else the caller's only one), over `/api/v1/workspaces/{slug}/secrets/` and `/registries/`.

A value is never an argument (it would show in the shell's history and the process list): `secret set` reads
it from --from-file or standard input (one trailing newline dropped), or asks for it on a terminal; `registry
add` reads the password the same way (--password-stdin, as `docker login` does). The API never gives a value
back, so neither does gpuctl."""

from __future__ import annotations

import argparse
import getpass
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from gpuctl.completion import FILES
from gpuctl.errors import EXIT_OK, CliError
from gpuctl.inputs import chosen_workspace


def _base(run, what: str) -> tuple[str, str]:
    workspace = chosen_workspace(run)
    return workspace, f"/api/v1/workspaces/{quote(workspace)}/{what}/"


def _read_value(run, path: str | None, prompt: str) -> str:
    """From a file (verbatim), else standard input (without its one trailing newline), else a hidden prompt."""
    if path and path != "-":
        try:
            return Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise CliError(f"cannot read {path}: no such file") from None
        except UnicodeDecodeError:
            raise CliError(f"{path}: not UTF-8 text") from None
        except OSError as error:
            raise CliError(f"cannot read {path}: {error.strerror or error}") from None
    if path != "-" and run.stdin.isatty():
        return getpass.getpass(prompt)
    text = run.stdin.read()
    return text[:-1] if text.endswith("\n") else text


def cmd_secret_set(run) -> int:
    workspace, base = _base(run, "secrets")
    value = _read_value(run, run.args.from_file, run.say("value of {name}: ", name=run.args.name))
    row = run.api.call("POST", base, body={"name": run.args.name, "value": value},
                       not_found=f"no such workspace: {workspace}")
    if run.structured:
        run.emit(row)
    else:
        run.print(run.say("secret {name} set in {workspace} ({size} bytes)", name=row["name"], workspace=workspace,
                          size=row["size"]))
    return EXIT_OK


def cmd_secret_list(run) -> int:
    workspace, base = _base(run, "secrets")
    rows = run.api.call("GET", base, not_found=f"no such workspace: {workspace}")
    run.listing(rows, [[r["name"], str(r["size"]), r["changed"], r["changed_by"]] for r in rows],
                ["NAME", "SIZE", "CHANGED", "BY"], empty=run.say("no secrets in {workspace}", workspace=workspace),
                right=(1,))
    return EXIT_OK


def cmd_secret_rm(run) -> int:
    workspace, base = _base(run, "secrets")
    for name in run.args.names:
        run.api.call("DELETE", f"{base}{quote(name, safe='')}/", not_found=f"no secret {name} in {workspace}")
        run.print(run.say("secret {name} deleted from {workspace}", name=name, workspace=workspace))
    return EXIT_OK


def cmd_registry_add(run) -> int:
    workspace, base = _base(run, "registries")
    source = "-" if run.args.password_stdin else run.args.password_file
    password = _read_value(run, source, run.say("password for {server}: ", server=run.args.server))
    row = run.api.call("POST", base, body={"server": run.args.server, "username": run.args.username,
                                           "password": password},
                       not_found=f"no such workspace: {workspace}")
    if run.structured:
        run.emit(row)
    else:
        run.print(run.say("credential for {server} set in {workspace} (user {username})", server=row["server"],
                          workspace=workspace, username=row["username"]))
    return EXIT_OK


def cmd_registry_list(run) -> int:
    workspace, base = _base(run, "registries")
    rows = run.api.call("GET", base, not_found=f"no such workspace: {workspace}")
    run.listing(rows, [[r["server"], r["username"], r["changed"], r["changed_by"]] for r in rows],
                ["REGISTRY", "USERNAME", "CHANGED", "BY"],
                empty=run.say("no registry credentials in {workspace}", workspace=workspace))
    return EXIT_OK


def cmd_registry_rm(run) -> int:
    workspace, base = _base(run, "registries")
    for server in run.args.servers:
        run.api.call("DELETE", f"{base}{quote(server, safe='')}/",
                     not_found=f"no credential for {server} in {workspace}")
        run.print(run.say("credential for {server} deleted from {workspace}", server=server, workspace=workspace))
    return EXIT_OK


def add_secret_commands(commands, command: Callable[..., argparse.ArgumentParser],
                        add_output: Callable[..., Any]) -> None:
    """`secret` and `registry` with their actions, on gpuctl's command parser (`command` and `add_output` are
    the cli's own helpers)."""
    secret = command(commands, "secret", None, "set, list or delete the workspace's secrets")
    actions = secret.add_subparsers(dest="secret_command", required=True, metavar="ACTION",
                                    parser_class=commands._parser_class)
    set_ = command(actions, "set", cmd_secret_set,
                   "add a secret or replace its value (read from --from-file, standard input or a prompt)")
    set_.add_argument("name", metavar="NAME", help="a DNS label, e.g. hf-token")
    set_.add_argument("--from-file", metavar="FILE", help="the value is this file's text; - reads standard input"
                      ).complete = FILES
    add_output(set_)
    listing = command(actions, "list", cmd_secret_list, "the secrets' names, sizes and who changed them when")
    add_output(listing, headers=True)
    rm = command(actions, "rm", cmd_secret_rm, "delete secrets")
    rm.add_argument("names", nargs="+", metavar="NAME")

    registry = command(commands, "registry", None, "add, list or delete the workspace's registry credentials")
    actions = registry.add_subparsers(dest="registry_command", required=True, metavar="ACTION",
                                      parser_class=commands._parser_class)
    add = command(actions, "add", cmd_registry_add,
                  "add a registry credential or replace it (the password from standard input or a prompt)")
    add.add_argument("server", metavar="SERVER", help="the registry host, e.g. registry.example.com")
    add.add_argument("--username", "-u", required=True)
    source = add.add_mutually_exclusive_group()
    source.add_argument("--password-stdin", action="store_true", help="read the password or token from standard input")
    source.add_argument("--password-file", metavar="FILE", help="read it from this file").complete = FILES
    add_output(add)
    listing = command(actions, "list", cmd_registry_list, "the registries with a credential, and their users")
    add_output(listing, headers=True)
    rm = command(actions, "rm", cmd_registry_rm, "delete registry credentials")
    rm.add_argument("servers", nargs="+", metavar="SERVER")

"""`gpuctl service-account create|list|rm` and `gpuctl service-account token create|list|rm`: a workspace's
service accounts and their tokens (owners; in -w WORKSPACE, else the caller's only one), over
`/api/v1/workspaces/{slug}/service-accounts/`.

`token create` prints the new token alone on standard output (so it can go straight into a CI system's secret
store) and what it is on standard error; the API shows it this once and never again."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from gpuctl.errors import EXIT_OK
from gpuctl.inputs import chosen_workspace

ROLES = ("member", "viewer")
SCOPES = ("read", "submit", "manage")
LIFETIMES = (1, 7, 30, 90, 180, 365)


def _base(run) -> tuple[str, str]:
    workspace = chosen_workspace(run)
    return workspace, f"/api/v1/workspaces/{quote(workspace)}/service-accounts/"


def _tokens(base: str, account: str) -> str:
    return f"{base}{quote(account, safe='')}/tokens/"


def cmd_create(run) -> int:
    workspace, base = _base(run)
    row = run.api.call("POST", base, body={"name": run.args.name, "role": run.args.role},
                       not_found=f"no such workspace: {workspace}")
    if run.structured:
        run.emit(row)
    else:
        run.print(run.say("service account {username} made in {workspace} ({role})", username=row["username"],
                          workspace=workspace, role=row["role"]))
    return EXIT_OK


def cmd_list(run) -> int:
    workspace, base = _base(run)
    rows = run.api.call("GET", base, not_found=f"no such workspace: {workspace}")
    run.listing(rows, [[r["name"], r["username"], r["role"], r["created"], r["created_by"] or "-"] for r in rows],
                ["NAME", "USERNAME", "ROLE", "CREATED (UTC)", "BY"],
                empty=run.say("no service accounts in {workspace}", workspace=workspace))
    return EXIT_OK


def cmd_rm(run) -> int:
    workspace, base = _base(run)
    for name in run.args.names:
        run.api.call("DELETE", f"{base}{quote(name, safe='')}/", not_found=f"no service account {name} in {workspace}")
        run.print(run.say("service account {name} deleted from {workspace}; its tokens are revoked", name=name,
                          workspace=workspace))
    return EXIT_OK


def cmd_token_create(run) -> int:
    workspace, base = _base(run)
    account = run.args.account
    row = run.api.call("POST", _tokens(base, account),
                       body={"name": run.args.name, "scope": run.args.scope,
                             "expires_in_days": run.args.expires_in_days},
                       not_found=f"no service account {account} in {workspace}")
    if run.structured:
        run.emit(row)
        return EXIT_OK
    run.note(run.say("token {name} of {account} in {workspace} (scope {scope}, expires {expires}); it is not shown "
                     "again:", name=row["name"], account=account, workspace=workspace, scope=row["scope"],
                     expires=row["expires"]))
    run.print(row["token"])
    return EXIT_OK


def cmd_token_list(run) -> int:
    workspace, base = _base(run)
    account = run.args.account
    rows = run.api.call("GET", _tokens(base, account), not_found=f"no service account {account} in {workspace}")
    run.listing(rows, [[str(r["id"]), r["name"], r["hint"] + "…", r["scope"], r["expires"] or "-",
                        r["last_used"] or "-", r["revoked"] or "-"] for r in rows],
                ["ID", "NAME", "STARTS WITH", "SCOPE", "EXPIRES (UTC)", "LAST USED (UTC)", "REVOKED (UTC)"],
                empty=run.say("{account} has no tokens", account=account), right=(0,))
    return EXIT_OK


def cmd_token_rm(run) -> int:
    workspace, base = _base(run)
    account = run.args.account
    for token_id in run.args.ids:
        run.api.call("DELETE", f"{_tokens(base, account)}{token_id}/",
                     not_found=f"{account} in {workspace} has no token {token_id}")
        run.print(run.say("token {id} of {account} revoked", id=token_id, account=account))
    return EXIT_OK


def add_service_account_commands(commands, command: Callable[..., argparse.ArgumentParser],
                                 add_output: Callable[..., Any]) -> None:
    """`service-account` with its actions and its `token` actions, on gpuctl's command parser."""
    account = command(commands, "service-account", None,
                      "make, list or delete the workspace's service accounts and their tokens (owners)")
    actions = account.add_subparsers(dest="service_account_command", required=True, metavar="ACTION",
                                     parser_class=commands._parser_class)
    create = command(actions, "create", cmd_create, "make a service account (role member or viewer)")
    create.add_argument("name", metavar="NAME", help="lowercase letters, digits and '-', e.g. ci-pipeline")
    create.add_argument("--role", choices=ROLES, default="member", help="what it may do (default member)")
    add_output(create)
    listing = command(actions, "list", cmd_list, "the service accounts, their roles and who made them")
    add_output(listing, headers=True)
    rm = command(actions, "rm", cmd_rm, "delete service accounts (their tokens are revoked)")
    rm.add_argument("names", nargs="+", metavar="NAME")

    token = command(actions, "token", None, "mint, list or revoke a service account's tokens")
    token_actions = token.add_subparsers(dest="service_account_token_command", required=True, metavar="ACTION",
                                         parser_class=commands._parser_class)
    mint = command(token_actions, "create", cmd_token_create,
                   "mint a token (printed once, alone on standard output)")
    mint.add_argument("account", metavar="ACCOUNT")
    mint.add_argument("--name", required=True, help="to tell its tokens apart, e.g. github-actions")
    mint.add_argument("--scope", choices=SCOPES, default="submit", help="what it may do (default submit)")
    mint.add_argument("--expires-in-days", type=int, choices=LIFETIMES, default=90, metavar="DAYS",
                      help="its lifetime: 1, 7, 30, 90 (default), 180 or 365")
    add_output(mint)
    token_list = command(token_actions, "list", cmd_token_list, "its tokens (never their values)")
    token_list.add_argument("account", metavar="ACCOUNT")
    add_output(token_list, headers=True)
    token_rm = command(token_actions, "rm", cmd_token_rm, "revoke tokens, by id")
    token_rm.add_argument("account", metavar="ACCOUNT")
    token_rm.add_argument("ids", nargs="+", type=int, metavar="ID")

"""`gpuctl serve keys create|list|revoke NAME_OR_ID`: a service's own API keys, over
`/api/v1/services/{id}/keys/`. A new key's value is printed once (on standard output, alone, so that
`$(gpuctl serve keys create chat app -q)` takes it); the API never gives it back."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial
from typing import Any

from gpuctl.errors import EXIT_OK

KEY_DAYS = (0, 1, 7, 30, 90, 180, 365)


def _keys_url(service: dict) -> str:
    return f"/api/v1/services/{service['id']}/keys/"


def cmd_keys_create(run, find_service: Callable[..., dict]) -> int:
    args = run.args
    service = find_service(run, args.ref)
    body: dict[str, Any] = {"name": args.name, "expires_in_days": args.days}
    if args.requests_per_minute is not None:
        body["requests_per_minute"] = args.requests_per_minute
    if args.tokens_per_minute is not None:
        body["tokens_per_minute"] = args.tokens_per_minute
    made = run.api.call("POST", _keys_url(service), body=body, not_found=f"no such service: {args.ref}")
    if run.structured:
        run.emit(made)
    elif args.quiet:
        run.print(made["key"])
    else:
        run.note(run.say("key {name} ({hint}…) of service {service}: copy it now, it is not shown again",
                         name=made["name"], hint=made["hint"], service=service["name"]))
        run.print(made["key"])
    return EXIT_OK


def cmd_keys_list(run, find_service: Callable[..., dict]) -> int:
    service = find_service(run, run.args.ref)
    keys = run.api.call("GET", _keys_url(service), not_found=f"no such service: {run.args.ref}")
    rows = [[k["id"], k["name"], f"{k['hint']}…", k["expires"] or "-", k["last_used"] or "-", k["revoked"] or "-",
             k["requests_per_minute"] or "-", k["tokens_per_minute"] or "-"] for k in keys]
    run.listing(keys, rows, ["ID", "NAME", "STARTS WITH", "EXPIRES (UTC)", "LAST USED (UTC)", "REVOKED (UTC)",
                             "REQ/MIN", "TOKENS/MIN"],
                empty=run.say("service {service} has no keys", service=service["name"]), right=(0, 6, 7))
    return EXIT_OK


def cmd_keys_revoke(run, find_service: Callable[..., dict]) -> int:
    service = find_service(run, run.args.ref)
    for key_id in run.args.ids:
        run.api.call("DELETE", f"{_keys_url(service)}{key_id}/", not_found=f"service {service['name']} has no key {key_id}")
        run.print(run.say("key {id} of service {service} revoked", id=key_id, service=service["name"]))
    return EXIT_OK


def add_key_commands(actions, command: Callable[..., argparse.ArgumentParser], add_output: Callable[..., Any],
                     find_service: Callable[..., dict]) -> None:
    """`serve keys` and its actions, under `serve`'s actions; `find_service` is `serve`'s (a name or id)."""
    keys = command(actions, "keys", None, "make, list or revoke a service's own API keys")
    verbs = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION",
                                parser_class=actions._parser_class)

    def with_ref(name: str, handler, text: str) -> argparse.ArgumentParser:
        sub = command(verbs, name, partial(handler, find_service=find_service), text)
        sub.add_argument("ref", metavar="NAME_OR_ID", help="the service's name (in -w WORKSPACE) or its id")
        return sub

    create = with_ref("create", cmd_keys_create, "make a key (printed once) that opens this service only")
    create.add_argument("name", metavar="KEY_NAME", help="what the key is for, e.g. chat-app")
    create.add_argument("--days", type=int, choices=KEY_DAYS, default=90, help="its lifetime; 0: never expires")
    create.add_argument("--requests-per-minute", type=int, metavar="N", help="this key's own request limit")
    create.add_argument("--tokens-per-minute", type=int, metavar="N", help="this key's own token limit")
    create.add_argument("-q", "--quiet", action="store_true", help="print the key alone")
    add_output(create)
    listing = with_ref("list", cmd_keys_list, "the service's keys (never their values), revoked ones too")
    add_output(listing, headers=True)
    revoke = with_ref("revoke", cmd_keys_revoke, "revoke keys: refused from now on")
    revoke.add_argument("ids", nargs="+", type=int, metavar="KEY_ID")

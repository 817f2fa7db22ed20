"""`gpuctl serve revisions|revise|traffic|promote|rollback`: a service's revisions and its traffic split. A new
image or model makes the next revision (the current one serves until it is ready); `traffic 3=90 4=10` splits
the requests; `promote` sends them all to one revision; `rollback` promotes the one before the current one.
Through `/api/v1/services/{id}/revisions/`, `.../traffic/`, `.../promote/` and `.../rollback/`."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any

from gpuctl.errors import EXIT_OK, EXIT_SPEC, CliError
from gpuctl.output import format_table, headers_in

SERVICES = "/api/v1/services/"
SHARE = re.compile(r"^(\d+)=(\d+)%?$")


def _number(value: Any, digits: int) -> str | None:
    return None if value is None else f"{value:.{digits}f}"


def format_revisions(revisions: list[dict], *, headers_shown: bool = True, lang: str = "en") -> str:
    headers = headers_in(
        lang,
        [
            "REVISION",
            "CURRENT",
            "TRAFFIC",
            "REPLICAS",
            "MODEL",
            "IMAGE",
            "TOKENS IN",
            "TOKENS OUT",
            "TTFT",
            "COST/1M IN",
            "COST/1M OUT",
        ],
    )
    rows = [
        [
            r["number"],
            "*" if r["current"] else "",
            f"{r['percent']}%",
            r["replicas"],
            r["model"] or None,
            r["image"] or None,
            r["prompt_tokens"],
            r["completion_tokens"],
            _number(r.get("ttft_mean_s"), 3),
            r.get("cost_per_million_prompt_tokens"),
            r.get("cost_per_million_completion_tokens"),
        ]
        for r in revisions
    ]
    return format_table(
        headers, rows, right={0, 2, 3, 6, 7, 8, 9, 10}, headers_shown=headers_shown, lang=lang
    )


def _show(run, revisions: list[dict]) -> int:
    if run.structured:
        run.emit(revisions)
    else:
        run.print(format_revisions(revisions, headers_shown=run.headers, lang=run.lang))
    return EXIT_OK


def _service(run) -> dict:
    return run.args.find_service(run, run.args.ref)


def _post(run, service: dict, path: str, body: dict | None, what: str) -> list[dict]:
    try:
        return run.api.call(
            "POST",
            f"{SERVICES}{service['id']}/{path}",
            body=body,
            not_found=f"no such service: {run.args.ref}",
        )
    except CliError as error:
        raise CliError(
            f"service {service['name']} ({service['id']}): {what} refused: {error}", error.exit_code
        ) from None


def parse_split(shares: list[str]) -> list[dict[str, int]]:
    """`3=90 4=10` as the API's [{revision, percent}]."""
    split = []
    for share in shares:
        found = SHARE.match(share)
        if found is None:
            raise CliError(f"{share!r} is not REVISION=PERCENT, e.g. 3=90", EXIT_SPEC)
        split.append({"revision": int(found[1]), "percent": int(found[2])})
    return split


def cmd_serve_revisions(run) -> int:
    service = _service(run)
    return _show(
        run,
        run.api.call(
            "GET", f"{SERVICES}{service['id']}/revisions/", not_found=f"no such service: {run.args.ref}"
        ),
    )


def cmd_serve_revise(run) -> int:
    args = run.args
    body: dict[str, Any] = {}
    if args.image:
        body["image"] = args.image
    if args.model_path or args.model_registry:
        body["model"] = {"path": args.model_path} if args.model_path else {"registry": args.model_registry}
        if args.model_name:
            body["model"]["name"] = args.model_name
    if not body:
        raise CliError("serve revise needs --image, --model-path or --model-registry", EXIT_SPEC)
    if args.split:
        body["traffic"] = parse_split(args.split)
    service = _service(run)
    return _show(run, _post(run, service, "revisions/", body, "the new revision was"))


def cmd_serve_traffic(run) -> int:
    split = parse_split(run.args.shares)
    service = _service(run)
    return _show(run, _post(run, service, "traffic/", {"traffic": split}, "the split was"))


def cmd_serve_promote(run) -> int:
    service = _service(run)
    return _show(run, _post(run, service, "promote/", {"revision": run.args.revision}, "promoting was"))


def cmd_serve_rollback(run) -> int:
    service = _service(run)
    return _show(run, _post(run, service, "rollback/", None, "rolling back was"))


def add_revision_commands(
    actions,
    command: Callable[..., argparse.ArgumentParser],
    add_output: Callable[..., Any],
    find_service: Callable[[Any, str], dict],
) -> None:
    """The revision actions of `gpuctl serve`, registered by gpuctl.serve on its own subparsers with its way of
    finding a service by name or id (`find_service(run, ref)`)."""

    def with_ref(name: str, handler, text: str) -> argparse.ArgumentParser:
        sub = command(actions, name, handler, text)
        sub.set_defaults(find_service=find_service)
        sub.add_argument("ref", metavar="NAME_OR_ID", help="the service's name (in -w WORKSPACE) or its id")
        add_output(sub, headers=True)
        return sub

    with_ref(
        "revisions", cmd_serve_revisions, "a service's revisions: traffic, replicas, tokens, latency, cost"
    )
    revise = with_ref(
        "revise",
        cmd_serve_revise,
        "a new image or model: the next revision (the current one serves until it is ready)",
    )
    revise.add_argument("--image", metavar="IMAGE", help="the server's new image")
    model = revise.add_mutually_exclusive_group()
    model.add_argument("--model-path", metavar="PATH", help="the new model on a volume")
    model.add_argument("--model-registry", metavar="REF", help="the new model's registry reference")
    revise.add_argument("--model-name", metavar="NAME", help="the name clients ask for")
    revise.add_argument(
        "--split",
        nargs="+",
        metavar="REVISION=PERCENT",
        help="split the requests meanwhile, e.g. --split 3=90 4=10",
    )
    traffic = with_ref("traffic", cmd_serve_traffic, "split a service's requests between its revisions")
    traffic.add_argument(
        "shares", nargs="+", metavar="REVISION=PERCENT", help="e.g. 3=90 4=10 (adding up to 100)"
    )
    promote = with_ref("promote", cmd_serve_promote, "send all of a service's requests to one revision")
    promote.add_argument("revision", type=int, metavar="REVISION")
    with_ref("rollback", cmd_serve_rollback, "promote the revision before the current one")

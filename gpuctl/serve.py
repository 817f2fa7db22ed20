"""`gpuctl serve create|list|show|scale|delete|stop|start` (and the revision actions of gpuctl.serve_revisions): inference services by name (in -w WORKSPACE,
else in the one workspace of the caller that has a live service of that name) or by id. A service is
deployed as a job (`POST /api/v1/jobs/` with a `kind: inference` spec, from -f FILE or built from flags),
read and changed through `/api/v1/services/`, stopped and started as jobs are."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any

import yaml

from gpuctl.completion import FILES
from gpuctl.errors import EXIT_OK, EXIT_SPEC, CliError, SpecRefused
from gpuctl.inputs import chosen_workspace, read_spec
from gpuctl.kinds import KIND_OF_COMMAND
from gpuctl.messages import say
from gpuctl.output import (
    cell,
    format_quote_options,
    format_table,
    format_time,
    headers_in,
    pad,
    pending_reason,
    width,
)
from gpuctl.serve_keys import add_key_commands
from gpuctl.serve_revisions import add_revision_commands

SERVICES = "/api/v1/services/"
JOBS = "/api/v1/jobs/"
SERVERS = ("vllm", "triton", "custom")
FLAGS_LABEL = "<flags>"
SERIES_POINTS = 10  # the newest evaluations `show` prints

# a spec field of the document built from flags -> the flag that set it
FIELD_FLAGS = {
    "name": "NAME", "queue": "--queue", "server": "--server", "image": "--image", "port": "--port",
    "healthPath": "--health-path", "model": "--model-path/--model-registry", "model.path": "--model-path",
    "model.registry": "--model-registry", "model.name": "--model-name", "nodePool": "--pool",
    "resources": "--gpu/--gpus", "resources.gpu": "--gpu/--gpus", "resources.gpuMemory": "--gpu-memory",
    "sharing": "--gpu/--gpus", "replicas": "--min/--max", "replicas.min": "--min", "replicas.max": "--max",
    "target": "--target-concurrency/--target-rps", "target.concurrency": "--target-concurrency",
    "target.rps": "--target-rps", "scaleDownDelay": "--scale-down-delay",
}
# argparse dest -> how create's flags name it (any of them given means the spec is built from flags)
SPEC_FLAGS = ("name", "model_path", "model_registry", "model_name", "server", "image", "port", "health_path",
              "gpu", "gpus", "gpu_memory", "min", "max", "target_concurrency", "target_rps", "scale_down_delay",
              "queue", "pool")


# --------------------------------------------------------------------------- finding a service


def _services(run, workspace: str | None) -> list[dict]:
    params = {"workspace": workspace} if workspace else None
    return run.api.get_all(SERVICES, params=params,
                           not_found=f"no such workspace: {workspace}" if workspace else "the server has no services API")


def find_service(run, ref: str) -> dict:
    """The service `ref` names: an id (any of the caller's, ended or not), or the name of a live one in
    -w WORKSPACE (else in any of the caller's workspaces)."""
    if ref.isdigit():
        return run.api.call("GET", f"{SERVICES}{ref}/", not_found=f"no such service: {ref}")
    workspace = run.settings.workspace
    found = [s for s in _services(run, workspace) if s["name"] == ref]
    if not found:
        where = f" in {workspace}" if workspace else ""
        raise CliError(f"no live service named {ref}{where} (gpuctl serve list shows them)")
    if len(found) > 1:
        spaces = ", ".join(sorted(s["workspace"] for s in found))
        raise CliError(f"services named {ref} are in several of your workspaces ({spaces}): choose one with -w")
    return found[0]


def _said(run, service: dict, action: str, state: str) -> None:
    if run.structured:
        run.emit({**service, "state": state})
    else:
        run.print(run.say("service {name} ({id}) in {workspace}: {action} -> {state}", name=service["name"],
                          id=service["id"], workspace=service["workspace"], action=run.say(action), state=state))


# --------------------------------------------------------------------------- create


def spec_from_flags(args: argparse.Namespace) -> str:
    """The `kind: inference` YAML the flags of `serve create` stand for; what they leave out keeps the
    spec's defaults (server vllm, one whole GPU, one replica, 4 requests in flight per replica)."""
    doc: dict[str, Any] = {"kind": KIND_OF_COMMAND["serve"], "name": args.name}
    for key, value in (("queue", args.queue), ("server", args.server), ("image", args.image),
                       ("port", args.port), ("healthPath", args.health_path)):
        if value is not None:
            doc[key] = value
    model = {key: value for key, value in (("path", args.model_path), ("registry", args.model_registry),
                                           ("name", args.model_name)) if value is not None}
    if model:
        doc["model"] = model
    if args.pool is not None:
        doc["nodePool"] = args.pool
    resources: dict[str, Any] = {}
    if args.gpu is not None or args.gpus is not None:
        resources["gpu"] = args.gpus if args.gpus is not None else args.gpu
    if args.gpu_memory is not None:
        resources["gpuMemory"] = args.gpu_memory
    if resources:
        doc["resources"] = resources
    replicas = {key: value for key, value in (("min", args.min), ("max", args.max)) if value is not None}
    if replicas:
        doc["replicas"] = replicas
    if args.target_concurrency is not None:
        doc["target"] = {"concurrency": args.target_concurrency}
    elif args.target_rps is not None:
        doc["target"] = {"rps": args.target_rps}
    if args.scale_down_delay is not None:
        doc["scaleDownDelay"] = args.scale_down_delay
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def _flag_errors(refused: SpecRefused) -> SpecRefused:
    """A spec built from flags was refused: its errors name the flags, not lines of a file nobody wrote."""
    lines = []
    for line in refused.lines:
        rest = re.sub(rf"^{re.escape(FLAGS_LABEL)}(?::\d+)*:\s*", "", line)
        field, sep, message = rest.partition(": ")
        flag = FIELD_FLAGS.get(field) if sep else None
        lines.append(f"gpuctl: error: {flag}: {message}" if flag else f"gpuctl: error: {rest}")
    return SpecRefused(lines)


def format_quote(answer: dict, label: str, workspace: str, lang: str = "en") -> str:
    """The numbered options (--option N picks one), with the trade-offs and what is not offered."""
    lines = [say(lang, "quote for {spec} in {workspace}, {currency}", spec=label, workspace=workspace,
                 currency=answer.get("currency", ""))]
    options = answer.get("options") or []
    if not options:
        lines.append(say(lang, "no option can run this service"))
    else:
        lines.append(format_quote_options(answer, numbered=True, lang=lang))
        cheapest = next((n for n, o in enumerate(options, start=1) if o.get("cheapest")), None)
        if cheapest:
            lines.append(say(lang, "cheapest: #{number} {id}  (deploy it with --option {number})", number=cheapest,
                             id=options[cheapest - 1]["id"]))
        lines.extend(f"  {o['id']}: {'; '.join(o['tradeoffs'])}" for o in options if o.get("tradeoffs"))
    lines.extend(say(lang, "not offered: {reason}", reason=reason) for reason in answer.get("unavailable") or ())
    return "\n".join(lines)


def endpoint(run, workspace: str, name: str) -> str:
    return f"{run.settings.url.rstrip('/')}/serve/{workspace}/{name}/"


def cmd_serve_create(run) -> int:
    args = run.args
    flags = [dest for dest in SPEC_FLAGS if getattr(args, dest) is not None]
    if args.filename and flags:
        raise CliError("give the service as -f FILE or as NAME and flags, not both", EXIT_SPEC)
    if args.filename:
        label, text = read_spec(args.filename, run.stdin)
    elif args.name:
        label, text = FLAGS_LABEL, spec_from_flags(args)
    else:
        raise CliError("serve create needs NAME and flags (e.g. --model-registry hf.co/org/model), "
                       "or -f FILE (- reads standard input)", EXIT_SPEC)
    workspace = chosen_workspace(run)
    body: dict[str, Any] = {"workspace": workspace, "spec": text}
    missing = f"no such workspace: {workspace}"
    try:
        if args.quote_only:
            answer = run.api.call("POST", "/api/v1/quotes/", body=body, spec_file=label, not_found=missing)
            if run.structured:
                run.emit(answer)
            else:
                run.print(format_quote(answer, run.say("service {name}", name=args.name) if label == FLAGS_LABEL
                                       else label, workspace, run.lang))
            return EXIT_OK
        option = args.option
        if option and option.isdigit():  # a row of `gpuctl submit --quote-only`; option ids are never all digits
            answer = run.api.call("POST", "/api/v1/quotes/", body=body, spec_file=label, not_found=missing)
            options = answer.get("options") or []
            if not 1 <= int(option) <= len(options):
                raise CliError(f"there is no option {option}; the quote has {len(options)}", EXIT_SPEC)
            option = options[int(option) - 1]["id"]
        if option:
            body["option"] = option
        job = run.api.call("POST", JOBS, body=body, spec_file=label, not_found=missing)
    except SpecRefused as refused:
        raise (_flag_errors(refused) if label == FLAGS_LABEL else refused) from None
    url = endpoint(run, job["workspace"], job["name"])
    if run.structured:
        run.emit({**job, "endpoint": url})
        return EXIT_OK
    run.print(run.say("created service {name} ({id}) in {workspace}, queue {queue}: {state}", name=job["name"],
                      id=job["id"], workspace=job["workspace"], queue=job["queue"], state=job["state"]))
    run.print(run.say("endpoint: {url}", url=url))
    if job.get("state") == "Pending" and job.get("pending_reason"):
        run.print(run.say("pending reason: {reason}", reason=pending_reason(job)))
    return EXIT_OK


# --------------------------------------------------------------------------- reading


def _number(value: Any, digits: int = 2, unit: str = "") -> str | None:
    return None if value is None else f"{value:.{digits}f}{unit}"


def _money(amount: Any, currency: str | None) -> str | None:
    return None if amount in (None, "") else f"{amount} {currency or ''}".rstrip()


def replicas_text(service: dict) -> str:
    """`running/desired min-max`, as the table shows it."""
    return (f"{service['running_replicas']}/{service['desired_replicas']} "
            f"{service['min_replicas']}-{service['max_replicas']}")


def format_services(services: list[dict], *, wide: bool = False, headers_shown: bool = True, lang: str = "en") -> str:
    headers = ["NAME", "ID", "STATE", "REPLICAS", "RPS", "P95", "COST/1K", "ENDPOINT"]
    if wide:
        headers += ["WORKSPACE", "QUEUE", "REQUESTS", "P50", "COLD STARTS", "GPU-S/REQ", "COST", "SCALE REASON"]
    headers = headers_in(lang, headers)
    rows = []
    for s in services:
        row = [s["name"], s["id"], s["state"], replicas_text(s), _number(s.get("requests_per_second")),
               _number(s.get("p95_ms"), 0, " ms"), _money(s.get("cost_per_1000_requests"), s.get("currency")),
               s.get("endpoint")]
        if wide:
            row += [s.get("workspace"), s.get("queue"), s.get("requests"), _number(s.get("p50_ms"), 0, " ms"),
                    s.get("cold_starts"), _number(s.get("gpu_seconds_per_request")),
                    _money(s.get("cost_so_far"), s.get("currency")), s.get("scale_reason") or None]
        rows.append(row)
    right = {1, 4, 5, 6} | ({10, 11, 12, 13} if wide else set())
    return format_table(headers, rows, right=right, headers_shown=headers_shown, lang=lang)


def format_service(service: dict, lang: str = "en") -> str:
    """One service: its fields, then its newest evaluations (replicas, traffic, latency)."""
    fields = [
        ("service", service["id"]), ("name", service.get("name")), ("workspace", service.get("workspace")),
        ("queue", service.get("queue")), ("state", service.get("state")), ("endpoint", service.get("endpoint")),
        ("replicas", say(lang, "{running} running, {desired} wanted", running=service.get("running_replicas"),
                         desired=service.get("desired_replicas"))),
        ("range", f"{service.get('min_replicas')}-{service.get('max_replicas')}"),
        ("scale reason", service.get("scale_reason") or None),
        ("requests", service.get("requests")), ("requests/s", _number(service.get("requests_per_second"))),
        ("p50", _number(service.get("p50_ms"), 0, " ms")), ("p95", _number(service.get("p95_ms"), 0, " ms")),
        ("cold starts", service.get("cold_starts")), ("GPU-seconds", _number(service.get("gpu_seconds"), 1)),
        ("GPU-s/request", _number(service.get("gpu_seconds_per_request"))),
        ("cost so far", _money(service.get("cost_so_far"), service.get("currency"))),
        ("cost/1K req", _money(service.get("cost_per_1000_requests"), service.get("currency"))),
        ("tokens in/out", f"{service.get('prompt_tokens', 0)} / {service.get('completion_tokens', 0)}"),
        ("cost/1M in", _money(service.get("cost_per_million_prompt_tokens"), service.get("currency"))),
        ("cost/1M out", _money(service.get("cost_per_million_completion_tokens"), service.get("currency"))),
        ("TTFT p50/p95", None if service.get("ttft_p50_s") is None else
         f"{service['ttft_p50_s']:.3f} / {service['ttft_p95_s']:.3f} s"),
        ("tokens/s", _number(service.get("tokens_per_second"), 1)),
        ("created", format_time(service.get("created"))),
    ]
    labels = {name: say(lang, name) for name, _ in fields}
    size = max(width(label) for label in labels.values())
    lines = [f"{pad(labels[name], size)}  {cell(value, lang)}" for name, value in fields]
    series = service.get("series") or {}
    times = list(series.get("times") or [])[-SERIES_POINTS:]
    lines += ["", say(lang, "evaluations (newest last)")]
    if times:
        start = len(series["times"]) - len(times)

        def column(key: str) -> list:
            return (list(series.get(key) or []) + [None] * len(series["times"]))[start:start + len(times)]

        rows = zip(times, column("replicas"), column("desired"), column("rps"), column("p50_ms"), column("p95_ms"),
                   strict=True)
        lines.append(format_table(headers_in(lang, ("TIME (UTC)", "REPLICAS", "DESIRED", "RPS", "P50 MS", "P95 MS")),
                                  [(format_time(t), n, d, _number(r), _number(p50, 0), _number(p95, 0))
                                   for t, n, d, r, p50, p95 in rows], right={1, 2, 3, 4, 5}, lang=lang))
    else:
        lines.append(say(lang, "(none yet)"))
    return "\n".join(lines)


def cmd_serve_list(run) -> int:
    services = _services(run, run.settings.workspace)
    if run.structured:
        run.emit(services)
    elif services:
        run.print(format_services(services, wide=run.output == "wide", headers_shown=run.headers, lang=run.lang))
    else:
        run.note(run.say("no services"))
    return EXIT_OK


def cmd_serve_show(run) -> int:
    service = find_service(run, run.args.ref)
    if "series" not in service:  # found by name in the list: the page needs its figures over time
        service = run.api.call("GET", f"{SERVICES}{service['id']}/", not_found=f"no such service: {run.args.ref}")
    if run.structured:
        run.emit(service)
    else:
        run.print(format_service(service, run.lang))
    return EXIT_OK


# --------------------------------------------------------------------------- changing


def cmd_serve_scale(run) -> int:
    args = run.args
    if args.min is None and args.max is None:
        raise CliError("serve scale needs --min N, --max M or both", EXIT_SPEC)
    service = find_service(run, args.ref)
    low = service["min_replicas"] if args.min is None else args.min
    high = service["max_replicas"] if args.max is None else args.max
    try:
        changed = run.api.call("POST", f"{SERVICES}{service['id']}/scale/",
                               body={"min_replicas": low, "max_replicas": high},
                               not_found=f"no such service: {args.ref}")
    except CliError as error:
        raise CliError(f"service {service['name']} ({service['id']}) was not scaled: {error}",
                       error.exit_code) from None
    if run.structured:
        run.emit(changed)
    else:
        run.print(run.say("service {name} ({id}) in {workspace}: replicas {low}-{high} (were {old}), "
                          "{desired} wanted now", name=changed["name"], id=changed["id"],
                          workspace=changed["workspace"], low=changed["min_replicas"], high=changed["max_replicas"],
                          old=f"{service['min_replicas']}-{service['max_replicas']}",
                          desired=changed["desired_replicas"]))
    return EXIT_OK


def _confirmed(run, service: dict) -> bool:
    if run.args.yes:
        return True
    if not run.stdin.isatty():
        raise CliError(f"deleting service {service['name']} cannot be undone: pass --yes to confirm", EXIT_SPEC)
    run.err.write(run.say("delete service {name} ({id}) in {workspace}? Its replicas end and its endpoint goes. "
                          "[y/N] ", name=service["name"], id=service["id"], workspace=service["workspace"]))
    run.err.flush()
    return run.stdin.readline().strip().lower() in ("y", "yes")


def cmd_serve_delete(run) -> int:
    service = find_service(run, run.args.ref)
    if not _confirmed(run, service):
        raise CliError(run.say("service {name} not deleted", name=service["name"]))
    job = run.api.call("POST", f"{SERVICES}{service['id']}/delete/", not_found=f"no such service: {run.args.ref}")
    _said(run, service, "deleted: its replicas ended, its endpoint is gone", job["state"])
    return EXIT_OK


def cmd_serve_stop(run) -> int:
    service = find_service(run, run.args.ref)
    job = run.api.call("POST", f"{JOBS}{service['id']}/stop/", not_found=f"no such service: {run.args.ref}")
    _said(run, service, "stopped: its replicas end, nothing is billed until it starts", job["state"])
    return EXIT_OK


def cmd_serve_start(run) -> int:
    service = find_service(run, run.args.ref)
    job = run.api.call("POST", f"{JOBS}{service['id']}/start/", not_found=f"no such service: {run.args.ref}")
    _said(run, service, "started: it waits in its queue for GPUs", job["state"])
    return EXIT_OK


# --------------------------------------------------------------------------- arguments


def _add_create_flags(create: argparse.ArgumentParser) -> None:
    create.add_argument("name", metavar="NAME", nargs="?", help="the service's name (with flags instead of -f)")
    create.add_argument("-f", "--filename", metavar="FILE",
                        help="a kind: inference spec; - reads standard input").complete = FILES
    model = create.add_mutually_exclusive_group()
    model.add_argument("--model-path", metavar="PATH", help="the model on the models volume, e.g. /models/llama-3-8b")
    model.add_argument("--model-registry", metavar="REF", help="a registry reference, e.g. hf.co/org/model")
    create.add_argument("--model-name", metavar="NAME", help="the name clients ask for (default: the model's)")
    create.add_argument("--server", choices=SERVERS, help="the model server (default vllm)")
    create.add_argument("--image", metavar="IMAGE", help="the server's image (required with --server custom)")
    create.add_argument("--port", type=int, metavar="PORT", help="the port it listens on (custom server)")
    create.add_argument("--health-path", metavar="PATH", help="its readiness path, e.g. /health (custom server)")
    gpu = create.add_mutually_exclusive_group()
    gpu.add_argument("--gpu", type=float, metavar="FRACTION", help="part of one GPU per replica, e.g. 0.5")
    gpu.add_argument("--gpus", type=int, metavar="N", help="whole GPUs per replica (default 1)")
    create.add_argument("--gpu-memory", metavar="SIZE", help="GPU memory per replica on a fraction, e.g. 20Gi")
    create.add_argument("--min", type=int, metavar="N", help="fewest replicas (0: scale to zero when idle)")
    create.add_argument("--max", type=int, metavar="N", help="most replicas")
    target = create.add_mutually_exclusive_group()
    target.add_argument("--target-concurrency", type=int, metavar="N",
                        help="requests in flight per replica the autoscaler aims at (default 4)")
    target.add_argument("--target-rps", type=float, metavar="RPS", help="requests per second per replica to aim at")
    create.add_argument("--scale-down-delay", metavar="DURATION", help="how long load must stay low, e.g. 5m")
    create.add_argument("--queue", metavar="QUEUE", help="the queue it runs in (default: the workspace's)")
    create.add_argument("--pool", metavar="POOL", help="the node pool to run in")
    choice = create.add_mutually_exclusive_group()
    choice.add_argument("--option", metavar="N|ID", help="run as option N of --quote-only (or an option id)")
    choice.add_argument("--quote-only", action="store_true", help="print the numbered options; deploy nothing")


def add_serve_commands(commands, command: Callable[..., argparse.ArgumentParser],
                       add_output: Callable[..., Any]) -> None:
    """`serve` and its actions, registered on gpuctl's command parser (`command` and `add_output` are the
    cli's own helpers)."""
    serve = command(commands, "serve", None, "deploy, list, scale, stop, start or delete my inference services")
    actions = serve.add_subparsers(dest="serve_command", required=True, metavar="ACTION",
                                   parser_class=commands._parser_class)
    create = command(actions, "create", cmd_serve_create,
                     "deploy a service: -f FILE (kind: inference), or NAME and flags")
    _add_create_flags(create)
    add_output(create)
    listing = command(actions, "list", cmd_serve_list,
                      "my services not ended: replicas, requests/s, p95, cost per 1,000 requests, endpoint")
    add_output(listing, headers=True)

    def with_ref(name: str, handler, text: str) -> argparse.ArgumentParser:
        sub = command(actions, name, handler, text)
        sub.add_argument("ref", metavar="NAME_OR_ID", help="the service's name (in -w WORKSPACE) or its id")
        add_output(sub)
        return sub

    with_ref("show", cmd_serve_show, "one service: replicas, traffic, latency, cost, its recent evaluations")
    scale = with_ref("scale", cmd_serve_scale, "change a service's replica range (what is left out is kept)")
    scale.add_argument("--min", type=int, metavar="N", help="fewest replicas (0: scale to zero when idle)")
    scale.add_argument("--max", type=int, metavar="M", help="most replicas")
    delete = with_ref("delete", cmd_serve_delete, "delete a service: its replicas end, its endpoint goes")
    delete.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    with_ref("stop", cmd_serve_stop, "stop a service: its replicas end, its GPUs are free, its range is kept")
    with_ref("start", cmd_serve_start, "start a stopped service (it queues for GPUs)")
    add_revision_commands(actions, command, add_output, find_service)
    add_key_commands(actions, command, add_output, find_service)

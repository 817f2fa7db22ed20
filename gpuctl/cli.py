"""`gpuctl`: the tenant's command line for the platform's REST API (an HTTP client; no Django here).

Settings, highest first: the flags `--url`, `--token`, `--workspace`/`-w`; the environment
`GPUCTL_URL`, `GPUCTL_TOKEN`, `GPUCTL_WORKSPACE`; the profile chosen by `--profile`,
`GPUCTL_PROFILE` or the file's `default_profile`; the top level of
`$XDG_CONFIG_HOME/gpuctl/config.toml` (default `~/.config/gpuctl/config.toml`); the default URL
http://127.0.0.1:8000 (gpuctl/settings.py).

Exit codes: 0 success, 1 any other error, 2 a spec the server refused and usage errors,
130 interrupted, 141 the reader of the output went away (`gpuctl get jobs | head -1`).
Every error is one line on stderr, `gpuctl: error: ...` (a refused spec: one `FILE:LINE:COL:`
line per error); GPUCTL_DEBUG=1 shows the traceback of an unexpected one.
"""

from __future__ import annotations

import argparse
import calendar
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, NoReturn, TextIO

import httpx
import yaml

from gpuctl import messages
from gpuctl.api import Api, spec_error_line
from gpuctl.bucket import add_bucket_commands
from gpuctl.completion import FILES, SCRIPTS
from gpuctl.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SPEC,
    CliError,
    SpecRefused,
    one_line,
)
from gpuctl.inputs import chosen_workspace, my_workspaces, read_spec
from gpuctl.login import add_login_command
from gpuctl.notebook import add_notebook_commands
from gpuctl.output import (
    COST_GROUPS,
    FORMATS,
    format_costs,
    format_frozen_quote,
    format_job,
    format_jobs,
    format_quota,
    format_quote,
    format_table,
    format_workspaces,
    headers_in,
    pad,
    pending_reason,
    to_json,
    to_yaml,
    width,
)
from gpuctl.schedule import add_schedule_commands, has_schedule, submit_schedule
from gpuctl.secrets import add_secret_commands
from gpuctl.serve import add_serve_commands
from gpuctl.service_accounts import add_service_account_commands
from gpuctl.settings import (
    DEFAULT_URL,
    ENV_PREFIX,
    PROFILE_ENV,
    Settings,
    check_url,
    config_file_path,
    read_config_file,
    resolve_settings,
    update_config_file,
)
from gpuctl.ssh import add_ssh_commands
from gpuctl.volume import add_volume_commands

__all__ = ["CliError", "config_file_path", "format_job", "format_quote", "format_table", "main",
           "resolve_settings", "spec_error_line"]

JOB_STATES = ("Pending", "Scheduled", "Running", "Succeeded", "Failed", "Preempted", "Cancelled", "Stopped")
DEBUG_ENV = ENV_PREFIX + "DEBUG"


# --------------------------------------------------------------------------- one command's run


@dataclass
class Run:
    """What one command needs: the parsed arguments, the settings and the API, where to print,
    stdin for `-`."""

    args: argparse.Namespace
    settings: Settings | None
    api: Api | None
    out: TextIO
    err: TextIO
    stdin: TextIO
    env: Mapping[str, str]
    lang: str = "en"

    def say(self, text: str, **values) -> str:
        """One of gpuctl's sentences in the reader's language (gpuctl.messages)."""
        return messages.say(self.lang, text, **values)

    def print(self, text: str = "") -> None:
        print(text, file=self.out)

    def note(self, text: str) -> None:
        """A remark for the person, not the pipe (e.g. an empty list)."""
        print(text, file=self.err)

    @property
    def output(self) -> str:
        """-o FORMAT; the older --json means -o json."""
        return getattr(self.args, "output", None) or ("json" if self.args.json else "table")

    @property
    def headers(self) -> bool:
        return not getattr(self.args, "no_headers", False)

    def emit(self, data: Any) -> None:
        """Structured output (-o json or yaml)."""
        self.print(to_yaml(data) if self.output == "yaml" else to_json(data))

    @property
    def structured(self) -> bool:
        return self.output in ("json", "yaml")

    def listing(self, answer: Any, rows: list[list[Any]], headers: list[str], *, empty: str,
                right: tuple[int, ...] = ()) -> bool:
        """A list command's output: `answer` as it came (-o json|yaml), else `rows` as a table, or the
        `empty` remark when there are none. Returns whether a table was printed."""
        if self.structured:
            self.emit(answer)
            return False
        if not rows:
            self.note(empty)
            return False
        self.print(format_table(headers_in(self.lang, headers), rows, right=right, headers_shown=self.headers,
                                lang=self.lang))
        return True


def spec_body(run: Run, path: str) -> tuple[str, str, dict[str, Any]]:
    label, text = read_spec(path, run.stdin)
    workspace = chosen_workspace(run)
    return label, workspace, {"workspace": workspace, "spec": text}


# --------------------------------------------------------------------------- jobs


def cmd_submit(run: Run) -> int:
    args = run.args
    if args.file and args.filename and args.file != args.filename:
        raise CliError("give the spec once: FILE or -f FILE", EXIT_SPEC)
    path = args.filename or args.file
    if not path:
        raise CliError("submit needs a spec: gpuctl submit -f FILE (- reads standard input)", EXIT_SPEC)
    label, workspace, body = spec_body(run, path)
    body["spec"] = with_deadline(body["spec"], args.complete_within, args.complete_by, label)
    missing = f"no such workspace: {workspace}"
    if args.quote_only:
        answer = run.api.call("POST", "/api/v1/quotes/", body=body, spec_file=label, not_found=missing)
        if run.structured:
            run.emit(answer)
        else:
            run.print(format_quote(answer, label, workspace, numbered=True, lang=run.lang))
        return EXIT_OK
    option = args.option
    if option and option.isdigit():  # a row of `--quote-only`; option ids are never all digits
        answer = run.api.call("POST", "/api/v1/quotes/", body=body, spec_file=label, not_found=missing)
        options = answer.get("options") or []
        if not 1 <= int(option) <= len(options):
            raise SpecRefused([f"{label}: option: there is no option {option}; the quote has {len(options)} "
                               f"(see gpuctl submit -f {label} --quote-only)"])
        option = options[int(option) - 1]["id"]
    if option:
        body["option"] = option
    if has_schedule(body["spec"]):  # a spec with `schedule:` makes a schedule, whose runs are the jobs
        return submit_schedule(run, body, label, missing)
    job = run.api.call("POST", "/api/v1/jobs/", body=body, spec_file=label, not_found=missing)
    if run.structured:
        run.emit(job)
        return EXIT_OK
    run.print(run.say("submitted job {id} ({name}) to {workspace}, queue {queue}: {state}", id=job["id"],
                      name=job["name"], workspace=job["workspace"], queue=job["queue"], state=job["state"]))
    if job.get("pending_reason"):
        run.print(run.say("pending reason: {reason}", reason=pending_reason(job)))
    if job.get("quote"):
        run.print(run.say("quote: {quote}", quote=format_frozen_quote(job["quote"], run.lang)))
    return EXIT_OK


def with_deadline(text: str, within: str | None, by: str | None, label: str) -> str:
    """The spec's text with `completeWithin` or `completeBy` set from the command line (replacing the spec's
    own); the server checks the values."""
    if not within and not by:
        return text
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        return text  # the server says what is wrong with it
    if not isinstance(document, dict):
        raise SpecRefused([f"{label}: --complete-within and --complete-by need a spec written as a mapping"])
    document.pop("completeWithin", None)
    document.pop("completeBy", None)
    document["completeWithin" if within else "completeBy"] = within or by
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)


def cmd_quote(run: Run) -> int:
    label, workspace, body = spec_body(run, run.args.file)
    answer = run.api.call("POST", "/api/v1/quotes/", body=body, spec_file=label,
                          not_found=f"no such workspace: {workspace}")
    if run.structured:
        run.emit(answer)
    else:
        run.print(format_quote(answer, label, workspace, lang=run.lang))
    return EXIT_OK


def list_jobs(run: Run) -> tuple[list[dict], str]:
    """The jobs asked for, and how to say there are none ("no Pending jobs in vision-lab")."""
    params: dict[str, str] = {}
    workspace = run.settings.workspace
    if workspace:
        params["workspace"] = workspace
    if run.args.state:
        params["state"] = run.args.state.capitalize()  # `pending` means `Pending`
    jobs = run.api.get_all("/api/v1/jobs/", params=params,
                           not_found=run.say("no such workspace: {workspace}", workspace=workspace))
    none = ("no {state} jobs" if "state" in params else "no jobs") + (" in {workspace}" if workspace else "")
    return jobs, run.say(none, state=params.get("state"), workspace=workspace)


def cmd_jobs(run: Run) -> int:
    jobs, none = list_jobs(run)
    if run.structured:
        run.emit(jobs)
    elif jobs:
        run.print(format_jobs(jobs, wide=run.output == "wide", headers_shown=run.headers, lang=run.lang))
    else:
        run.print(none)
    return EXIT_OK


def cmd_get(run: Run) -> int:
    if run.args.resource in ("workspaces", "workspace"):
        workspaces = run.api.get_all("/api/v1/workspaces/", not_found="the server has no workspaces API")
        if run.structured:
            run.emit(workspaces)
        elif workspaces:
            run.print(format_workspaces(workspaces, headers_shown=run.headers, lang=run.lang))
        else:
            run.note(run.say("you are a member of no workspace"))
        return EXIT_OK
    jobs, none = list_jobs(run)
    if run.structured:
        run.emit(jobs)
    elif jobs:
        run.print(format_jobs(jobs, wide=run.output == "wide", headers_shown=run.headers, lang=run.lang))
    else:
        run.note(none)  # on stderr, as kubectl does: a pipe reading rows gets none
    return EXIT_OK


def cmd_show(run: Run) -> int:
    job_id = run.args.id
    missing = f"no such job: {job_id}"
    job = run.api.call("GET", f"/api/v1/jobs/{job_id}/", not_found=missing)
    events = run.api.call("GET", f"/api/v1/jobs/{job_id}/events/", not_found=missing)
    if run.structured:
        run.emit({**job, "events": events})
    else:
        run.print(format_job(job, events, lang=run.lang))
    return EXIT_OK


def cmd_cancel(run: Run) -> int:
    """Cancels each job named; with several, one that cannot be cancelled is reported and the rest go on."""
    ids: list[int] = run.args.ids
    index = getattr(run.args, "index", None)   # one index of an array
    body = {"index": index} if index is not None else None
    cancelled, worst = [], EXIT_OK
    for job_id in ids:
        try:
            job = run.api.call("POST", f"/api/v1/jobs/{job_id}/cancel/", body=body,
                               not_found=f"no such job: {job_id}")
        except CliError as error:
            if len(ids) == 1:
                raise
            message = str(error)
            report(message if message.startswith("no such job") else f"job {job_id}: {message}", run.err)
            worst = max(worst, error.exit_code)
            continue
        cancelled.append(job)
        if not run.structured:
            run.print(run.say("job {id} ({name}): {state}", id=job["id"], name=job["name"], state=job["state"]))
    if run.structured and (cancelled or len(ids) > 1):
        run.emit(cancelled[0] if len(ids) == 1 else cancelled)
    return worst


def cmd_logs(run: Run) -> int:
    job_id = run.args.id
    params = {"replica": run.args.replica} if run.args.replica else {}
    if run.args.follow:
        params["follow"] = "1"
    for chunk in run.api.stream_text(f"/api/v1/jobs/{job_id}/logs/", params=params, follow=run.args.follow,
                                     not_found=f"no such job: {job_id}"):
        run.out.write(chunk)
        run.out.flush()
    return EXIT_OK


# --------------------------------------------------------------------------- quota and cost


def cmd_quota(run: Run) -> int:
    slugs = [run.settings.workspace] if run.settings.workspace else my_workspaces(run.api)
    entries = []
    for slug in slugs:
        queues = run.api.get_all(f"/api/v1/workspaces/{slug}/queues/", not_found=f"no such workspace: {slug}")
        entries.extend({"workspace": slug, **queue} for queue in queues)
    if run.structured:
        run.emit(entries)
    elif entries:
        run.print(format_quota(entries, wide=run.output == "wide", headers_shown=run.headers, lang=run.lang))
    else:
        run.note(run.say("no queues for {workspace}", workspace=slugs[0]) if len(slugs) == 1 else run.say("no queues"))
    return EXIT_OK


def month_arg(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d{4})-(\d{2})", text.strip())
    if not match or not 1 <= int(match[2]) <= 12 or not 1970 <= int(match[1]) <= 2100:
        raise argparse.ArgumentTypeError(f"{text!r} is not a month such as 2026-03")
    return int(match[1]), int(match[2])


def cmd_cost(run: Run) -> int:
    year, month = run.args.month or (date.today().year, date.today().month)  # the caller's calendar
    start, end = date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])
    workspace = run.settings.workspace
    params = {"start": start.isoformat(), "end": end.isoformat(), "group_by": run.args.by}
    if workspace:
        params["workspace"] = workspace
    missing = f"no such workspace: {workspace}"
    answer = run.api.call("GET", "/api/v1/costs/", params=params, not_found=missing)
    rows = list(answer.get("rows") or [])
    while answer.get("page", 1) < answer.get("pages", 1):
        answer = run.api.call("GET", "/api/v1/costs/", params={**params, "page": answer["page"] + 1},
                              not_found=missing)
        rows.extend(answer.get("rows") or [])
    report_ = {"workspace": workspace, "month": f"{year:04d}-{month:02d}", "start": params["start"],
               "end": params["end"], "currency": answer.get("currency"), "as_of": answer.get("as_of"),
               "total": answer.get("total"), "group_by": answer.get("group_by"), "rows": rows}
    if run.structured:
        run.emit(report_)
        return EXIT_OK
    title = run.say("costs of {workspace} in {month} ({start} to {end}), by {group_by}",
                    workspace=workspace or run.say("all my workspaces"), month=report_["month"], start=params["start"],
                    end=params["end"], group_by=report_["group_by"])
    run.print(format_costs(report_, title=title, wide=run.output == "wide", headers_shown=run.headers,
                           lang=run.lang))
    return EXIT_OK


# --------------------------------------------------------------------------- config and completion


def masked(token: str | None) -> str | None:
    return f"{token[:8]}..." if token else None


def cmd_config_view(run: Run) -> int:
    settings = run.settings
    config = read_config_file(settings.config_file)
    view = {
        "config_file": str(settings.config_file) + ("" if config.exists else " (none yet)"),
        "profile": settings.profile,
        "url": settings.url,
        "token": masked(settings.token),
        "workspace": settings.workspace,
        "sources": dict(settings.sources),
        "profiles": {name: {**values, "token": masked(values.get("token"))} if "token" in values else values
                     for name, values in config.profiles.items()},
        "default_profile": config.default_profile,
    }
    if run.structured:
        run.emit(view)
        return EXIT_OK
    config_file = (str(settings.config_file) if config.exists
                   else run.say("{path} (none yet)", path=settings.config_file))
    fields = [(run.say("config file"), config_file), (run.say("profile"), settings.profile)]
    fields += [(run.say(key), f"{view[key]}  ({_source(run, settings.sources[key])})" if view[key] else None)
               for key in ("url", "token", "workspace")]
    size = max(11, *(width(name) for name, _ in fields))
    run.print("\n".join(f"{pad(name, size)}  {value if value is not None else '-'}" for name, value in fields))
    if config.profiles:
        rows = [("*" if name == config.default_profile else "", name, values.get("url"), values.get("workspace"),
                 masked(values.get("token"))) for name, values in sorted(config.profiles.items())]
        run.print()
        run.print(format_table([run.say(h) for h in ("DEFAULT", "PROFILE", "URL", "WORKSPACE", "TOKEN")], rows,
                               lang=run.lang))
    return EXIT_OK


def _source(run: Run, source: str) -> str:
    """Where a setting came from, in the reader's words (flags, variables and paths as they are)."""
    if source == "default":
        return run.say("default")
    if source.startswith("profile "):
        return run.say("profile {name}", name=source.removeprefix("profile "))
    return source


def cmd_config_set_profile(run: Run) -> int:
    args = run.args
    values = {key: (getattr(args, key, None) or "").strip() for key in ("url", "token", "workspace")}
    if values["url"]:
        values["url"] = values["url"].rstrip("/")
        check_url(values["url"])
    path = config_file_path(run.env)
    update_config_file(path, profile=args.name, values=values,
                       default_profile=args.name if args.default else None)
    changed = ", ".join(key for key, value in values.items() if value) or run.say("nothing")
    run.print(run.say("profile {name} in {path}: set {changed}", name=args.name, path=path, changed=changed)
              + (run.say("; it is the default") if args.default else ""))
    return EXIT_OK


def cmd_config_use_profile(run: Run) -> int:
    path = config_file_path(run.env)
    update_config_file(path, default_profile=run.args.name)
    run.print(run.say("default profile: {name} ({path})", name=run.args.name, path=path))
    return EXIT_OK


def cmd_completion(run: Run) -> int:
    run.print(SCRIPTS[run.args.shell](build_parser()).rstrip("\n"))
    return EXIT_OK


# --------------------------------------------------------------------------- arguments


class Parser(argparse.ArgumentParser):
    """argparse with a one-line usage error: `gpuctl: error: MESSAGE (see 'gpuctl get --help')`."""

    def error(self, message: str) -> NoReturn:
        report(f"{message} (see '{self.prog} --help')", sys.stderr)
        self.exit(EXIT_SPEC)


def _add_global_options(parser: argparse.ArgumentParser, *, in_command: bool) -> None:
    """Global options work before or after the command; after it they must not reset what was
    given before it, hence SUPPRESS defaults on the command parsers."""
    unset = argparse.SUPPRESS if in_command else None
    parser.add_argument("--url", default=unset, help=f"the platform's URL (default {DEFAULT_URL})")
    parser.add_argument("--token", default=unset, help="an API token gpt_... (see /account/tokens/)")
    parser.add_argument("-w", "--workspace", default=unset, metavar="SLUG", help="the workspace to act in")
    parser.add_argument("--profile", default=unset, metavar="NAME",
                        help=f"a profile of the config file (default: {PROFILE_ENV}, then default_profile)")
    parser.add_argument("--lang", default=unset, choices=messages.LANGUAGES,
                        help="the language of gpuctl's messages (default: from LC_ALL / LC_MESSAGES / LANG)")
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS if in_command else False,
                        help="print the API's JSON instead of tables (the same as -o json)")


def _add_output(parser: argparse.ArgumentParser, *, headers: bool = False) -> None:
    parser.add_argument("-o", "--output", choices=FORMATS, help="table (default), wide (more columns), json, yaml")
    if headers:
        parser.add_argument("--no-headers", action="store_true", help="leave out the header line (and totals)")


def _state_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state", help=", ".join(JOB_STATES) + " (any case)").complete = list(JOB_STATES)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="gpuctl",
        description="Submit, follow and account for GPU jobs on the platform.",
        epilog=f"Settings: flags, then {ENV_PREFIX}URL / {ENV_PREFIX}TOKEN / {ENV_PREFIX}WORKSPACE, then the "
               f"profile (--profile, {PROFILE_ENV}, default_profile), then $XDG_CONFIG_HOME/gpuctl/config.toml. "
               "Exit codes: 0 ok, 1 error, 2 spec refused or usage, 130 interrupted, 141 output pipe closed.",
    )
    _add_global_options(parser, in_command=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)

    def command(group, name: str, handler, help_text: str, *, settings: bool = True) -> argparse.ArgumentParser:
        sub = group.add_parser(name, help=help_text, description=help_text)
        _add_global_options(sub, in_command=True)
        sub.set_defaults(handler=handler, needs_settings=settings)
        return sub

    submit = command(commands, "submit", cmd_submit, "submit a job spec (task YAML); - reads standard input")
    submit.add_argument("file", metavar="FILE", nargs="?", help="the spec (or -f FILE)").complete = FILES
    submit.add_argument("-f", "--filename", metavar="FILE", help="the spec; - reads standard input").complete = FILES
    choice = submit.add_mutually_exclusive_group()
    choice.add_argument("--option", metavar="N|ID",
                        help="run as option N of --quote-only (or an option id from `gpuctl quote`)")
    choice.add_argument("--quote-only", action="store_true", help="print the numbered options; submit nothing")
    deadline = submit.add_mutually_exclusive_group()
    deadline.add_argument("--complete-within", metavar="DURATION",
                          help="done within this long of submission, e.g. 12h (the spec's completeWithin)")
    deadline.add_argument("--complete-by", metavar="TIME",
                          help="done by this time, ISO 8601 with its offset, e.g. 2026-12-01T08:00:00+08:00")
    _add_output(submit)

    quote = command(commands, "quote", cmd_quote, "price every way a job spec can run, before submitting")
    quote.add_argument("file", metavar="FILE").complete = FILES
    _add_output(quote)

    jobs = command(commands, "jobs", cmd_jobs, "list my jobs (in --workspace, else in all my workspaces)")
    _state_option(jobs)
    _add_output(jobs, headers=True)

    get = command(commands, "get", cmd_get, "list jobs (in -w WORKSPACE, else in all mine) or workspaces")
    get.add_argument("resource", choices=("jobs", "job", "workspaces", "workspace")).complete = ["jobs", "workspaces"]
    _state_option(get)
    _add_output(get, headers=True)

    show = command(commands, "show", cmd_show, "one job: state, reason, cost, replicas, quote, events")
    show.add_argument("id", type=int, metavar="ID")
    _add_output(show)

    describe = command(commands, "describe", cmd_show,
                       "one job in full: state and reason, queue position, placement, cost, quote, events")
    describe.add_argument("resource", choices=("job", "jobs")).complete = ["job"]
    describe.add_argument("id", type=int, metavar="ID")
    _add_output(describe)

    cancel = command(commands, "cancel", cmd_cancel, "cancel jobs")
    cancel.add_argument("ids", type=int, nargs="+", metavar="ID")
    cancel.add_argument("--index", type=int, metavar="N", help="cancel only index N of an array job")
    _add_output(cancel)

    logs = command(commands, "logs", cmd_logs, "a job's replica logs, kept after it ended")
    logs.add_argument("id", type=int, metavar="ID")
    logs.add_argument("--replica", metavar="NAME", help="one replica, e.g. worker-0 (default: all)")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines while the job runs")

    quota = command(commands, "quota", cmd_quota,
                    "GPU quotas of my queues: deserved, limit, allocated, fair share, pending jobs")
    _add_output(quota, headers=True)

    cost = command(commands, "cost", cmd_cost, "what my jobs cost in a month, from the ledger")
    cost.add_argument("--month", type=month_arg, metavar="YYYY-MM", help="default: this month")
    cost.add_argument("--by", choices=tuple(COST_GROUPS), default="job", help="one row per ... (default: job)")
    _add_output(cost, headers=True)

    config = command(commands, "config", None, "show or change the profiles of the config file")
    config_commands = config.add_subparsers(dest="config_command", required=True, metavar="ACTION",
                                            parser_class=Parser)
    view = command(config_commands, "view", cmd_config_view, "the settings in force and where each comes from")
    _add_output(view)
    set_profile = command(config_commands, "set-profile", cmd_config_set_profile,
                          "create or change a profile with --url, --token, --workspace", settings=False)
    set_profile.add_argument("name", metavar="NAME")
    set_profile.add_argument("--default", action="store_true", help="and make it the default profile")
    use_profile = command(config_commands, "use-profile", cmd_config_use_profile,
                          "make a profile the default", settings=False)
    use_profile.add_argument("name", metavar="NAME")

    add_notebook_commands(commands, command, _add_output)
    add_serve_commands(commands, command, _add_output)
    add_secret_commands(commands, command, _add_output)
    add_service_account_commands(commands, command, _add_output)
    add_login_command(commands, command)
    add_volume_commands(commands, command, _add_output)
    add_bucket_commands(commands, command, _add_output)
    add_schedule_commands(commands, command, _add_output)
    add_ssh_commands(commands, command, _add_output)

    completion = command(commands, "completion", cmd_completion,
                         "print the shell completion script: source <(gpuctl completion bash)", settings=False)
    completion.add_argument("shell", choices=tuple(SCRIPTS))
    return parser


# --------------------------------------------------------------------------- the entry point


def report(message: str, err: TextIO, lang: str = "en") -> None:
    """One line on stderr; a closed stderr is no reason to fail further."""
    try:
        print(messages.say(lang, "gpuctl: error: {message}", message=one_line(message)), file=err)
    except (OSError, ValueError):
        pass


def _silence_stdout() -> None:
    """After the reader went away: point stdout at /dev/null so the interpreter's last flush cannot
    fail again (the recipe of the Python docs, signal module, "Note on SIGPIPE")."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (a test's capture)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def main(argv: Sequence[str] | None = None, *, env: Mapping[str, str] | None = None,
         transport: httpx.BaseTransport | None = None) -> int:
    """The `gpuctl` entry point; `env` and `transport` stand in for the real ones in tests."""
    env = os.environ if env is None else env
    out, err = sys.stdout, sys.stderr
    lang = messages.language(None, env)
    try:
        args = build_parser().parse_args(argv)
        lang = messages.language(getattr(args, "lang", None), env)
        code = _run(args, env, transport, out, err)
        out.flush()  # here, not at exit: a closed pipe is seen while it can still be handled
        return code
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except SpecRefused as refused:
        for line in refused.lines:
            print(line, file=err)
        return refused.exit_code
    except CliError as error:
        report(str(error), err, lang)
        return error.exit_code
    except Exception as error:  # one line, never a traceback, unless asked for
        if env.get(DEBUG_ENV):
            raise
        report(f"unexpected {type(error).__name__}: {error} (run with {DEBUG_ENV}=1 for the traceback)", err, lang)
        return EXIT_ERROR


def _run(args: argparse.Namespace, env: Mapping[str, str], transport: httpx.BaseTransport | None,
         out: TextIO, err: TextIO) -> int:
    lang = messages.language(getattr(args, "lang", None), env)
    if not args.needs_settings:
        return args.handler(Run(args=args, settings=None, api=None, out=out, err=err, stdin=sys.stdin, env=env,
                                lang=lang))
    settings = resolve_settings(
        {"url": args.url, "token": args.token, "workspace": args.workspace, "profile": args.profile}, env)
    api = Api(settings, transport=transport, accept_language=messages.accept_language(lang))
    try:
        return args.handler(Run(args=args, settings=settings, api=api, out=out, err=err, stdin=sys.stdin, env=env,
                                lang=lang))
    finally:
        api.close()


if __name__ == "__main__":
    sys.exit(main())

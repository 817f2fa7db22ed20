"""`gpuctl`: the tenant's command line for the jobs API (an HTTP client; no Django here).

Configuration, highest first: the flags `--url`, `--token`, `--workspace`; the environment
`GPUCTL_URL`, `GPUCTL_TOKEN`, `GPUCTL_WORKSPACE`; the TOML file
`$XDG_CONFIG_HOME/gpuctl/config.toml` (default `~/.config/gpuctl/config.toml`, keys `url`,
`token`, `workspace`); the default URL http://127.0.0.1:8000.

Exit codes: 0 success, 1 any other error, 2 a spec the server refused (and usage errors).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tomllib
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import httpx

DEFAULT_URL = "http://127.0.0.1:8000"
CONFIG_KEYS = ("url", "token", "workspace")
ENV_PREFIX = "GPUCTL_"
TIMEOUT_S = 30.0
EXIT_OK, EXIT_ERROR, EXIT_SPEC = 0, 1, 2


class CliError(Exception):
    """An error the user can act on: printed as `gpuctl: MESSAGE`, then exit with `exit_code`."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR):
        super().__init__(message)
        self.exit_code = exit_code


class SpecRefused(CliError):
    """The server's 400 on a spec: one `FILE:LINE:COL: FIELD: MESSAGE` line per error."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines), EXIT_SPEC)
        self.lines = lines


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class Settings:
    url: str
    token: str | None
    workspace: str | None
    config_file: Path


def config_file_path(env: Mapping[str, str]) -> Path:
    """`$XDG_CONFIG_HOME/gpuctl/config.toml`; the XDG spec ignores a relative XDG_CONFIG_HOME."""
    xdg = env.get("XDG_CONFIG_HOME", "")
    if xdg and os.path.isabs(xdg):
        base = Path(xdg)
    else:
        base = Path(env["HOME"]) / ".config" if env.get("HOME") else Path.home() / ".config"
    return base / "gpuctl" / "config.toml"


def read_config_file(path: Path) -> dict[str, str]:
    """The file's settings; a missing file is no settings, a broken one is an error naming it."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise CliError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as error:
        raise CliError(f"{path}: invalid TOML: {error}") from None
    values: dict[str, str] = {}
    for key, value in data.items():
        if key not in CONFIG_KEYS:
            raise CliError(f"{path}: unknown key {key!r} (known: {', '.join(CONFIG_KEYS)})")
        if not isinstance(value, str):
            raise CliError(f"{path}: {key} must be a string, not {type(value).__name__}")
        if value.strip():
            values[key] = value.strip()
    return values


def resolve_settings(flags: Mapping[str, str | None], env: Mapping[str, str]) -> Settings:
    """Flags over environment over config file over the default URL (empty values count as unset)."""
    path = config_file_path(env)
    from_file = read_config_file(path)

    def pick(key: str) -> str | None:
        for value in (flags.get(key), env.get(ENV_PREFIX + key.upper()), from_file.get(key)):
            if value and value.strip():
                return value.strip()
        return None

    url = (pick("url") or DEFAULT_URL).rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise CliError(f"the URL {url!r} must start with http:// or https://")
    return Settings(url=url, token=pick("token"), workspace=pick("workspace"), config_file=path)


# --------------------------------------------------------------------------- the API


class Api:
    """The jobs API over HTTP, with every failure turned into a CliError the user can act on."""

    def __init__(self, settings: Settings, transport: httpx.BaseTransport | None = None):
        self.settings = settings
        headers = {"Accept": "application/json", "User-Agent": "gpuctl"}
        if settings.token:
            headers["Authorization"] = f"Bearer {settings.token}"
        self.http = httpx.Client(base_url=settings.url, headers=headers, timeout=TIMEOUT_S, transport=transport)

    def close(self) -> None:
        self.http.close()

    def call(self, method: str, path: str, *, not_found: str, body: dict | None = None,
             params: dict | None = None, spec_file: str | None = None) -> Any:
        """The JSON answer of a 2xx; `not_found` is the message for the API's own 404, and
        `spec_file` turns the errors of a 400 or 422 into `FILE:LINE:COL` lines (exit 2)."""
        self._need_token()
        try:
            response = self.http.request(method, path, json=body, params=params)
        except httpx.TimeoutException:
            raise CliError(f"cannot reach {self.settings.url}: no answer within {TIMEOUT_S:g} s") from None
        except httpx.HTTPError as error:
            raise CliError(f"cannot reach {self.settings.url}: {error}") from None
        if response.is_success:
            return self._json(response)
        raise self._failure(response, not_found=not_found, spec_file=spec_file)

    def stream_text(self, path: str, *, not_found: str, params: dict | None = None,
                    follow: bool = False) -> Iterator[str]:
        """A text/plain answer as it arrives; a follow stream may stay quiet a long time between lines."""
        self._need_token()
        timeout = httpx.Timeout(TIMEOUT_S, read=None) if follow else TIMEOUT_S
        try:
            with self.http.stream("GET", path, params=params, headers={"Accept": "text/plain"},
                                  timeout=timeout) as response:
                if not response.is_success:
                    response.read()
                    raise self._failure(response, not_found=not_found, spec_file=None)
                yield from response.iter_text()
        except httpx.TimeoutException:
            raise CliError(f"cannot reach {self.settings.url}: no answer within {TIMEOUT_S:g} s") from None
        except httpx.HTTPError as error:
            raise CliError(f"cannot reach {self.settings.url}: {error}") from None

    def get_all(self, path: str, *, not_found: str, params: dict | None = None) -> list[dict]:
        """Every item of a list, following the LimitOffsetPagination `next` links."""
        answer = self.call("GET", path, not_found=not_found, params=params)
        if isinstance(answer, list):
            return answer
        items = list(answer["results"])
        while answer.get("next"):
            answer = self.call("GET", answer["next"], not_found=not_found)
            items.extend(answer["results"])
        return items

    def _need_token(self) -> None:
        if not self.settings.token:
            raise CliError(
                f"no API token: pass --token, set {ENV_PREFIX}TOKEN or put token in "
                f"{self.settings.config_file}; create one at {self.tokens_page}"
            )

    @property
    def tokens_page(self) -> str:
        return f"{self.settings.url}/account/tokens/"

    def _json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            raise CliError(
                f"{self.settings.url} answered {response.status_code} with something that is not JSON "
                f"(is it the GPU platform?)"
            ) from None

    def _failure(self, response: httpx.Response, *, not_found: str, spec_file: str | None) -> CliError:
        status = response.status_code
        try:
            data = response.json()
        except ValueError:
            data = None
        if status == 401:
            return CliError(f"token refused: create one at {self.tokens_page}")
        if status == 404:
            if data is None:  # not the API's 404: a URL this server does not serve
                path = response.request.url.path
                return CliError(f"{self.settings.url} has no {response.request.method} {path} "
                                f"(a server without this API, or a wrong --url)")
            if _names_a_field(data):  # a parameter names something missing, not the object in the path
                return CliError(error_message(data))
            return CliError(not_found)
        if status in (400, 422) and spec_file is not None and isinstance(data, dict) and data.get("errors"):
            # 400: the spec is wrong; 422: no pool can run it; either way the spec must change
            return SpecRefused([spec_error_line(spec_file, error) for error in data["errors"]])
        if status == 403:
            return CliError(f"forbidden: {error_message(data) if data is not None else response.reason_phrase}")
        if data is not None and status < 500:
            return CliError(error_message(data))
        return CliError(f"server answered {status}: {response.text.strip()[:200] or response.reason_phrase}")


def _names_a_field(data: Any) -> bool:
    errors = data.get("errors") if isinstance(data, dict) else None
    return isinstance(errors, list) and any(isinstance(e, dict) and e.get("field") for e in errors)


def spec_error_line(spec_file: str, error: Mapping[str, Any]) -> str:
    """`job.yaml:7:3: MaxReplicas: ...`; the position or field is left out when the API has none."""
    where = spec_file
    if error.get("line") is not None:
        where += f":{error['line']}"
        if error.get("column") is not None:
            where += f":{error['column']}"
    field = f" {error['field']}:" if error.get("field") else ""
    return f"{where}:{field} {error.get('message', '')}".rstrip()


def error_message(data: Any) -> str:
    """The words of any error body the API sends: `errors`, DRF's `detail`, or field -> messages."""
    if isinstance(data, dict):
        if isinstance(data.get("errors"), list):
            return "; ".join(
                f"{e['field']}: {e.get('message', '')}" if isinstance(e, dict) and e.get("field")
                else str(e.get("message", e) if isinstance(e, dict) else e)
                for e in data["errors"]
            )
        if "detail" in data:
            return str(data["detail"])
        return "; ".join(f"{key}: {error_message(value)}" for key, value in data.items())
    if isinstance(data, list):
        return " ".join(error_message(item) for item in data)
    return str(data)


# --------------------------------------------------------------------------- output


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return " ".join(str(value).split())  # one line per row keeps the columns aligned


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, right: Collection[int] = ()) -> str:
    """Columns padded to their widest cell, two spaces apart; `right` holds numeric columns."""
    cells = [list(headers)] + [[cell(value) for value in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        parts = [text.rjust(width) if i in right else text.ljust(width)
                 for i, (text, width) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def format_time(value: str | None) -> str:
    """An API timestamp as `YYYY-MM-DD HH:MM:SS` in UTC."""
    if not value:
        return "-"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def format_jobs(jobs: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        (job["id"], job["name"], job["workspace"], job["queue"], job["state"], job.get("priority"),
         len(job.get("replicas") or ()), format_time(job.get("created")),
         (job.get("pending_reason") or None) if job["state"] == "Pending" else None)
        for job in jobs
    ]
    headers = ("ID", "NAME", "WORKSPACE", "QUEUE", "STATE", "PRIORITY", "REPLICAS", "CREATED (UTC)", "REASON")
    return format_table(headers, rows, right={0, 5, 6})


def format_quote_options(answer: Mapping[str, Any]) -> str:
    """The options of a `POST /api/v1/quotes/` answer, cheapest marked with `*`."""
    currency = answer.get("currency", "")
    rows = []
    for option in answer.get("options", []):
        low, high = option.get("estimate_low"), option.get("estimate_high")
        rows.append((
            option["id"], option.get("sharing"), option.get("vendor"), option.get("gpu_model"),
            option.get("pool"), bool(option.get("spot")), option.get("when"),
            option.get("price_per_hour"), option.get("price_per_hour_offpeak"),
            low if low == high else f"{low}-{high}", "*" if option.get("cheapest") else "",
        ))
    headers = ("ID", "SHARING", "VENDOR", "GPU MODEL", "POOL", "SPOT", "WHEN", f"PRICE/H ({currency})",
               f"PRICE/H OFF-PEAK ({currency})", f"ESTIMATE ({currency})", "CHEAPEST")
    return format_table(headers, rows, right={7, 8, 9})


def format_quote(answer: Mapping[str, Any], spec_file: str, workspace: str) -> str:
    hours = answer.get("expected_duration_hours")
    lines = [f"quote for {spec_file} in {workspace}, {answer.get('currency', '')}"
             + (f", expected duration {hours} h" if hours is not None else "")]
    options = answer.get("options") or []
    if options:
        lines.append(format_quote_options(answer))
        cheapest = next((option["id"] for option in options if option.get("cheapest")), None)
        if cheapest:
            lines.append(f"cheapest: {cheapest}  (gpuctl submit {spec_file} --option {cheapest})")
        tradeoffs = [(option["id"], option.get("tradeoffs")) for option in options if option.get("tradeoffs")]
        if tradeoffs:  # below the table: they are sentences, too long for a column
            lines += ["", "trade-offs:"]
            lines.extend(f"  {option_id}: {'; '.join(items)}" for option_id, items in tradeoffs)
    else:
        lines.append("no option can run this spec")
    lines.extend(f"not offered: {reason}" for reason in answer.get("unavailable") or ())
    return "\n".join(lines)


def format_job(job: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> str:
    """One job: its fields, replicas (node and GPUs), frozen quote and events."""
    fields = [
        ("job", job["id"]),
        ("name", job.get("name")),
        ("workspace", job.get("workspace")),
        ("queue", job.get("queue")),
        ("state", job.get("state")),
        ("pending reason", job.get("pending_reason") or None),
        ("type", job.get("type")),
        ("priority", job.get("priority")),
        ("preemptible", job.get("preemptible")),
        ("reduce cost", job.get("reduce_cost")),
        ("expected", _duration(job.get("expected_duration_s"))),
        ("created", format_time(job.get("created"))),
        ("started", format_time(job.get("started"))),
        ("finished", format_time(job.get("finished"))),
    ]
    width = max(len(name) for name, _ in fields)
    lines = [f"{name.ljust(width)}  {cell(value)}" for name, value in fields]

    lines += ["", "replicas"]
    replicas = job.get("replicas") or []
    if replicas:
        rows = [(r.get("role"), r.get("index"), r.get("state"), r.get("node"),
                 ",".join(str(gpu) for gpu in r.get("gpus") or ()), _compact(r.get("slice")),
                 format_time(r.get("started")), format_time(r.get("ended")))
                for r in replicas]
        lines.append(format_table(("ROLE", "INDEX", "STATE", "NODE", "GPUS", "SLICE", "STARTED", "ENDED"),
                                  rows, right={1}))
    else:
        lines.append("(none placed yet)" if job.get("state") == "Pending" else "(none)")

    lines += ["", "quote"]
    lines.append(_format_frozen_quote(job.get("quote")))

    lines += ["", "events"]
    if events:
        rows = [(format_time(e.get("time")), e.get("kind"), e.get("state"), e.get("reason")) for e in events]
        lines.append(format_table(("TIME (UTC)", "KIND", "STATE", "REASON"), rows))
    else:
        lines.append("(none)")
    return "\n".join(lines)


def _format_frozen_quote(quote: Any) -> str:
    if not quote:
        return "(none)"
    if not isinstance(quote, Mapping):
        return _compact(quote)
    option = quote.get("option") if isinstance(quote.get("option"), Mapping) else quote
    currency = option.get("currency") or quote.get("currency") or ""
    parts = [f"option {option.get('id', '-')}"]
    for key, label in (("price_per_hour", "price/h"), ("price_per_hour_offpeak", "off-peak price/h")):
        if option.get(key) is not None:
            parts.append(f"{label} {option[key]} {currency}".rstrip())
    if option.get("estimate_low") is not None:
        parts.append(f"estimate {option['estimate_low']}-{option.get('estimate_high')} {currency}".rstrip())
    return ", ".join(parts)


def _compact(value: Any) -> str:
    if value is None or value == "":
        return "-"
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), sort_keys=True)


def _duration(seconds: Any) -> str | None:
    if not isinstance(seconds, int):
        return None
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return " ".join(f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if n) or "0s"


# --------------------------------------------------------------------------- commands


@dataclass
class Run:
    """What one command needs: the parsed arguments, the API, where to print, stdin for `-`."""

    args: argparse.Namespace
    api: Api
    out: TextIO
    stdin: TextIO

    def print(self, text: str = "") -> None:
        print(text, file=self.out)

    def print_json(self, data: Any) -> None:
        print(json.dumps(data, indent=2, ensure_ascii=False), file=self.out)


def read_spec(path: str, stdin: TextIO) -> tuple[str, str]:
    """(the label used in error lines, the spec text); `-` is standard input."""
    if path == "-":
        return "<stdin>", stdin.read()
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise CliError(f"cannot read {path}: no such file") from None
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        return path, raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CliError(f"{path}: not UTF-8 text (byte {error.start})", EXIT_SPEC) from None


def chosen_workspace(run: Run) -> str:
    """The configured workspace, else the caller's only one."""
    if run.api.settings.workspace:
        return run.api.settings.workspace
    mine = run.api.get_all("/api/v1/workspaces/", not_found="the server has no workspaces API")
    slugs = [w["slug"] for w in mine]
    if len(slugs) == 1:
        return slugs[0]
    if not slugs:
        raise CliError("you are a member of no workspace")
    raise CliError(f"choose a workspace with --workspace or {ENV_PREFIX}WORKSPACE (yours: {', '.join(slugs)})")


def spec_body(run: Run) -> tuple[str, str, dict[str, Any]]:
    label, text = read_spec(run.args.file, run.stdin)
    workspace = chosen_workspace(run)
    return label, workspace, {"workspace": workspace, "spec": text}


def cmd_submit(run: Run) -> int:
    label, workspace, body = spec_body(run)
    if run.args.option:
        body["option"] = run.args.option
    job = run.api.call("POST", "/api/v1/jobs/", body=body, spec_file=label,
                       not_found=f"no such workspace: {workspace}")
    if run.args.json:
        run.print_json(job)
        return EXIT_OK
    run.print(f"submitted job {job['id']} ({job['name']}) to {job['workspace']}, queue {job['queue']}: "
              f"{job['state']}")
    if job.get("pending_reason"):
        run.print(f"pending reason: {job['pending_reason']}")
    if job.get("quote"):
        run.print(f"quote: {_format_frozen_quote(job['quote'])}")
    return EXIT_OK


def cmd_quote(run: Run) -> int:
    label, workspace, body = spec_body(run)
    answer = run.api.call("POST", "/api/v1/quotes/", body=body, spec_file=label,
                          not_found=f"no such workspace: {workspace}")
    if run.args.json:
        run.print_json(answer)
    else:
        run.print(format_quote(answer, label, workspace))
    return EXIT_OK


def cmd_jobs(run: Run) -> int:
    params: dict[str, str] = {}
    workspace = run.api.settings.workspace
    if workspace:
        params["workspace"] = workspace
    if run.args.state:
        params["state"] = run.args.state.capitalize()  # `pending` means `Pending`
    jobs = run.api.get_all("/api/v1/jobs/", params=params, not_found=f"no such workspace: {workspace}")
    if run.args.json:
        run.print_json(jobs)
    elif jobs:
        run.print(format_jobs(jobs))
    else:
        what = f"{params['state']} jobs" if "state" in params else "jobs"
        run.print(f"no {what}" + (f" in {workspace}" if workspace else ""))
    return EXIT_OK


def cmd_show(run: Run) -> int:
    job_id = run.args.id
    missing = f"no such job: {job_id}"
    job = run.api.call("GET", f"/api/v1/jobs/{job_id}/", not_found=missing)
    events = run.api.call("GET", f"/api/v1/jobs/{job_id}/events/", not_found=missing)
    if run.args.json:
        run.print_json({**job, "events": events})
    else:
        run.print(format_job(job, events))
    return EXIT_OK


def cmd_cancel(run: Run) -> int:
    job_id = run.args.id
    job = run.api.call("POST", f"/api/v1/jobs/{job_id}/cancel/", not_found=f"no such job: {job_id}")
    if run.args.json:
        run.print_json(job)
    else:
        run.print(f"job {job['id']} ({job['name']}): {job['state']}")
    return EXIT_OK


def cmd_logs(run: Run) -> int:
    job_id = run.args.id
    params = {"replica": run.args.replica} if run.args.replica else {}
    if run.args.follow:
        params["follow"] = "1"
    try:
        for chunk in run.api.stream_text(f"/api/v1/jobs/{job_id}/logs/", params=params, follow=run.args.follow,
                                         not_found=f"no such job: {job_id}"):
            run.out.write(chunk)
            run.out.flush()
    except KeyboardInterrupt:  # the usual way to stop following
        return 130
    return EXIT_OK


# --------------------------------------------------------------------------- arguments


def _add_global_options(parser: argparse.ArgumentParser, *, in_command: bool) -> None:
    """Global options work before or after the command; after it they must not reset what was
    given before it, hence SUPPRESS defaults on the command parsers."""
    unset = argparse.SUPPRESS if in_command else None
    parser.add_argument("--url", default=unset, help=f"the platform's URL (default {DEFAULT_URL})")
    parser.add_argument("--token", default=unset, help="an API token gpt_... (see /account/tokens/)")
    parser.add_argument("--workspace", default=unset, metavar="SLUG", help="the workspace to act in")
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS if in_command else False,
                        help="print the API's JSON instead of tables")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuctl",
        description="Submit and follow GPU jobs on the platform.",
        epilog=f"Settings: flags, then {ENV_PREFIX}URL / {ENV_PREFIX}TOKEN / {ENV_PREFIX}WORKSPACE, then "
               "$XDG_CONFIG_HOME/gpuctl/config.toml (keys url, token, workspace). "
               "Exit codes: 0 ok, 1 error, 2 spec refused.",
    )
    _add_global_options(parser, in_command=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, handler, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        _add_global_options(sub, in_command=True)
        sub.set_defaults(handler=handler)
        return sub

    submit = command("submit", cmd_submit, "submit a job spec (task YAML); - reads standard input")
    submit.add_argument("file", metavar="FILE")
    submit.add_argument("--option", metavar="ID", help="an option id from `gpuctl quote`")
    quote = command("quote", cmd_quote, "price every way a job spec can run, before submitting")
    quote.add_argument("file", metavar="FILE")
    jobs = command("jobs", cmd_jobs, "list my jobs (in --workspace, else in all my workspaces)")
    jobs.add_argument("--state", help="Pending, Scheduled, Running, Succeeded, Failed, Preempted, Cancelled")
    show = command("show", cmd_show, "one job: state, queue, pending reason, replicas, quote, events")
    show.add_argument("id", type=int, metavar="ID")
    cancel = command("cancel", cmd_cancel, "cancel a job")
    cancel.add_argument("id", type=int, metavar="ID")
    logs = command("logs", cmd_logs, "a job's replica logs, kept after it ended")
    logs.add_argument("id", type=int, metavar="ID")
    logs.add_argument("--replica", metavar="NAME", help="one replica, e.g. worker-0 (default: all)")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines while the job runs")
    return parser


def main(argv: Sequence[str] | None = None, *, env: Mapping[str, str] | None = None,
         transport: httpx.BaseTransport | None = None) -> int:
    """The `gpuctl` entry point; `env` and `transport` stand in for the real ones in tests."""
    args = build_parser().parse_args(argv)
    try:
        settings = resolve_settings(
            {"url": args.url, "token": args.token, "workspace": args.workspace},
            os.environ if env is None else env,
        )
        api = Api(settings, transport=transport)
        try:
            return args.handler(Run(args=args, api=api, out=sys.stdout, stdin=sys.stdin))
        finally:
            api.close()
    except SpecRefused as refused:
        for line in refused.lines:
            print(line, file=sys.stderr)
        return refused.exit_code
    except CliError as error:
        print(f"gpuctl: {error}", file=sys.stderr)
        return error.exit_code


if __name__ == "__main__":
    sys.exit(main())

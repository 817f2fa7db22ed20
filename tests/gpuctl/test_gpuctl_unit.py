"""`gpuctl` without a server: configuration precedence, tables, error mapping (httpx MockTransport)."""

from __future__ import annotations

import io
import json
import re
import socket
import sys
from pathlib import Path

import httpx
import pytest

from gpuctl.cli import (
    CliError,
    config_file_path,
    format_job,
    format_quote,
    format_table,
    main,
    resolve_settings,
    spec_error_line,
)

# A quote answer as the API documents it (the fields gpuctl reads), not computed by the server.
CANNED_QUOTE = {
    "currency": "USD",
    "expected_duration_hours": "2.00",
    "options": [
        {"id": "a100-spot.fraction.off-peak", "sharing": "fraction", "vendor": "nvidia", "gpu_model": "A100-80GB",
         "pool": "a100-spot", "spot": True, "when": "off-peak", "price_per_hour": "0.5088",
         "price_per_hour_offpeak": "0.3053", "estimate_low": "0.61", "estimate_high": "2.44", "cheapest": True,
         "tradeoffs": ["no hardware isolation", "waits for the off-peak window"]},
        {"id": "h100.exclusive.now", "sharing": "exclusive", "vendor": "nvidia", "gpu_model": "H100-80GB",
         "pool": "h100", "spot": False, "when": "now", "price_per_hour": "12.3456",
         "price_per_hour_offpeak": "7.4074", "estimate_low": "24.69", "estimate_high": "24.69", "cheapest": False,
         "tradeoffs": []},
    ],
    "unavailable": ["mi300x: the job does not allow AMD"],
}

JOB = {
    "id": 7, "name": "bert-finetune", "workspace": "vision-lab", "queue": "vision-lab", "state": "Running",
    "pending_reason": "", "type": "pytorch", "priority": 20, "preemptible": True, "reduce_cost": False,
    "expected_duration_s": 5400, "created": "2026-11-21T09:00:00.5+01:00", "started": "2026-11-21T08:05:00Z",
    "finished": None,
    "replicas": [
        {"role": "master", "index": 0, "state": "Running", "node": "h100-01", "gpus": [0, 1], "slice": None,
         "started": "2026-11-21T08:05:00Z", "ended": None},
        {"role": "worker", "index": 0, "state": "Running", "node": "h100-mig-01", "gpus": [3],
         "slice": {"kind": "mig", "mig_profile": "3g.40gb"}, "slice_label": "MIG 3g.40gb",
         "started": "2026-11-21T08:05:00Z", "ended": None},
    ],
    "final_cost": None, "currency": "USD", "cost_so_far": "6.17",
    "quote": {"id": "h100.exclusive.now", "currency": "USD", "price_per_hour": "12.3456",
              "price_per_hour_offpeak": "7.4074", "estimate_low": "24.69", "estimate_high": "49.38"},
}


def write_config(home: Path, text: str) -> Path:
    path = home / "gpuctl" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


NO_FLAGS = {"url": None, "token": None, "workspace": None}


# --------------------------------------------------------------------------- configuration


def test_config_file_then_env_then_flags(tmp_path):
    write_config(tmp_path, 'url = "http://file:1/"\ntoken = "gpt_file"\nworkspace = "from-file"\n')
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    settings = resolve_settings(NO_FLAGS, env)
    assert (settings.url, settings.token, settings.workspace) == ("http://file:1", "gpt_file", "from-file")

    env |= {"GPUCTL_URL": "http://env:2", "GPUCTL_TOKEN": "gpt_env"}
    settings = resolve_settings(NO_FLAGS, env)
    assert (settings.url, settings.token, settings.workspace) == ("http://env:2", "gpt_env", "from-file")

    settings = resolve_settings({"url": "https://flag:3", "token": None, "workspace": "from-flag"}, env)
    assert (settings.url, settings.token, settings.workspace) == ("https://flag:3", "gpt_env", "from-flag")


def test_defaults_and_empty_values_count_as_unset(tmp_path):
    write_config(tmp_path, 'workspace = ""\n')
    env = {"XDG_CONFIG_HOME": str(tmp_path), "GPUCTL_URL": "", "GPUCTL_TOKEN": "  "}
    settings = resolve_settings(NO_FLAGS, env)
    assert (settings.url, settings.token, settings.workspace) == ("http://127.0.0.1:8000", None, None)


def test_config_path_honours_xdg_and_falls_back_to_home(tmp_path):
    assert config_file_path({"XDG_CONFIG_HOME": "/etc/xdg-me", "HOME": "/home/a"}) == Path(
        "/etc/xdg-me/gpuctl/config.toml")
    # the XDG spec says a relative XDG_CONFIG_HOME is invalid and ignored
    assert config_file_path({"XDG_CONFIG_HOME": "rel", "HOME": "/home/a"}) == Path(
        "/home/a/.config/gpuctl/config.toml")
    write_config(tmp_path / ".config", 'token = "gpt_home"\n')
    assert resolve_settings(NO_FLAGS, {"HOME": str(tmp_path)}).token == "gpt_home"


@pytest.mark.parametrize(("text", "message"), [
    ('tokn = "x"\n', "unknown key 'tokn' (known: url, token, workspace, default_profile, profiles)"),
    ('[profiles.a]\ntokn = "x"\n', "profiles.a: unknown key 'tokn' (known: url, token, workspace)"),
    ('profiles = "a"\n', "profiles must be tables such as [profiles.NAME]"),
    ('[profiles]\na = "x"\n', "profiles.a must be a table ([profiles.a])"),
    ("token = 5\n", "token must be a string, not int"),
    ("token = \n", "invalid TOML"),
])
def test_a_broken_config_file_is_named(tmp_path, text, message):
    path = write_config(tmp_path, text)
    with pytest.raises(CliError, match=re.escape(message)) as raised:
        resolve_settings(NO_FLAGS, {"XDG_CONFIG_HOME": str(tmp_path)})
    assert str(raised.value).startswith(f"{path}: ")


def test_a_url_without_scheme_is_refused(tmp_path):
    with pytest.raises(CliError, match="must start with http:// or https://"):
        resolve_settings({**NO_FLAGS, "url": "gpu.example:8000"}, {"HOME": str(tmp_path)})


# --------------------------------------------------------------------------- tables


def test_table_columns_align_and_numbers_align_right():
    table = format_table(("ID", "NAME", "OK"), [(7, "a", True), (1234, "longer name", None)], right={0})
    assert table.splitlines() == [
        "  ID  NAME         OK",
        "   7  a            yes",
        "1234  longer name  -",
    ]


def test_quote_table_from_canned_json():
    text = format_quote(CANNED_QUOTE, "job.yaml", "vision-lab")
    lines = text.splitlines()
    assert lines[0] == "quote for job.yaml in vision-lab, USD, expected duration 2.00 h"
    header, spot_row, h100_row = lines[1:4]
    assert header.split() == ["ID", "SHARING", "VENDOR", "GPU", "MODEL", "POOL", "SPOT", "WHEN", "PRICE/H", "(USD)",
                              "PRICE/H", "OFF-PEAK", "(USD)", "ESTIMATE", "(USD)", "CHEAPEST"]
    assert spot_row.split() == ["a100-spot.fraction.off-peak", "fraction", "nvidia", "A100-80GB", "a100-spot",
                                "yes", "off-peak", "0.5088", "0.3053", "0.61-2.44", "*"]
    assert h100_row.split() == ["h100.exclusive.now", "exclusive", "nvidia", "H100-80GB", "h100", "no", "now",
                                "12.3456", "7.4074", "24.69"]  # equal low and high: one figure, no marker
    # money is right-aligned: the prices end in the same column
    assert spot_row.index("0.5088") + len("0.5088") == h100_row.index("12.3456") + len("12.3456")
    assert header.index("CHEAPEST") == spot_row.index("*")
    assert lines[4] == "cheapest: a100-spot.fraction.off-peak  (gpuctl submit job.yaml --option a100-spot.fraction.off-peak)"
    assert "  a100-spot.fraction.off-peak: no hardware isolation; waits for the off-peak window" in lines
    assert not any(line.startswith("  h100.exclusive.now:") for line in lines)  # no trade-offs, no line
    assert lines[-1] == "not offered: mi300x: the job does not allow AMD"


def test_quote_without_options_says_so():
    text = format_quote({"currency": "USD", "options": [], "unavailable": ["h100: too small"]}, "j.yaml", "w")
    assert text.splitlines()[1:] == ["no option can run this spec", "not offered: h100: too small"]


def test_job_detail_shows_replicas_quote_and_events():
    events = [{"time": "2026-11-21T08:00:00Z", "kind": "submitted", "state": "Pending", "reason": "by alice"},
              {"time": "2026-11-21T08:05:00Z", "kind": "state", "state": "Running", "reason": "placed"}]
    lines = format_job(JOB, events).splitlines()
    fields = {line[:14].strip(): line[16:] for line in lines[:lines.index("")]}
    assert fields["job"] == "7" and fields["name"] == "bert-finetune" and fields["state"] == "Running"
    assert "pending reason" not in fields  # only a pending job has one
    assert fields["expected"] == "1h 30m" and fields["preemptible"] == "yes"
    assert fields["created"] == "2026-11-21 08:00:00" and fields["finished"] == "-"  # shown in UTC
    # the cost while it runs, and why it is in its state: the reason of the event that put it there
    assert fields["cost"] == "6.17 USD so far" and fields["reason"] == "placed"
    replicas = lines[lines.index("replicas") + 1:lines.index("quote") - 1]
    assert replicas[0].split() == ["ROLE", "INDEX", "STATE", "NODE", "GPUS", "HOLDS", "STARTED", "ENDED"]
    # what a replica holds in words; a server without slice_label still gets no JSON fragment
    assert replicas[1].split()[:6] == ["master", "0", "Running", "h100-01", "0,1", "-"]
    assert replicas[2].split()[:7] == ["worker", "0", "Running", "h100-mig-01", "3", "MIG", "3g.40gb"]
    assert lines[lines.index("quote") + 1] == (
        "option h100.exclusive.now, price/h 12.3456 USD, off-peak price/h 7.4074 USD, estimate 24.69-49.38 USD")
    assert [line.split()[2] for line in lines[lines.index("events") + 2:]] == ["submitted", "state"]


def test_spec_error_lines_leave_out_what_the_api_does_not_know():
    assert spec_error_line("j.yaml", {"line": 8, "column": 1, "field": "MaxReplicas", "message": "too few"}) == (
        "j.yaml:8:1: MaxReplicas: too few")
    assert spec_error_line("j.yaml", {"line": 3, "column": None, "field": None, "message": "bad"}) == "j.yaml:3: bad"
    assert spec_error_line("-", {"line": None, "column": None, "field": "option", "message": "unknown"}) == (
        "-: option: unknown")


# --------------------------------------------------------------------------- the CLI with a fake server


class FakeServer:
    """Answers by (method, path); records every request."""

    def __init__(self, routes: dict[tuple[str, str], httpx.Response]):
        self.routes = routes
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.routes.get((request.method, request.url.path)) or httpx.Response(
            404, text="<h1>Not Found</h1>", headers={"content-type": "text/html"})

    def bodies(self, path: str) -> list[dict]:
        return [json.loads(r.content) for r in self.requests if r.url.path == path]


@pytest.fixture
def cli(capsys, tmp_path, monkeypatch):
    """Runs main() against a FakeServer; returns (exit code, stdout, stderr)."""

    def run(server: FakeServer | None, *argv: str, stdin: str = "", **env: str) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        environ = {"HOME": str(tmp_path), "GPUCTL_URL": "http://gpu.test", "GPUCTL_TOKEN": "gpt_t", **env}
        transport = httpx.MockTransport(server) if server is not None else None
        code = main(list(argv), env=environ, transport=transport)
        out, err = capsys.readouterr()
        return code, out, err

    return run


def workspaces(*slugs: str) -> httpx.Response:
    return httpx.Response(200, json={"count": len(slugs), "next": None, "previous": None,
                                     "results": [{"slug": slug} for slug in slugs]})


def test_submit_sends_the_file_the_option_and_the_only_workspace(cli, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\n")
    server = FakeServer({("GET", "/api/v1/workspaces/"): workspaces("vision-lab"),
                         ("POST", "/api/v1/jobs/"): httpx.Response(201, json={**JOB, "state": "Pending"})})
    code, out, err = cli(server, "submit", str(spec), "--option", "h100.exclusive.now")
    assert code == 0, err
    assert server.bodies("/api/v1/jobs/") == [{"workspace": "vision-lab", "spec": "name: x\n",
                                               "option": "h100.exclusive.now"}]
    assert server.requests[-1].headers["authorization"] == "Bearer gpt_t"
    assert out.startswith("submitted job 7 (bert-finetune) to vision-lab, queue vision-lab: Pending\n")


def test_submit_reads_stdin_and_needs_a_workspace_choice_when_there_are_several(cli):
    server = FakeServer({("GET", "/api/v1/workspaces/"): workspaces("nlp-group", "vision-lab"),
                         ("POST", "/api/v1/jobs/"): httpx.Response(201, json=JOB)})
    code, _, err = cli(server, "submit", "-", stdin="name: y\n")
    assert (code, err) == (1, "gpuctl: error: choose a workspace with --workspace or GPUCTL_WORKSPACE "
                              "(yours: nlp-group, vision-lab)\n")
    code, _, _ = cli(server, "submit", "-", "--workspace", "nlp-group", stdin="name: y\n")
    assert code == 0 and server.bodies("/api/v1/jobs/") == [{"workspace": "nlp-group", "spec": "name: y\n"}]


def test_global_options_work_before_and_after_the_command(cli):
    page = {"count": 1, "next": None, "previous": None, "results": [JOB]}
    server = FakeServer({("GET", "/api/v1/jobs/"): httpx.Response(200, json=page)})
    for argv in (["--json", "--workspace", "w1", "jobs"], ["jobs", "--json", "--workspace", "w1"],
                 ["--workspace", "w1", "jobs", "--json"]):
        code, out, _ = cli(server, *argv)
        assert code == 0 and json.loads(out) == [JOB]
        assert server.requests[-1].url.params["workspace"] == "w1"


def test_jobs_follows_pages_and_capitalises_the_state(cli):
    first = {"count": 2, "next": "http://gpu.test/api/v1/jobs/page2/", "previous": None, "results": [JOB]}
    second = {"count": 2, "next": None, "previous": None, "results": [{**JOB, "id": 8, "name": "second"}]}
    server = FakeServer({("GET", "/api/v1/jobs/"): httpx.Response(200, json=first),
                         ("GET", "/api/v1/jobs/page2/"): httpx.Response(200, json=second)})
    code, out, _ = cli(server, "jobs", "--state", "running")
    assert code == 0 and [line.split()[:2] for line in out.splitlines()[1:]] == [["7", "bert-finetune"],
                                                                                 ["8", "second"]]
    assert server.requests[0].url.params["state"] == "Running"


def test_quote_on_a_server_without_the_quotes_endpoint(cli, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\n")
    server = FakeServer({("GET", "/api/v1/workspaces/"): workspaces("vision-lab")})
    code, out, err = cli(server, "quote", str(spec))
    assert (code, out) == (1, "")
    assert err == ("gpuctl: error: http://gpu.test has no POST /api/v1/quotes/ "
                   "(a server without this API, or a wrong --url)\n")


def test_quote_that_no_pool_can_run_is_a_spec_error(cli, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\n")
    refusal = {"errors": [{"line": None, "column": None, "field": "spec", "message": "no pool fits"}]}
    server = FakeServer({("POST", "/api/v1/quotes/"): httpx.Response(422, json=refusal)})
    assert cli(server, "--workspace", "w", "quote", str(spec)) == (2, "", f"{spec}: spec: no pool fits\n")


@pytest.mark.parametrize(("status", "body", "message"), [
    (404, {"detail": "No such job"}, "no such job: 9"),
    (401, {"detail": "Invalid or revoked token."},
     "token refused: Invalid or revoked token; create one at http://gpu.test/account/tokens/"),
    (401, {"title": "Incorrect authentication credentials.", "status": 401,
           "detail": "token gpt_ab12… expired on 2026-11-01 00:00 UTC: create a new one at /account/tokens/.",
           "errors": []},
     "token refused: token gpt_ab12… expired on 2026-11-01 00:00 UTC: create a new one at "
     "http://gpu.test/account/tokens/"),
    (403, {"title": "You do not have permission to perform this action.", "status": 403, "errors": [],
           "detail": "this token has scope 'read'; POST /api/v1/jobs/9/cancel/ needs scope 'submit'."},
     "forbidden: this token has scope 'read'; POST /api/v1/jobs/9/cancel/ needs scope 'submit'; "
     "tokens: http://gpu.test/account/tokens/"),
    (409, {"type": "urn:gpu-platform:problem:conflict", "title": "Conflict", "status": 409,
           "detail": "job 9 is\nalready Cancelled", "errors": []}, "job 9 is already Cancelled"),
    (503, {"type": "urn:gpu-platform:problem:service-unavailable", "title": "Service unavailable", "status": 503,
           "detail": "the database cannot be reached just now; retry in 5 s", "errors": []},
     "server answered 503: the database cannot be reached just now; retry in 5 s"),
    (403, {"detail": "owners only"}, "forbidden: owners only"),
    (409, {"errors": [{"line": None, "column": None, "field": "state", "message": "already Cancelled"}]},
     "state: already Cancelled"),
    (500, None, "server answered 500: boom"),
    (502, None, "server answered 502: <html> bad gateway </html>"),
])
def test_http_errors_become_messages_and_exit_1(cli, status, body, message):
    text = "boom" if status == 500 else "<html>\n bad gateway\n</html>\n"
    answer = httpx.Response(status, json=body) if body is not None else httpx.Response(status, text=text)
    server = FakeServer({("POST", "/api/v1/jobs/9/cancel/"): answer})
    assert cli(server, "cancel", "9") == (1, "", f"gpuctl: error: {message}\n")


def test_no_token_is_said_before_asking_the_server(cli, tmp_path):
    server = FakeServer({})
    code, _, err = cli(server, "jobs", GPUCTL_TOKEN="")
    assert code == 1 and not server.requests
    assert err == (f"gpuctl: error: no API token: pass --token, set GPUCTL_TOKEN or put token in "
                   f"{tmp_path}/.config/gpuctl/config.toml; create one at http://gpu.test/account/tokens/\n")


def test_a_server_that_is_not_there(cli):
    with socket.socket() as s:  # a port nobody listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        code, out, err = cli(None, "jobs", GPUCTL_URL=url)
    assert (code, out) == (1, "") and err.startswith(f"gpuctl: error: cannot reach {url}: ")


def test_unreadable_spec_files(cli, tmp_path):
    assert cli(FakeServer({}), "--workspace", "w", "submit", str(tmp_path / "nope.yaml")) == (
        1, "", f"gpuctl: error: cannot read {tmp_path / 'nope.yaml'}: no such file\n")
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"name: \xff\xfe\n")
    assert cli(FakeServer({}), "--workspace", "w", "submit", str(binary)) == (
        2, "", f"gpuctl: error: {binary}: not UTF-8 text (byte 6)\n")


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    out = capsys.readouterr().out
    assert exited.value.code == 0
    for command in ("submit", "quote", "jobs", "show", "cancel", "--workspace", "--json", "--url", "--token"):
        assert command in out


def test_submit_complete_within_sets_the_specs_deadline_replacing_its_own(cli, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\ncompleteBy: 2026-12-01T08:00:00+08:00\nexpectedDuration: 2h\n")
    server = FakeServer({("GET", "/api/v1/workspaces/"): workspaces("vision-lab"),
                         ("POST", "/api/v1/jobs/"): httpx.Response(201, json=JOB)})
    code, _, err = cli(server, "submit", str(spec), "--complete-within", "12h")
    assert code == 0, err
    [body] = server.bodies("/api/v1/jobs/")
    assert body["spec"] == "name: x\nexpectedDuration: 2h\ncompleteWithin: 12h\n"
    code, _, err = cli(server, "submit", str(spec), "--complete-by", "2026-12-02T08:00:00Z")
    assert code == 0, err
    assert "completeBy: '2026-12-02T08:00:00Z'" in server.bodies("/api/v1/jobs/")[-1]["spec"]
    with pytest.raises(SystemExit):
        cli(server, "submit", str(spec), "--complete-within", "1h", "--complete-by", "2026-12-02T08:00Z")
    assert len(server.bodies("/api/v1/jobs/")) == 2


def test_describe_shows_a_deadline_jobs_deadline_latest_start_and_phase():
    text = format_job({**JOB, "complete_by": "2026-11-22T08:00:00Z", "latest_start": "2026-11-22T06:21:00Z",
                       "deadline_phase": "gaps", "deadline_missed": None}, [])
    labels = {line.split("  ")[0]: line.split("  ", 1)[1].strip() for line in text.splitlines() if "  " in line}
    assert labels["deadline phase"] == "gaps"
    assert "complete by" in labels and "latest start" in labels and "unmeetable" not in labels
    assert "完成期限" in format_job({**JOB, "complete_by": "2026-11-22T08:00:00Z"}, [], lang="zh")

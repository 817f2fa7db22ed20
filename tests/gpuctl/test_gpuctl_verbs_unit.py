"""The kubectl-style verbs of `gpuctl` without the platform: profiles, output formats, quota and cost
tables, numbered quote options, several cancels, one-line errors, completion scripts and a closed
pipe. The server is an httpx MockTransport, or a real HTTP server in a thread for the subprocess
tests (the API's JSON shapes as the API documents them)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import yaml

from gpuctl.cli import build_parser, main
from gpuctl.completion import bash_script, zsh_script
from gpuctl.errors import CliError
from gpuctl.settings import resolve_settings

ROOT = Path(__file__).resolve().parents[2]

JOB = {
    "id": 7, "name": "bert-finetune", "workspace": "vision-lab", "queue": "vision-lab", "state": "Running",
    "pending_reason": "", "type": "pytorch", "priority": 20, "preemptible": True, "reduce_cost": False,
    "expected_duration_s": 7200, "created": "2026-11-21T08:00:00Z", "started": "2026-11-21T08:05:00Z",
    "finished": None, "final_cost": None, "currency": "USD",
    "replicas": [{"role": "main", "index": 0, "state": "Running", "node": "h100-01", "gpus": [0], "slice": None,
                  "slice_label": "1 GPU", "started": "2026-11-21T08:05:00Z", "ended": None}],
    "quote": {"id": "h100.exclusive.now", "currency": "USD", "price_per_hour": "3.0400",
              "price_per_hour_offpeak": "1.8240", "estimate_low": "6.08", "estimate_high": "6.08"},
}
PENDING = {**JOB, "id": 8, "name": "waiting", "state": "Pending", "pending_reason": "not enough free GPUs in h100",
           "replicas": [], "started": None, "queue_position": 3,
           "expected_start": {"earliest": "2026-11-21T10:00:00Z", "latest": "2026-11-21T12:30:00+01:00"}}
ENDED = {**JOB, "id": 9, "name": "done", "state": "Succeeded", "final_cost": "4.05",
         "finished": "2026-11-21T09:25:00Z"}
QUOTE = {
    "currency": "USD", "expected_duration_hours": "2.00",
    "options": [
        {"id": "a100-spot.fraction.now", "sharing": "fraction", "vendor": "nvidia", "gpu_model": "A100-80GB",
         "pool": "a100-spot", "spot": True, "when": "now", "price_per_hour": "0.5088",
         "price_per_hour_offpeak": "0.3053", "estimate_low": "1.02", "estimate_high": "1.02", "cheapest": True,
         "tradeoffs": []},
        {"id": "h100.exclusive.now", "sharing": "exclusive", "vendor": "nvidia", "gpu_model": "H100-80GB",
         "pool": "h100", "spot": False, "when": "now", "price_per_hour": "3.0400",
         "price_per_hour_offpeak": "1.8240", "estimate_low": "6.08", "estimate_high": "6.08", "cheapest": False,
         "tradeoffs": []},
    ],
    "unavailable": [],
}


class FakeServer:
    """Answers by (method, path); records every request."""

    def __init__(self, routes: dict[tuple[str, str], httpx.Response | list[httpx.Response]]):
        self.routes = routes
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.routes.get((request.method, request.url.path))
        if isinstance(answer, list):
            return answer.pop(0)
        return answer or httpx.Response(404, json={"type": "urn:gpu-platform:problem:not-found", "status": 404,
                                                   "title": "Not found", "errors": [],
                                                   "detail": f"no API operation at {request.url.path}"})

    def asked(self, path: str) -> list[httpx.Request]:
        return [r for r in self.requests if r.url.path == path]


def page(*items) -> httpx.Response:
    return httpx.Response(200, json={"count": len(items), "next": None, "previous": None, "results": list(items)})


@pytest.fixture
def cli(capsys, tmp_path, monkeypatch):
    """Runs main() against a FakeServer; returns (exit code, stdout, stderr)."""

    def run(server: FakeServer | None, *argv: str, stdin: str = "", **env: str) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        environ = {"HOME": str(tmp_path), "GPUCTL_URL": "http://gpu.test", "GPUCTL_TOKEN": "gpt_t", **env}
        code = main(list(argv), env=environ, transport=httpx.MockTransport(server) if server else None)
        out, err = capsys.readouterr()
        return code, out, err

    return run


def usage_error(argv: list[str]) -> str:
    """What argparse says on stderr for a command line it refuses (exit 2, nothing on stdout)."""
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exited, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        main(argv, env={"HOME": "/nonexistent"})
    assert (exited.value.code, out.getvalue()) == (2, "")
    return err.getvalue()


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / ".config" / "gpuctl" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


PROFILES = """url = "http://top:1"
workspace = "top-ws"
default_profile = "prod"

[profiles.prod]
url = "https://prod.example"
token = "gpt_prod"

[profiles.lab]
url = "http://lab:8000"
token = "gpt_lab"
workspace = "vision-lab"
"""


# --------------------------------------------------------------------------- profiles


def test_profiles_sit_between_the_environment_and_the_files_top_level(tmp_path):
    write_config(tmp_path, PROFILES)
    home = {"HOME": str(tmp_path)}
    flags = {"url": None, "token": None, "workspace": None, "profile": None}

    settings = resolve_settings(flags, home)  # default_profile, and the top level for what it leaves out
    assert (settings.profile, settings.url, settings.token, settings.workspace) == (
        "prod", "https://prod.example", "gpt_prod", "top-ws")
    assert settings.sources == {"url": "profile prod", "token": "profile prod",
                                "workspace": str(tmp_path / ".config/gpuctl/config.toml")}

    settings = resolve_settings(flags, {**home, "GPUCTL_PROFILE": "lab"})
    assert (settings.profile, settings.url, settings.workspace) == ("lab", "http://lab:8000", "vision-lab")
    settings = resolve_settings({**flags, "profile": "prod"}, {**home, "GPUCTL_PROFILE": "lab"})
    assert settings.profile == "prod"  # the flag over the environment

    # flags > environment > profile
    settings = resolve_settings({**flags, "profile": "lab", "token": "gpt_flag"},
                                {**home, "GPUCTL_TOKEN": "gpt_env", "GPUCTL_WORKSPACE": "env-ws"})
    assert (settings.url, settings.token, settings.workspace) == ("http://lab:8000", "gpt_flag", "env-ws")
    assert settings.sources == {"url": "profile lab", "token": "--token", "workspace": "GPUCTL_WORKSPACE"}


def test_an_unknown_profile_is_named_with_the_ones_there_are(tmp_path):
    flags = {"url": None, "token": None, "workspace": None, "profile": "stage"}
    with pytest.raises(CliError, match=r"no profile 'stage' \(--profile\) in .*config.toml \(no such file\); "
                                       r"profiles: none"):
        resolve_settings(flags, {"HOME": str(tmp_path)})
    write_config(tmp_path, PROFILES.replace('default_profile = "prod"', 'default_profile = "gone"'))
    with pytest.raises(CliError, match=r"no profile 'gone' \(default_profile\) in .*; profiles: lab, prod$"):
        resolve_settings({**flags, "profile": None}, {"HOME": str(tmp_path)})


def test_profile_flag_reaches_the_server_of_that_profile(cli, tmp_path):
    write_config(tmp_path, PROFILES)
    server = FakeServer({("GET", "/api/v1/jobs/"): page(JOB)})
    code, out, err = cli(server, "get", "jobs", "--profile", "lab", "-o", "json", GPUCTL_URL="", GPUCTL_TOKEN="")
    assert (code, err) == (0, "")
    (request,) = server.requests
    assert str(request.url) == "http://lab:8000/api/v1/jobs/?workspace=vision-lab"
    assert request.headers["authorization"] == "Bearer gpt_lab"


def test_config_set_profile_use_profile_and_view(cli, tmp_path):
    path = tmp_path / ".config" / "gpuctl" / "config.toml"
    code, out, err = cli(None, "config", "set-profile", "lab", "--url", "http://lab:8000/", "--token", "gpt_secret1",
                         "-w", "vision-lab")
    assert (code, err) == (0, "") and out == f"profile lab in {path}: set url, token, workspace\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it holds tokens
    code, _, _ = cli(None, "config", "set-profile", "prod", "--url", "https://prod.example", "--default")
    assert code == 0
    assert cli(None, "config", "set-profile", "bad", "--url", "ftp://x") == (
        1, "", "gpuctl: error: the URL 'ftp://x' must start with http:// or https://\n")
    import tomllib

    assert tomllib.loads(path.read_text()) == {
        "profiles": {"lab": {"url": "http://lab:8000", "token": "gpt_secret1", "workspace": "vision-lab"},
                     "prod": {"url": "https://prod.example"}},
        "default_profile": "prod"}

    assert cli(None, "config", "use-profile", "lab") == (0, f"default profile: lab ({path})\n", "")
    assert cli(None, "config", "use-profile", "nope") == (
        1, "", f"gpuctl: error: no profile 'nope' in {path}; profiles: lab, prod\n")

    code, out, _ = cli(None, "config", "view", GPUCTL_URL="", GPUCTL_TOKEN="")
    assert code == 0 and "gpt_secret1" not in out  # tokens are shown masked
    lines = out.splitlines()
    assert lines[:5] == [f"config file  {path}", "profile      lab", "url          http://lab:8000  (profile lab)",
                         "token        gpt_secr...  (profile lab)", "workspace    vision-lab  (profile lab)"]
    assert lines[6].split() == ["DEFAULT", "PROFILE", "URL", "WORKSPACE", "TOKEN"]
    assert lines[7].split() == ["*", "lab", "http://lab:8000", "vision-lab", "gpt_secr..."]
    code, out, _ = cli(None, "config", "view", "-o", "yaml", "--profile", "prod", GPUCTL_TOKEN="")
    view = yaml.safe_load(out)
    assert (view["profile"], view["url"], view["token"], view["default_profile"]) == (
        "prod", "http://gpu.test", None, "lab")  # GPUCTL_URL is over the profile


# --------------------------------------------------------------------------- get, describe


def test_get_jobs_in_every_format(cli):
    server = FakeServer({("GET", "/api/v1/jobs/"): page(JOB, PENDING, ENDED)})
    code, out, err = cli(server, "get", "jobs", "-w", "vision-lab", "--state", "running")
    assert (code, err) == (0, "")
    assert dict(server.requests[-1].url.params) == {"workspace": "vision-lab", "state": "Running"}
    header, *rows = out.splitlines()
    assert header.split() == ["ID", "NAME", "WORKSPACE", "QUEUE", "STATE", "PRIORITY", "REPLICAS", "CREATED", "(UTC)",
                              "REASON"]
    assert [row.split()[:5] for row in rows] == [["7", "bert-finetune", "vision-lab", "vision-lab", "Running"],
                                                 ["8", "waiting", "vision-lab", "vision-lab", "Pending"],
                                                 ["9", "done", "vision-lab", "vision-lab", "Succeeded"]]
    assert rows[1].endswith("not enough free GPUs in h100")
    assert len({header.index("STATE"), *(row.index(s) for row, s in zip(rows, ("Running", "Pending"), strict=False))}) == 1

    code, out, _ = cli(server, "get", "jobs", "--no-headers")
    assert code == 0 and [row.split()[0] for row in out.splitlines()] == ["7", "8", "9"]

    code, out, _ = cli(server, "get", "jobs", "-o", "wide")
    header, running, pending, ended = out.splitlines()
    assert header.split()[9:] == ["TYPE", "PREEMPTIBLE", "NODES", "OPTION", "STARTED", "(UTC)", "FINISHED", "(UTC)",
                                  "COST", "REASON"]
    assert running.split()[9:13] == ["pytorch", "yes", "h100-01", "h100.exclusive.now"]
    assert ended.split()[-4:] == ["09:25:00", "4.05", "USD", "-"]

    assert json.loads(cli(server, "get", "jobs", "-o", "json")[1]) == [JOB, PENDING, ENDED]
    assert json.loads(cli(server, "--json", "get", "jobs")[1]) == [JOB, PENDING, ENDED]
    assert yaml.safe_load(cli(server, "get", "jobs", "-o", "yaml")[1]) == [JOB, PENDING, ENDED]


def test_get_with_nothing_found_says_so_on_stderr(cli):
    server = FakeServer({("GET", "/api/v1/jobs/"): page()})
    assert cli(server, "get", "jobs", "-w", "nlp-group", "--state", "Pending") == (
        0, "", "no Pending jobs in nlp-group\n")
    assert cli(server, "get", "jobs", "-o", "yaml") == (0, "[]\n", "")


def test_get_workspaces(cli):
    server = FakeServer({("GET", "/api/v1/workspaces/"): page(
        {"slug": "vision-lab", "name": "Vision Lab", "role": "owner", "created": "2026-01-02T03:04:05Z"})})
    code, out, _ = cli(server, "get", "workspaces")
    assert code == 0 and out.splitlines()[1].split() == ["vision-lab", "Vision", "Lab", "owner", "2026-01-02",
                                                         "03:04:05"]


def test_describe_a_pending_job_says_where_it_stands(cli):
    events = [{"time": "2026-11-21T08:00:00Z", "kind": "submitted", "state": "Pending", "reason": "by alice",
               "data": {}}]
    server = FakeServer({("GET", "/api/v1/jobs/8/"): httpx.Response(200, json=PENDING),
                         ("GET", "/api/v1/jobs/8/events/"): httpx.Response(200, json=events)})
    code, out, err = cli(server, "describe", "job", "8")
    assert (code, err) == (0, "")
    fields = dict(line.split(None, 1) if "  " not in line else (line[:14].strip(), line[16:])
                  for line in out.split("\n\n")[0].splitlines())
    assert fields["pending reason"] == "not enough free GPUs in h100" and fields["queue position"] == "3"
    assert fields["expected start"] == "between 2026-11-21 10:00:00 and 2026-11-21 11:30:00 UTC"
    assert fields["cost"] == "none yet (estimate 6.08 USD)"
    assert "\nreplicas\n(none placed yet)\n" in out
    # `show` is the same page; -o yaml has the events too
    assert cli(server, "show", "8")[1] == out
    assert yaml.safe_load(cli(server, "describe", "job", "8", "-o", "yaml")[1]) == {**PENDING, "events": events}

    unknown = {**PENDING, "queue_position": None, "expected_start": None}
    server.routes[("GET", "/api/v1/jobs/8/")] = httpx.Response(200, json=unknown)
    out = cli(server, "describe", "job", "8")[1]
    assert "queue position" not in out and "\nexpected start  unknown\n" in out


def test_describe_an_ended_job_shows_its_final_cost_and_why_it_ended(cli):
    events = [{"time": "2026-11-21T08:00:00Z", "kind": "submitted", "state": "Pending", "reason": "", "data": {}},
              {"time": "2026-11-21T09:25:00Z", "kind": "state", "state": "Succeeded",
               "reason": "all replicas exited 0", "data": {}}]
    server = FakeServer({("GET", "/api/v1/jobs/9/"): httpx.Response(200, json=ENDED),
                         ("GET", "/api/v1/jobs/9/events/"): httpx.Response(200, json=events)})
    out = cli(server, "describe", "job", "9")[1]
    assert "\ncost            4.05 USD (final)\n" in out and "\nreason          all replicas exited 0\n" in out
    assert "\nreplicas\nROLE  INDEX  STATE    NODE     GPUS  HOLDS  " in out


# --------------------------------------------------------------------------- submit, cancel


def test_submit_quote_only_numbers_the_options_and_option_n_submits_that_one(cli, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\n")
    server = FakeServer({("POST", "/api/v1/quotes/"): httpx.Response(200, json=QUOTE),
                         ("POST", "/api/v1/jobs/"): httpx.Response(201, json={**JOB, "state": "Pending"})})
    code, out, err = cli(server, "submit", "-f", str(spec), "--quote-only", "-w", "vision-lab")
    assert (code, err) == (0, "") and not server.asked("/api/v1/jobs/")
    lines = out.splitlines()
    assert lines[1].split()[:3] == ["#", "ID", "SHARING"]
    assert [line.split()[:2] for line in lines[2:4]] == [["1", "a100-spot.fraction.now"], ["2", "h100.exclusive.now"]]
    assert lines[4] == f"cheapest: #1 a100-spot.fraction.now  (gpuctl submit -f {spec} --option 1)"

    code, out, err = cli(server, "submit", "-f", str(spec), "--option", "2", "-w", "vision-lab")
    assert (code, err) == (0, "")
    assert [json.loads(r.content) for r in server.asked("/api/v1/jobs/")] == [
        {"workspace": "vision-lab", "spec": "name: x\n", "option": "h100.exclusive.now"}]

    code, out, err = cli(server, "submit", "-f", str(spec), "--option", "3", "-w", "vision-lab")
    assert (code, out) == (2, "") and err == (
        f"{spec}: option: there is no option 3; the quote has 2 (see gpuctl submit -f {spec} --quote-only)\n")
    assert len(server.asked("/api/v1/jobs/")) == 1

    code, out, _ = cli(server, "submit", "-f", "-", "--quote-only", "-o", "json", "-w", "w", stdin="name: y\n")
    assert code == 0 and json.loads(out) == QUOTE


def test_submit_needs_one_spec_and_one_choice(cli, tmp_path):
    assert cli(FakeServer({}), "submit", "-w", "w") == (
        2, "", "gpuctl: error: submit needs a spec: gpuctl submit -f FILE (- reads standard input)\n")
    assert cli(FakeServer({}), "submit", "a.yaml", "-f", "b.yaml", "-w", "w") == (
        2, "", "gpuctl: error: give the spec once: FILE or -f FILE\n")
    assert usage_error(["submit", "-f", "a.yaml", "--option", "1", "--quote-only"]) == (
        "gpuctl: error: argument --quote-only: not allowed with argument --option (see 'gpuctl submit --help')\n")


def test_cancel_several_goes_on_past_one_that_fails(cli):
    problem = {"type": "t", "title": "Conflict", "status": 409, "detail": "x",
               "errors": [{"line": None, "column": None, "field": "state", "message": "already Succeeded"}]}
    server = FakeServer({
        ("POST", "/api/v1/jobs/7/cancel/"): httpx.Response(200, json={**JOB, "state": "Cancelled"}),
        ("POST", "/api/v1/jobs/8/cancel/"): httpx.Response(404, json={"detail": "No such job", "errors": []}),
        ("POST", "/api/v1/jobs/9/cancel/"): httpx.Response(409, json=problem),
    })
    code, out, err = cli(server, "cancel", "7", "8", "9")
    assert code == 1
    assert out == "job 7 (bert-finetune): Cancelled\n"
    assert err == "gpuctl: error: no such job: 8\ngpuctl: error: job 9: state: already Succeeded\n"
    code, out, _ = cli(server, "cancel", "7", "8", "-o", "json")
    assert code == 1 and [job["id"] for job in json.loads(out)] == [7]
    code, out, _ = cli(server, "cancel", "7", "-o", "json")
    assert code == 0 and json.loads(out)["state"] == "Cancelled"  # one job: the object, as before


# --------------------------------------------------------------------------- quota, cost


QUEUES = [{"name": "vision-lab", "deserved": 16, "limit": None, "allocated": 4, "fair_share": 20.5, "pending": 2},
          {"name": "community", "deserved": 0, "limit": 8, "allocated": 0, "fair_share": 0, "pending": 0,
           "priority": 1}]


def test_quota_of_every_workspace_or_of_one(cli):
    server = FakeServer({
        ("GET", "/api/v1/workspaces/"): page({"slug": "nlp-group"}, {"slug": "vision-lab"}),
        ("GET", "/api/v1/workspaces/vision-lab/queues/"): httpx.Response(200, json=QUEUES),
        ("GET", "/api/v1/workspaces/nlp-group/queues/"): page(QUEUES[1]),
    })
    code, out, err = cli(server, "quota")
    assert (code, err) == (0, "")
    header, *rows = out.splitlines()
    assert header.split() == ["WORKSPACE", "QUEUE", "DESERVED", "LIMIT", "ALLOCATED", "FAIR", "SHARE", "PENDING"]
    assert [row.split() for row in rows] == [["nlp-group", "community", "0", "8", "0", "0", "0"],
                                             ["vision-lab", "vision-lab", "16", "-", "4", "20.5", "2"],
                                             ["vision-lab", "community", "0", "8", "0", "0", "0"]]
    assert header.index("PENDING") + len("PENDING") == len(rows[1])  # numbers right-aligned

    code, out, _ = cli(server, "quota", "-w", "vision-lab", "-o", "wide", "--no-headers")
    assert [row.split() for row in out.splitlines()] == [["vision-lab", "vision-lab", "16", "-", "4", "20.5", "2", "-"],
                                                         ["vision-lab", "community", "0", "8", "0", "0", "0", "1"]]
    code, out, _ = cli(server, "quota", "-w", "vision-lab", "-o", "json")
    assert json.loads(out) == [{"workspace": "vision-lab", **queue} for queue in QUEUES]


def test_quota_on_a_server_without_the_queues_endpoint(cli):
    assert cli(FakeServer({}), "quota", "-w", "vision-lab") == (
        1, "", "gpuctl: error: http://gpu.test has no GET /api/v1/workspaces/vision-lab/queues/ "
               "(a server without this API, or a wrong --url)\n")


def cost_page(page_number: int, pages: int, rows: list[dict]) -> httpx.Response:
    return httpx.Response(200, json={"currency": "USD", "as_of": "2026-02-28T23:00:00+00:00", "total": "13.37",
                                     "group_by": "job", "count": 3, "page": page_number, "pages": pages,
                                     "rows": rows})


def cost_row(job: int, name: str, cost: str) -> dict:
    return {"job": job, "job_name": name, "allocated_gpu_hours": "2.000000", "used_gpu_hours": "1.500000",
            "idle_gpu_hours": "0.500000", "exclusive_gpu_hours": "2.000000", "cpu_core_hours": "2.000000",
            "memory_gib_hours": "8.000000", "list_cost": cost, "exclusive_cost": cost, "cost": cost}


def test_cost_of_a_month_follows_pages_and_totals(cli):
    server = FakeServer({("GET", "/api/v1/costs/"): [
        cost_page(1, 2, [cost_row(11, "a", "10.00"), cost_row(12, "b", "3.00")]),
        cost_page(2, 2, [cost_row(13, "c", "0.37")]),
    ]})
    code, out, err = cli(server, "cost", "-w", "vision-lab", "--month", "2026-02")
    assert (code, err) == (0, "")
    assert [dict(r.url.params) for r in server.requests] == [
        {"start": "2026-02-01", "end": "2026-02-28", "group_by": "job", "workspace": "vision-lab"},
        {"start": "2026-02-01", "end": "2026-02-28", "group_by": "job", "workspace": "vision-lab", "page": "2"}]
    title, header, *rows, total = out.splitlines()
    assert title == ("costs of vision-lab in 2026-02 (2026-02-01 to 2026-02-28), by job, "
                     "as of 2026-02-28 23:00:00 UTC")
    assert header.split() == ["JOB", "NAME", "GPU-H", "USED", "GPU-H", "IDLE", "GPU-H", "COST", "(USD)"]
    assert [row.split() for row in rows] == [["11", "a", "2.000000", "1.500000", "0.500000", "10.00"],
                                             ["12", "b", "2.000000", "1.500000", "0.500000", "3.00"],
                                             ["13", "c", "2.000000", "1.500000", "0.500000", "0.37"]]
    assert total.split() == ["TOTAL", "13.37"] and total.endswith(rows[0][-5:].replace("10.00", "13.37"))


def test_cost_as_yaml_and_without_headers(cli):
    server = FakeServer({("GET", "/api/v1/costs/"): [cost_page(1, 1, [cost_row(11, "a", "13.37")])] * 2})
    report = yaml.safe_load(cli(server, "cost", "--month", "2026-02", "-o", "yaml")[1])
    assert (report["month"], report["start"], report["end"], report["total"], report["workspace"]) == (
        "2026-02", "2026-02-01", "2026-02-28", "13.37", None)
    assert report["rows"] == [cost_row(11, "a", "13.37")]
    code, out, _ = cli(server, "cost", "--month", "2026-02", "--no-headers", "-o", "wide")
    assert code == 0 and out.split() == ["11", "a", "2.000000", "1.500000", "0.500000", "2.000000", "2.000000",
                                         "8.000000", "13.37", "13.37", "13.37"]


def test_cost_by_resource_shows_compute_and_storage_rows(cli):
    rows = [{**cost_row(0, "", "10.00"), "resource": "compute"},
            {**cost_row(0, "", "0.37"), "resource": "storage", "allocated_gpu_hours": "0.000000",
             "used_gpu_hours": "0.000000", "idle_gpu_hours": "0.000000", "storage_gib_hours": "2.000000"}]
    server = FakeServer({("GET", "/api/v1/costs/"): [httpx.Response(200, json={
        "currency": "USD", "as_of": "2026-02-28T23:00:00+00:00", "total": "10.37", "group_by": "resource",
        "count": 2, "page": 1, "pages": 1, "rows": rows})]})
    code, out, err = cli(server, "cost", "-w", "vision-lab", "--month", "2026-02", "--by", "resource")
    assert (code, err) == (0, "") and server.requests[0].url.params["group_by"] == "resource"
    _, header, compute, storage, total = out.splitlines()
    assert header.split()[0] == "RESOURCE"
    assert compute.split()[0] == "compute" and storage.split() == ["storage", "0.000000", "0.000000", "0.000000",
                                                                    "0.37"]
    assert total.split() == ["TOTAL", "10.37"]


@pytest.mark.parametrize("month", ["2026-13", "26-01", "march", "2026-1"])
def test_a_bad_month_is_a_one_line_usage_error(month):
    assert usage_error(["cost", "--month", month]) == (f"gpuctl: error: argument --month: {month!r} is not a month such as 2026-03 "
                   f"(see 'gpuctl cost --help')\n")


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(("argv", "message"), [
    (["frobnicate"], "argument COMMAND: invalid choice: 'frobnicate' (choose from "),
    (["describe", "job"], "the following arguments are required: ID (see 'gpuctl describe --help')"),
    (["describe", "job", "abc"], "argument ID: invalid int value: 'abc' (see 'gpuctl describe --help')"),
    (["get", "jobs", "-o", "xml"], "argument -o/--output: invalid choice: 'xml' (choose from "),
    (["config", "view", "--bogus"], "unrecognized arguments: --bogus (see 'gpuctl --help')"),
])
def test_usage_errors_are_one_line_and_exit_2(argv, message):
    err = usage_error(argv)
    assert err.count("\n") == 1 and err.startswith(f"gpuctl: error: {message}"), err


def test_an_unexpected_failure_is_one_line_unless_debugging(cli):
    server = FakeServer({("GET", "/api/v1/jobs/7/"): httpx.Response(200, json=["not", "a", "job"]),
                         ("GET", "/api/v1/jobs/7/events/"): httpx.Response(200, json=[])})
    code, out, err = cli(server, "describe", "job", "7")
    assert (code, out) == (1, "") and err.count("\n") == 1
    assert err.startswith("gpuctl: error: unexpected AttributeError: ") and "GPUCTL_DEBUG=1" in err
    with pytest.raises(AttributeError):
        cli(server, "describe", "job", "7", GPUCTL_DEBUG="1")


def test_a_broken_config_file_is_one_line(cli, tmp_path):
    write_config(tmp_path, "token = \n")
    code, out, err = cli(FakeServer({}), "get", "jobs", GPUCTL_TOKEN="")
    assert (code, out) == (1, "") and err.count("\n") == 1 and "config.toml: invalid TOML" in err


# --------------------------------------------------------------------------- completion


@pytest.fixture(scope="module")
def scripts() -> dict[str, str]:
    parser = build_parser()
    return {"bash": bash_script(parser), "zsh": zsh_script(parser)}


def test_completion_scripts_are_valid_shell(cli, scripts, tmp_path):
    for shell in ("bash", "zsh"):
        assert cli(None, "completion", shell) == (0, scripts[shell], "")
        if shutil.which(shell) is None:
            continue
        path = tmp_path / f"gpuctl.{shell}"
        path.write_text(scripts[shell])
        checked = subprocess.run([shell, "-n", str(path)], capture_output=True, text=True, timeout=30)
        assert checked.returncode == 0, checked.stderr


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_script_parses(scripts, tmp_path):
    path = tmp_path / "_gpuctl"
    path.write_text(scripts["zsh"])
    checked = subprocess.run(["zsh", "-n", str(path)], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize(("words", "offered"), [
    (["gpuctl", ""], "submit quote jobs get show describe cancel logs quota cost config notebook serve secret registry service-account login volume dataset bucket schedule ssh-key ssh ssh-config port-forward completion"),
    (["gpuctl", "schedule", ""], "list show suspend resume trigger rm"),
    (["gpuctl", "de"], "describe"),
    (["gpuctl", "--url", "http://x", "get", ""], "jobs workspaces"),
    (["gpuctl", "get", "jobs", "-o", ""], "table wide json yaml"),
    (["gpuctl", "-w", "vision-lab", "get", "jobs", "--state", "P"], "Pending Preempted"),
    (["gpuctl", "cost", "--by", "g"], "gpu_model"),
    (["gpuctl", "config", ""], "view set-profile use-profile"),
    (["gpuctl", "config", "set-profile", "lab", "--d"], "--default"),
    (["gpuctl", "logs", "12", "--f"], "--follow"),
    (["gpuctl", "logs", "12", "-f", ""], ""),  # -f of logs takes no value: nothing to offer
    (["gpuctl", "completion", ""], "bash zsh"),
    (["gpuctl", "submit", "-f", "sp"], "spec.yaml"),
])
def test_bash_completion_offers_the_right_words(scripts, tmp_path, words, offered):
    (tmp_path / "spec.yaml").write_text("name: x\n")
    script = tmp_path / "gpuctl.bash"
    script.write_text(scripts["bash"])
    array = " ".join("'" + word + "'" for word in words)
    probe = f'source {script}; COMP_WORDS=({array}); COMP_CWORD={len(words) - 1}; _gpuctl; echo "${{COMPREPLY[*]}}"'
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.strip() == offered


# --------------------------------------------------------------------------- a closed pipe


class ManyJobs(BaseHTTPRequestHandler):
    """A real HTTP server with more jobs than a pipe's buffer holds as a table."""

    jobs = [{**JOB, "id": n, "name": f"job-{n:05d}-" + "x" * 40} for n in range(1, 3001)]

    def do_GET(self):  # noqa: N802 (the http.server name)
        body = json.dumps({"count": len(self.jobs), "next": None, "previous": None, "results": self.jobs}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def many_jobs_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), ManyJobs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_piping_into_head_exits_quietly(many_jobs_server, tmp_path):
    env = {**os.environ, "HOME": str(tmp_path), "GPUCTL_URL": many_jobs_server, "GPUCTL_TOKEN": "gpt_t",
           "PYTHONPATH": str(ROOT)}
    env.pop("XDG_CONFIG_HOME", None)
    pipeline = f"{sys.executable} -m gpuctl get jobs | head -1; echo \"exit=${{PIPESTATUS[0]}}\" >&2"
    done = subprocess.run(["bash", "-c", pipeline], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert done.stdout.split()[:3] == ["ID", "NAME", "WORKSPACE"] and done.stdout.count("\n") == 1
    assert done.stderr == "exit=141\n"  # no traceback, no "Exception ignored" from the last flush
    # and the whole table when nobody closes the pipe
    whole = subprocess.run(["bash", "-c", f"{sys.executable} -m gpuctl get jobs | wc -l"], capture_output=True,
                           text=True, timeout=60, env=env, cwd=tmp_path)
    assert whole.stdout.strip() == "3001"

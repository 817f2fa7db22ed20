"""`gpuctl serve create|list|show|scale|delete|stop|start`: first against an httpx MockTransport (the API's JSON
shapes as the services API answers them), then against the real ASGI server: a service deployed from flags,
listed, scaled (a bad range refused with the server's words), deleted; bob reaches none of it."""

from __future__ import annotations

import io
import json
import sys

import httpx
import pytest
import yaml

from gpuctl.cli import build_parser, main
from gpuctl.completion import bash_script

SERVICE = {
    "id": 12, "name": "chat", "workspace": "vision-lab", "queue": "vision-lab", "state": "Running",
    "endpoint": "http://gpu.test/serve/vision-lab/chat/", "min_replicas": 0, "max_replicas": 3,
    "desired_replicas": 2, "running_replicas": 1, "scale_reason": "rps 9.1 over a target of 5 per replica",
    "requests": 1200, "requests_per_second": 2.5, "p50_ms": 41.2, "p95_ms": 180.4, "cold_starts": 1,
    "gpu_seconds": 3600.0, "gpu_seconds_per_request": 3.0, "cost_so_far": "0.50", "cost_per_1000_requests": "0.4200",
    "currency": "USD", "created": "2026-11-21T08:00:00Z",
}
SERIES = {"start": "2026-11-21T08:00:00Z", "end": "2026-11-21T09:00:00Z",
          "times": ["2026-11-21T08:00:00Z", "2026-11-21T08:30:00Z"], "replicas": [1, 1], "desired": [1, 2],
          "rps": [None, 2.5], "p50_ms": [None, 41.2], "p95_ms": [None, 180.4], "cost_times": [], "cost": [],
          "currency": "USD"}
JOB = {"id": 12, "name": "chat", "workspace": "vision-lab", "queue": "vision-lab", "state": "Pending",
       "pending_reason": "waiting for a GPU in h100", "kind": "inference"}
NOT_FOUND = {"type": "urn:gpu-platform:problem:not-found", "status": 404, "title": "Not found", "errors": [],
             "detail": "No such service"}


class FakeServer:
    """Answers by (method, path); records every request. An unknown path is the API's catch-all 404."""

    def __init__(self, routes: dict[tuple[str, str], httpx.Response | list[httpx.Response]]):
        self.routes = routes
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.routes.get((request.method, request.url.path))
        if isinstance(answer, list):
            return answer.pop(0)
        return answer or httpx.Response(404, json={**NOT_FOUND, "detail": f"no API operation at {request.url.path}"})

    def bodies(self, path: str) -> list[dict]:
        return [json.loads(r.content) for r in self.requests if r.url.path == path and r.method == "POST"]


def page(*items) -> httpx.Response:
    return httpx.Response(200, json={"count": len(items), "next": None, "previous": None, "results": list(items)})


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def cli(capsys, tmp_path, monkeypatch):
    """Runs main() against a FakeServer; returns (exit code, stdout, stderr)."""

    def run(server: FakeServer | None, *argv: str, stdin: io.StringIO | str = "", **env: str) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "stdin", stdin if isinstance(stdin, io.StringIO) else io.StringIO(stdin))
        environ = {"HOME": str(tmp_path), "GPUCTL_URL": "http://gpu.test", "GPUCTL_TOKEN": "gpt_t", **env}
        code = main(list(argv), env=environ, transport=httpx.MockTransport(server) if server else None)
        out, err = capsys.readouterr()
        return code, out, err

    return run


# --------------------------------------------------------------------------- create


def test_create_from_flags_sends_a_kind_inference_spec_and_prints_the_endpoint(cli):
    server = FakeServer({("GET", "/api/v1/workspaces/"): page({"slug": "vision-lab"}),
                         ("POST", "/api/v1/jobs/"): httpx.Response(201, json=JOB)})
    code, out, err = cli(server, "serve", "create", "chat", "--model-registry", "hf.co/org/chat-7b", "--gpu", "0.5",
                         "--gpu-memory", "20Gi", "--min", "0", "--max", "3", "--target-rps", "5",
                         "--scale-down-delay", "10m", "--queue", "vision-lab", "--pool", "h100")
    assert (code, err) == (0, "")
    [body] = server.bodies("/api/v1/jobs/")
    assert body["workspace"] == "vision-lab" and set(body) == {"workspace", "spec"}
    assert yaml.safe_load(body["spec"]) == {
        "kind": "inference", "name": "chat", "queue": "vision-lab", "model": {"registry": "hf.co/org/chat-7b"},
        "nodePool": "h100", "resources": {"gpu": 0.5, "gpuMemory": "20Gi"}, "replicas": {"min": 0, "max": 3},
        "target": {"rps": 5.0}, "scaleDownDelay": "10m"}
    assert out.splitlines() == ["created service chat (12) in vision-lab, queue vision-lab: Pending",
                                "endpoint: http://gpu.test/serve/vision-lab/chat/",
                                "pending reason: waiting for a GPU in h100"]

    code, out, _ = cli(server, "serve", "create", "chat", "--model-path", "/models/x", "--gpus", "2",
                       "--target-concurrency", "8", "-w", "nlp-group", "-o", "json")
    assert code == 0 and json.loads(out) == {**JOB, "endpoint": "http://gpu.test/serve/vision-lab/chat/"}
    body = server.bodies("/api/v1/jobs/")[-1]
    assert body["workspace"] == "nlp-group"
    assert yaml.safe_load(body["spec"]) == {"kind": "inference", "name": "chat", "model": {"path": "/models/x"},
                                            "resources": {"gpu": 2}, "target": {"concurrency": 8}}


def test_create_from_a_file_or_stdin_and_a_chosen_option(cli, tmp_path):
    spec = tmp_path / "chat.yaml"
    spec.write_text("kind: inference\nname: chat\n")
    quote = {"currency": "USD", "options": [{"id": "a.fraction.now", "cheapest": True},
                                            {"id": "h100.exclusive.now", "cheapest": False}]}
    server = FakeServer({("POST", "/api/v1/quotes/"): httpx.Response(200, json=quote),
                         ("POST", "/api/v1/jobs/"): httpx.Response(201, json=JOB)})
    code, _, err = cli(server, "serve", "create", "-f", str(spec), "--option", "2", "-w", "vision-lab")
    assert (code, err) == (0, "")
    assert server.bodies("/api/v1/jobs/") == [{"workspace": "vision-lab", "spec": "kind: inference\nname: chat\n",
                                               "option": "h100.exclusive.now"}]
    code, _, err = cli(server, "serve", "create", "-f", "-", "--option", "3", "-w", "vision-lab", stdin="name: x\n")
    assert (code, err) == (2, "gpuctl: error: there is no option 3; the quote has 2\n")
    assert len(server.bodies("/api/v1/jobs/")) == 1


def test_create_needs_one_way_to_say_the_service(cli, tmp_path):
    server = FakeServer({})
    code, out, err = cli(server, "serve", "create", "-f", "x.yaml", "--gpu", "0.5", "-w", "vision-lab")
    assert (code, out) == (2, "") and "as -f FILE or as NAME and flags, not both" in err
    code, out, err = cli(server, "serve", "create", "-w", "vision-lab")
    assert (code, out) == (2, "") and "serve create needs NAME and flags" in err
    assert server.requests == []


def test_a_refused_spec_from_flags_names_the_flags_and_from_a_file_its_lines(cli, tmp_path):
    refused = {"type": "urn:gpu-platform:problem:invalid-spec", "status": 400, "title": "Invalid spec", "errors": [
        {"line": 5, "column": 12, "field": "resources.gpuMemory",
         "message": "resources.gpuMemory is required for an inference server on a fraction"},
        {"line": 6, "column": 3, "field": "replicas.max", "message": "replicas.max (1) is less than replicas.min (3)"},
        {"line": None, "column": None, "field": None, "message": "no pool can run it"}]}
    server = FakeServer({("POST", "/api/v1/jobs/"): httpx.Response(400, json=refused)})
    code, out, err = cli(server, "serve", "create", "chat", "--model-path", "/models/x", "--gpu", "0.5",
                         "--min", "3", "--max", "1", "-w", "vision-lab")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "gpuctl: error: --gpu-memory: resources.gpuMemory is required for an inference server on a fraction",
        "gpuctl: error: --max: replicas.max (1) is less than replicas.min (3)",
        "gpuctl: error: no pool can run it"]

    spec = tmp_path / "chat.yaml"
    spec.write_text("kind: inference\n")
    code, out, err = cli(server, "serve", "create", "-f", str(spec), "-w", "vision-lab")
    assert code == 2 and err.splitlines()[0] == (
        f"{spec}:5:12: resources.gpuMemory: resources.gpuMemory is required for an inference server on a fraction")


# --------------------------------------------------------------------------- list and show


def test_list_as_a_table_wide_json_and_empty(cli):
    idle = {**SERVICE, "id": 13, "name": "embed", "state": "Pending", "running_replicas": 0, "desired_replicas": 0,
            "requests_per_second": None, "p95_ms": None, "cost_per_1000_requests": None}
    server = FakeServer({("GET", "/api/v1/services/"): page(SERVICE, idle)})
    code, out, err = cli(server, "serve", "list")
    assert (code, err) == (0, "")
    header, chat, embed = out.splitlines()
    assert header.split() == ["NAME", "ID", "STATE", "REPLICAS", "RPS", "P95", "COST/1K", "ENDPOINT"]
    assert chat.split() == ["chat", "12", "Running", "1/2", "0-3", "2.50", "180", "ms", "0.4200", "USD",
                            "http://gpu.test/serve/vision-lab/chat/"]
    assert embed.split() == ["embed", "13", "Pending", "0/0", "0-3", "-", "-", "-",
                             "http://gpu.test/serve/vision-lab/chat/"]
    assert server.requests[0].url.params.get("workspace") is None

    code, out, _ = cli(server, "serve", "list", "-w", "vision-lab", "-o", "wide", "--no-headers")
    assert code == 0 and "rps 9.1 over a target of 5 per replica" in out and len(out.splitlines()) == 2
    assert server.requests[-1].url.params["workspace"] == "vision-lab"
    code, out, _ = cli(server, "serve", "list", "-o", "json")
    assert json.loads(out) == [SERVICE, idle]

    assert cli(FakeServer({("GET", "/api/v1/services/"): page()}), "serve", "list") == (0, "", "no services\n")
    code, out, err = cli(FakeServer({("GET", "/api/v1/services/"): httpx.Response(404, json=NOT_FOUND)}),
                         "serve", "list", "-w", "elsewhere")
    assert (code, out, err) == (1, "", "gpuctl: error: no such workspace: elsewhere\n")


def test_show_by_name_reads_the_detail_with_its_evaluations(cli):
    server = FakeServer({("GET", "/api/v1/services/"): page(SERVICE),
                         ("GET", "/api/v1/services/12/"): httpx.Response(200, json={**SERVICE, "series": SERIES})})
    code, out, err = cli(server, "serve", "show", "chat")
    assert (code, err) == (0, "")
    fields = {line[:13].strip(): line[15:] for line in out.split("\n\n")[0].splitlines()}
    assert (fields["service"], fields["state"], fields["range"], fields["p95"]) == ("12", "Running", "0-3", "180 ms")
    assert fields["cost/1K req"] == "0.4200 USD" and fields["endpoint"] == SERVICE["endpoint"]
    evaluations = out.split("evaluations (newest last)\n")[1].splitlines()
    assert evaluations[0].split()[:4] == ["TIME", "(UTC)", "REPLICAS", "DESIRED"]
    assert evaluations[1].split() == ["2026-11-21", "08:00:00", "1", "1", "-", "-", "-"]
    assert evaluations[2].split() == ["2026-11-21", "08:30:00", "1", "2", "2.50", "41", "180"]

    code, out, _ = cli(server, "serve", "show", "12", "-o", "json")
    assert code == 0 and json.loads(out)["series"] == SERIES
    assert [r.url.path for r in server.requests[-1:]] == ["/api/v1/services/12/"]  # an id needs no list


def test_a_name_is_found_in_one_workspace_else_the_caller_chooses(cli):
    other = {**SERVICE, "id": 40, "workspace": "nlp-group"}
    server = FakeServer({("GET", "/api/v1/services/"): page(SERVICE, other),
                         ("GET", "/api/v1/services/99/"): httpx.Response(404, json=NOT_FOUND)})
    code, _, err = cli(server, "serve", "show", "chat")
    assert code == 1 and err == ("gpuctl: error: services named chat are in several of your workspaces "
                                 "(nlp-group, vision-lab): choose one with -w\n")
    code, _, err = cli(server, "serve", "stop", "nosuch", "-w", "vision-lab")
    assert code == 1 and err == ("gpuctl: error: no live service named nosuch in vision-lab "
                                 "(gpuctl serve list shows them)\n")
    assert cli(server, "serve", "scale", "99", "--max", "2") == (1, "", "gpuctl: error: no such service: 99\n")


# --------------------------------------------------------------------------- scale, stop, start, delete


def test_scale_keeps_what_is_left_out_and_says_a_refusal(cli):
    scaled = {**SERVICE, "max_replicas": 5, "desired_replicas": 2}
    refused = {"type": "urn:gpu-platform:problem:invalid", "status": 400, "title": "Invalid input",
               "errors": [{"field": "replicas", "message": "need 0 <= min <= max and 1 <= max <= 64, got min 4 "
                                                           "and max 3"}]}
    server = FakeServer({("GET", "/api/v1/services/"): page(SERVICE),
                         ("POST", "/api/v1/services/12/scale/"): [httpx.Response(200, json=scaled),
                                                                  httpx.Response(400, json=refused)]})
    code, out, err = cli(server, "serve", "scale", "chat", "--max", "5")
    assert (code, err) == (0, "")
    assert out == "service chat (12) in vision-lab: replicas 0-5 (were 0-3), 2 wanted now\n"
    code, out, err = cli(server, "serve", "scale", "chat", "--min", "4")
    assert (code, out) == (1, "")
    assert err == ("gpuctl: error: service chat (12) was not scaled: replicas: need 0 <= min <= max and "
                   "1 <= max <= 64, got min 4 and max 3\n")
    assert server.bodies("/api/v1/services/12/scale/") == [{"min_replicas": 0, "max_replicas": 5},
                                                           {"min_replicas": 4, "max_replicas": 3}]
    code, out, err = cli(server, "serve", "scale", "chat")
    assert (code, out) == (2, "") and "serve scale needs --min N, --max M or both" in err
    assert len(server.bodies("/api/v1/services/12/scale/")) == 2


def test_stop_and_start_are_the_jobs_stop_and_start(cli):
    server = FakeServer({("GET", "/api/v1/services/12/"): httpx.Response(200, json={**SERVICE, "series": SERIES}),
                         ("POST", "/api/v1/jobs/12/stop/"): httpx.Response(200, json={**JOB, "state": "Stopped"}),
                         ("POST", "/api/v1/jobs/12/start/"): httpx.Response(200, json={**JOB, "state": "Pending"})})
    code, out, err = cli(server, "serve", "stop", "12")
    assert (code, err) == (0, "")
    assert out == ("service chat (12) in vision-lab: stopped: its replicas end, nothing is billed until it starts "
                   "-> Stopped\n")
    code, out, _ = cli(server, "serve", "start", "12", "-o", "json")
    assert code == 0 and json.loads(out)["state"] == "Pending"
    assert [r.url.path for r in server.requests if r.method == "POST"] == ["/api/v1/jobs/12/stop/",
                                                                           "/api/v1/jobs/12/start/"]


def test_delete_asks_unless_yes_and_refuses_to_guess_without_a_terminal(cli):
    deleted = httpx.Response(200, json={**JOB, "state": "Cancelled"})
    server = FakeServer({("GET", "/api/v1/services/"): page(SERVICE),
                         ("POST", "/api/v1/services/12/delete/"): [deleted, deleted]})
    code, out, err = cli(server, "serve", "delete", "chat")
    assert (code, out) == (2, "") and "cannot be undone: pass --yes to confirm" in err
    code, out, err = cli(server, "serve", "delete", "chat", stdin=Terminal("n\n"))
    assert (code, out) == (1, "")
    assert err == ("delete service chat (12) in vision-lab? Its replicas end and its endpoint goes. [y/N] "
                   "gpuctl: error: service chat not deleted\n")
    assert server.bodies("/api/v1/services/12/delete/") == []

    code, out, err = cli(server, "serve", "delete", "chat", stdin=Terminal("y\n"))
    assert code == 0 and out.endswith("-> Cancelled\n")
    code, out, err = cli(server, "serve", "delete", "chat", "--yes", "-o", "json")
    assert (code, err) == (0, "") and json.loads(out)["state"] == "Cancelled"
    assert len([r for r in server.requests if r.url.path == "/api/v1/services/12/delete/"]) == 2


def test_serve_speaks_chinese_and_completes(cli):
    server = FakeServer({("POST", "/api/v1/jobs/"): httpx.Response(201, json=JOB)})
    code, out, _ = cli(server, "serve", "create", "chat", "--model-path", "/m", "-w", "vision-lab", "--lang", "zh")
    assert code == 0 and out.startswith("已在工作空间 vision-lab 创建推理服务 chat（12），队列 vision-lab：Pending\n端点：")
    script = bash_script(build_parser())
    assert ('"/serve|0") COMPREPLY=( $(compgen -W "create list show scale delete stop start revisions revise '
            'traffic promote rollback keys"') in script
    assert "--target-rps" in script and "--yes" in script


# --------------------------------------------------------------------------- live


def _django_configured() -> bool:
    try:
        from django.conf import settings
    except ImportError:
        return False
    return settings.configured


LIVE_ONLY = pytest.mark.skipif(not _django_configured(),
                               reason="needs the Django test plugin (live server, test database)")


@pytest.fixture
def live_gpuctl(gpuctl):
    """The live gpuctl, run without a terminal on stdin (as a script runs it)."""

    def run(token: str, *argv: str) -> tuple[int, str, str]:
        return gpuctl(token, *argv, stdin="")

    return run


@LIVE_ONLY
@pytest.mark.django_db(transaction=True)
def test_live_create_list_scale_and_delete_a_service(live_gpuctl, tokens, live_daphne):
    from scheduling.models import Job, JobState, ServiceScale

    alice = tokens["alice"]
    code, out, err = live_gpuctl(alice, "serve", "create", "chat", "--model-registry", "hf.co/org/chat-7b",
                                 "--gpu", "0.5", "--min", "3", "--max", "1", "-w", "vision-lab")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "gpuctl: error: --gpu-memory: resources.gpuMemory is required for an inference server on a fraction: "
        "the memory its model needs (see the GPU advice)",
        "gpuctl: error: --max: replicas.max (1) is less than replicas.min (3)"], err
    assert not Job.objects.exists()

    code, out, err = live_gpuctl(alice, "serve", "create", "chat", "--model-registry", "hf.co/org/chat-7b",
                                 "--gpu", "0.5", "--gpu-memory", "20Gi", "--min", "0", "--max", "2",
                                 "--target-rps", "5", "-w", "vision-lab")
    assert (code, err) == (0, "")
    job = Job.objects.get(name="chat", workspace__slug="vision-lab")
    assert job.kind == "inference"
    assert out.splitlines()[:2] == [f"created service chat ({job.pk}) in vision-lab, queue vision-lab: {job.state}",
                                    f"endpoint: {live_daphne.url}/serve/vision-lab/chat/"]
    scale = ServiceScale.objects.get(job=job)
    assert (scale.min_replicas, scale.max_replicas) == (0, 2)

    code, out, err = live_gpuctl(alice, "serve", "list")
    assert (code, err) == (0, "")
    header, row = out.splitlines()
    assert header.split()[:4] == ["NAME", "ID", "STATE", "REPLICAS"]
    assert row.split()[:3] == ["chat", str(job.pk), job.state] and row.split()[4] == "0-2"
    assert row.rstrip().endswith(f"{live_daphne.url}/serve/vision-lab/chat/")
    [listed] = json.loads(live_gpuctl(alice, "serve", "list", "-w", "vision-lab", "-o", "json")[1])
    assert (listed["id"], listed["min_replicas"], listed["max_replicas"]) == (job.pk, 0, 2)
    code, out, _ = live_gpuctl(alice, "serve", "show", "chat", "-o", "json")
    assert code == 0 and json.loads(out)["id"] == job.pk and "series" in json.loads(out)

    code, out, err = live_gpuctl(alice, "serve", "scale", "chat", "--max", "3")
    assert (code, err) == (0, "") and "replicas 0-3 (were 0-2)" in out
    scale.refresh_from_db()
    assert (scale.min_replicas, scale.max_replicas) == (0, 3)

    code, out, err = live_gpuctl(alice, "serve", "scale", str(job.pk), "--min", "4")
    assert (code, out) == (1, "")
    assert err.startswith(f"gpuctl: error: service chat ({job.pk}) was not scaled: ") and "min 4 and max 3" in err
    code, out, err = live_gpuctl(alice, "serve", "scale", "chat", "--min", "2", "--max", "1")
    assert code == 1 and "min 2 and max 1" in err
    scale.refresh_from_db()
    assert (scale.min_replicas, scale.max_replicas) == (0, 3)

    code, out, err = live_gpuctl(alice, "serve", "delete", "chat")
    assert (code, out) == (2, "") and "pass --yes" in err
    assert Job.objects.get(pk=job.pk).state == job.state
    code, out, err = live_gpuctl(alice, "serve", "delete", "chat", "--yes")
    assert (code, err) == (0, "") and out.strip().endswith("-> Cancelled")
    assert Job.objects.get(pk=job.pk).state == JobState.CANCELLED
    assert live_gpuctl(alice, "serve", "list") == (0, "", "no services\n")


@LIVE_ONLY
@pytest.mark.django_db(transaction=True)
def test_live_bob_sees_and_scales_none_of_alices_services(live_gpuctl, tokens, cluster):
    from billing.services import submit_quoted_job
    from scheduling.models import Job, ServiceScale

    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=(
        "kind: inference\nname: chat\nqueue: vision-lab\nmodel: {path: /models/chat}\n"
        "resources: {gpu: 0.5, gpuMemory: 20Gi}\nreplicas: {min: 0, max: 2}\n"))
    bob = tokens["bob"]
    assert live_gpuctl(bob, "serve", "list") == (0, "", "no services\n")
    code, out, err = live_gpuctl(bob, "serve", "list", "-w", "vision-lab")
    assert (code, out) == (1, "") and "vision-lab" in err
    for argv in (["scale", "chat", "--max", "5"], ["show", "chat"], ["stop", "chat"], ["delete", "chat", "--yes"]):
        code, out, err = live_gpuctl(bob, "serve", *argv)
        assert (code, out) == (1, "") and "no live service named chat" in err, argv
    for argv in (["scale", str(job.pk), "--max", "5"], ["show", str(job.pk)], ["delete", str(job.pk), "--yes"],
                 ["start", str(job.pk)]):
        code, out, err = live_gpuctl(bob, "serve", *argv)
        assert (code, out, err) == (1, "", f"gpuctl: error: no such service: {job.pk}\n"), argv
    scale = ServiceScale.objects.get(job=job)
    assert (scale.min_replicas, scale.max_replicas) == (0, 2)
    assert Job.objects.get(pk=job.pk).state == job.state

    # alice can, by id, with the same token shape
    code, out, err = live_gpuctl(tokens["alice"], "serve", "stop", str(job.pk))
    assert (code, err) == (0, "") and out.strip().endswith("-> Stopped")
    code, out, err = live_gpuctl(tokens["alice"], "serve", "start", "chat", "-w", "vision-lab")
    assert (code, err) == (0, "") and out.strip().endswith("-> Pending")

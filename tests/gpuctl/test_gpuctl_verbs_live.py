"""The kubectl-style verbs of `gpuctl` against the real ASGI server on the test database: get,
describe, submit -f with numbered options, several cancels, quota, cost from the ledger, profiles,
and a closed pipe."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

if not pytest.importorskip("django.conf").settings.configured:  # run with -p no:django
    pytest.skip("needs the Django test plugin (live server, test database)", allow_module_level=True)

pytestmark = pytest.mark.django_db(transaction=True)
CONSOLE_SCRIPT = Path(sys.executable).parent / "gpuctl"


def submit(gpuctl, token: str, path: Path, *argv: str) -> dict:
    code, out, err = gpuctl(token, "submit", "-f", str(path), "-o", "json", *argv)
    assert code == 0, err
    return json.loads(out)


def test_get_jobs_as_table_wide_json_and_yaml(gpuctl, tokens, specs):
    alice = tokens["alice"]
    seed, clean = submit(gpuctl, alice, specs["seed"]), submit(gpuctl, alice, specs["clean"])

    code, out, err = gpuctl(alice, "get", "jobs", "-w", "vision-lab", "--state", "pending")
    assert (code, err) == (0, "")
    header, *rows = out.splitlines()
    assert header.split()[:5] == ["ID", "NAME", "WORKSPACE", "QUEUE", "STATE"]
    assert sorted((row.split()[0], row.split()[1], row.split()[4]) for row in rows) == sorted(
        [(str(seed["id"]), "training1", "Pending"), (str(clean["id"]), "bert-finetune", "Pending")])
    assert all(row.rstrip().endswith(job["pending_reason"]) for row, job in zip(
        sorted(rows, key=lambda r: int(r.split()[0])), sorted([seed, clean], key=lambda j: j["id"]), strict=True))

    code, out, _ = gpuctl(alice, "get", "jobs", "-o", "wide", "--no-headers")
    wide = {row.split()[0]: row for row in out.splitlines()}
    assert set(wide) == {str(seed["id"]), str(clean["id"])}
    assert seed["quote"]["id"] in wide[str(seed["id"])] and clean["quote"]["id"] in wide[str(clean["id"])]

    listed = json.loads(gpuctl(alice, "get", "jobs", "-o", "json")[1])
    assert yaml.safe_load(gpuctl(alice, "get", "jobs", "-o", "yaml")[1]) == listed
    assert {job["id"] for job in listed} == {seed["id"], clean["id"]}

    # bob sees none of them, and is told so on stderr, leaving stdout empty for a pipe
    assert gpuctl(tokens["bob"], "get", "jobs") == (0, "", "no jobs\n")
    assert gpuctl(tokens["bob"], "get", "jobs", "-w", "vision-lab") == (
        1, "", "gpuctl: error: no such workspace: vision-lab\n")
    code, out, _ = gpuctl(tokens["bob"], "get", "workspaces", "--no-headers")
    assert code == 0 and [row.split()[0] for row in out.splitlines()] == ["nlp-group"]


def test_describe_a_pending_job(gpuctl, tokens, specs):
    alice = tokens["alice"]
    job = submit(gpuctl, alice, specs["clean"])
    code, out, err = gpuctl(alice, "describe", "job", str(job["id"]))
    assert (code, err) == (0, "")
    detail = json.loads(gpuctl(alice, "describe", "job", str(job["id"]), "-o", "json")[1])
    fields = {line[:14].strip(): line[16:] for line in out.split("\n\n", 1)[0].splitlines()}
    assert (fields["job"], fields["state"], fields["pending reason"]) == (
        str(job["id"]), "Pending", detail["pending_reason"])
    quote = detail["quote"]
    figure = quote["estimate_low"] if quote["estimate_low"] == quote["estimate_high"] else (
        f"{quote['estimate_low']}-{quote['estimate_high']}")
    assert fields["cost"] == f"none yet (estimate {figure} USD)"
    if detail.get("queue_position") is not None:  # where the API tells it
        assert fields["queue position"] == str(detail["queue_position"])
    if "expected_start" in detail:
        assert "expected start" in fields
    assert "\nreplicas\n(none placed yet)\n" in out
    events = out.split("\nevents\n", 1)[1].splitlines()
    assert events[0].split() == ["TIME", "(UTC)", "KIND", "STATE", "REASON"] and "submitted" in events[1]
    assert [e["kind"] for e in detail["events"]] == ["submitted"]
    assert gpuctl(tokens["bob"], "describe", "job", str(job["id"])) == (
        1, "", f"gpuctl: error: no such job: {job['id']}\n")


def test_submit_quote_only_then_option_by_number(gpuctl, tokens, specs):
    alice = tokens["alice"]
    code, out, err = gpuctl(alice, "submit", "-f", str(specs["clean"]), "--quote-only")
    assert (code, err) == (0, "")
    assert json.loads(gpuctl(alice, "--json", "jobs")[1]) == []  # a quote submits nothing
    options = json.loads(gpuctl(alice, "submit", "-f", str(specs["clean"]), "--quote-only", "-o", "json")[1])["options"]
    lines = out.splitlines()
    assert lines[1].split()[:2] == ["#", "ID"]
    assert [line.split()[:2] for line in lines[2:2 + len(options)]] == [
        [str(n), option["id"]] for n, option in enumerate(options, start=1)]

    number = next(n for n, option in enumerate(options, start=1) if not option["cheapest"])
    job = submit(gpuctl, alice, specs["clean"], "--option", str(number))
    assert job["quote"]["id"] == options[number - 1]["id"]

    code, out, err = gpuctl(alice, "submit", "-f", str(specs["clean"]), "--option", str(len(options) + 1))
    assert (code, out) == (2, "") and err.startswith(f"{specs['clean']}: option: there is no option ")
    code, out, err = gpuctl(alice, "submit", "-f", str(specs["clean"]), "--option", "no-such.option.now")
    assert (code, out) == (2, "") and err.startswith(f"{specs['clean']}: option: ")
    assert [j["id"] for j in json.loads(gpuctl(alice, "--json", "jobs")[1])] == [job["id"]]


def test_cancel_several_jobs_one_of_them_not_mine(gpuctl, tokens, specs):
    alice, bob = tokens["alice"], tokens["bob"]
    first, second = submit(gpuctl, alice, specs["clean"]), submit(gpuctl, alice, specs["seed"])
    nlp_spec = specs["clean"].with_name("nlp.yaml")
    nlp_spec.write_text(specs["clean"].read_text().replace("queue: vision-lab", "queue: nlp-group"))
    bobs = submit(gpuctl, bob, nlp_spec, "-w", "nlp-group")
    code, out, err = gpuctl(alice, "cancel", str(first["id"]), str(bobs["id"]), str(second["id"]))
    assert code == 1
    assert out.splitlines() == [f"job {first['id']} (bert-finetune): Cancelled",
                                f"job {second['id']} (training1): Cancelled"]
    assert err == f"gpuctl: error: no such job: {bobs['id']}\n"
    assert json.loads(gpuctl(bob, "describe", "job", str(bobs["id"]), "-o", "json")[1])["state"] == "Pending"
    code, _, err = gpuctl(alice, "cancel", str(first["id"]))  # already cancelled: the server says so
    assert code == 1 and err.startswith("gpuctl: error: ") and err.count("\n") == 1


def test_quota_of_my_queues(gpuctl, tokens, specs):
    """`GET /api/v1/workspaces/<slug>/queues/`: one entry per queue the workspace submits to."""
    alice = tokens["alice"]
    submit(gpuctl, alice, specs["clean"])
    code, out, err = gpuctl(alice, "quota", "-w", "vision-lab", "-o", "json")
    assert (code, err) == (0, "")
    queues = {entry["name"]: entry for entry in json.loads(out)}
    assert set(queues) == {"vision-lab", "community"}
    assert all(entry["workspace"] == "vision-lab" for entry in queues.values())
    assert Decimal(str(queues["vision-lab"]["deserved"])) == 16 and queues["vision-lab"]["pending"] == 1
    assert Decimal(str(queues["vision-lab"]["allocated"])) == 0

    code, out, _ = gpuctl(alice, "quota", "-w", "vision-lab")
    header, *rows = out.splitlines()
    assert header.split() == ["WORKSPACE", "QUEUE", "DESERVED", "LIMIT", "ALLOCATED", "FAIR", "SHARE", "PENDING"]
    table = {row.split()[1]: row.split() for row in rows}
    assert table["vision-lab"][-1] == "1" and table["community"][-1] == "0"

    # bob: his own workspace only
    code, out, _ = gpuctl(tokens["bob"], "quota", "-o", "json")
    assert code == 0 and {entry["workspace"] for entry in json.loads(out)} == {"nlp-group"}
    assert gpuctl(tokens["bob"], "quota", "-w", "vision-lab") == (
        1, "", "gpuctl: error: no such workspace: vision-lab\n")


def at(day: int, hour: int) -> datetime:
    return datetime(2026, 3, day, hour, tzinfo=UTC)


def ran_in_march(cluster, clock, user, workspace, name: str, node: str, day: int):
    """A job that held one H100 from 10:00 to 12:00 on `day` of March 2026, its ledger posted."""
    from billing.services import submit_quoted_job
    from scheduling.models import JobState, Node, Replica

    clock.now = at(day, 9)
    spec = f"name: {name}\nroles:\n  - name: main\n    image: busybox\n    resources: {{gpu: 1}}\n    nodePool: h100\n"
    job = submit_quoted_job(user=user, workspace=workspace, spec=spec)
    Replica.objects.create(job=job, role="main", index=0, state=JobState.SUCCEEDED, node=Node.objects.get(name=node),
                           gpu_indices=[0], slice={"kind": "whole", "gpu_milli": 1000},
                           started=at(day, 10), ended=at(day, 12))
    job.state, job.started, job.finished = JobState.SUCCEEDED, at(day, 10), at(day, 12)
    job.save(update_fields=["state", "started", "finished"])
    return job


def test_cost_of_a_month_from_the_ledger(gpuctl, tokens, cluster, clock):
    from billing.ledger.jobs import finalize_job_cost
    from billing.ledger.posting import post_ledger
    from billing.models import ChargeLine

    jobs = [ran_in_march(cluster, clock, cluster.alice, cluster.vision, name, "h100-01", day)
            for name, day in (("march-a", 10), ("march-b", 17))]
    ran_in_march(cluster, clock, cluster.bob, cluster.nlp, "bobs", "h100-02", 12)
    clock.now = at(31, 18)
    post_ledger(now=clock.now)
    for job in jobs:
        finalize_job_cost(job.pk)
    lines = ChargeLine.objects.filter(workspace=cluster.vision)
    total = sum(lines.values_list("cost", flat=True))
    assert total > 0

    alice = tokens["alice"]
    code, out, err = gpuctl(alice, "cost", "-w", "vision-lab", "--month", "2026-03")
    assert (code, err) == (0, "")
    title, header, *rows, total_row = out.splitlines()
    assert title.startswith("costs of vision-lab in 2026-03 (2026-03-01 to 2026-03-31), by job, as of ")
    assert header.split()[:2] == ["JOB", "NAME"] and header.endswith("COST (USD)")
    by_job = {int(row.split()[0]): (row.split()[1], Decimal(row.split()[-1])) for row in rows}
    assert by_job == {job.pk: (job.name, sum(lines.filter(job=job).values_list("cost", flat=True)))
                      for job in jobs}
    assert total_row.split() == ["TOTAL", str(total)]

    report = yaml.safe_load(gpuctl(alice, "cost", "-w", "vision-lab", "--month", "2026-03", "--by", "day",
                                   "-o", "yaml")[1])
    assert (report["group_by"], Decimal(report["total"])) == ("day", total)
    assert [row["day"] for row in report["rows"]] == ["2026-03-10", "2026-03-17"]

    # the job's own page gives the same final cost
    job = jobs[0]
    job.refresh_from_db()
    out = gpuctl(alice, "describe", "job", str(job.pk))[1]
    shown = re.search(r"^cost\s+(\S+) USD \(final\)$", out, re.M)
    assert shown and Decimal(shown[1]) == job.final_cost == by_job[job.pk][1], out

    # another month has nothing; bob sees only his own workspace
    code, out, _ = gpuctl(alice, "cost", "-w", "vision-lab", "--month", "2026-04", "-o", "json")
    assert code == 0 and json.loads(out)["rows"] == [] and Decimal(json.loads(out)["total"]) == 0
    assert gpuctl(tokens["bob"], "cost", "-w", "vision-lab", "--month", "2026-03") == (
        1, "", "gpuctl: error: workspace: no such workspace: vision-lab\n")
    bobs = json.loads(gpuctl(tokens["bob"], "cost", "--month", "2026-03", "-o", "json")[1])
    assert Decimal(bobs["total"]) == sum(ChargeLine.objects.filter(workspace=cluster.nlp).values_list("cost", flat=True))
    assert [row["job_name"] for row in bobs["rows"]] == ["bobs"]


def test_a_profile_names_the_server_and_token(gpuctl, tokens, specs, live_daphne, tmp_path):
    alice_job = submit(gpuctl, tokens["alice"], specs["clean"])
    config = tmp_path / "xdg" / "gpuctl" / "config.toml"
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "GPUCTL_URL": "", "GPUCTL_TOKEN": ""}
    code, _, err = gpuctl("", "config", "set-profile", "lab", "--url", live_daphne.url, "--token", tokens["alice"],
                          "-w", "vision-lab", "--default", env=env)
    assert (code, err) == (0, "") and config.exists()
    code, _, _ = gpuctl("", "config", "set-profile", "nlp", "--url", live_daphne.url, "--token", tokens["bob"],
                        env=env)
    assert code == 0

    code, out, err = gpuctl("", "get", "jobs", "-o", "json", env=env)  # the default profile: alice's
    assert (code, err) == (0, "") and [job["id"] for job in json.loads(out)] == [alice_job["id"]]
    assert gpuctl("", "get", "jobs", "--profile", "nlp", env=env) == (0, "", "no jobs\n")
    assert gpuctl("", "get", "jobs", env={**env, "GPUCTL_PROFILE": "nlp"}) == (0, "", "no jobs\n")
    # flags > environment > profile: bob's token from the environment wins over alice's profile
    assert gpuctl("", "get", "jobs", "-w", "nlp-group", env={**env, "GPUCTL_TOKEN": tokens["bob"]}) == (
        0, "", "no jobs in nlp-group\n")
    assert gpuctl("", "get", "jobs", "--profile", "stage", env=env)[2].startswith(
        "gpuctl: error: no profile 'stage' (--profile) in ")


def test_piping_logs_into_head_exits_quietly(live_daphne, tokens, cluster, tmp_path):
    """A real pipe: `gpuctl logs ID | head -1` ends with 141 (SIGPIPE's code) and nothing on stderr."""
    from billing.services import submit_quoted_job
    from scheduling import clock
    from scheduling.models import ReplicaLog
    from scheduling.spec.examples import CLEAN_YAML

    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=CLEAN_YAML)
    text = "".join(f"step {n}: loss {1 / n:.6f}\n" for n in range(1, 30001))  # more than a pipe holds
    ReplicaLog.objects.create(job=job, role="main", index=0, node="h100-01", text=text, size=len(text),
                              captured_at=clock.now())
    env = {**os.environ, "HOME": str(tmp_path), "GPUCTL_URL": live_daphne.url, "GPUCTL_TOKEN": tokens["alice"]}
    env.pop("XDG_CONFIG_HOME", None)
    pipeline = f'{CONSOLE_SCRIPT} logs {job.pk} --replica main-0 | head -1; echo "exit=${{PIPESTATUS[0]}}" >&2'
    done = subprocess.run(["bash", "-c", pipeline], capture_output=True, text=True, timeout=60, env=env)
    assert (done.stdout, done.stderr) == ("step 1: loss 1.000000\n", "exit=141\n")
    whole = subprocess.run([str(CONSOLE_SCRIPT), "logs", str(job.pk), "--replica", "main-0"], capture_output=True,
                           text=True, timeout=60, env=env)
    assert (whole.returncode, whole.stdout) == (0, text)

"""The pages and API calls of the load mix (bench/load.py) cost the same SQL queries whatever the number
of jobs and ledger lines behind them (no query per row), and the report's ledger lines, built outside
the template engine, still say what the template said, for the caller's workspaces only."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from tests_job_specs import job_spec

from billing.ledger.posting import post_ledger
from billing.models import ChargeLine
from billing.services import submit_quoted_job
from portal.services import create_api_token
from scheduling.models import Job, JobState, Node, Replica

QUOTE = {"name": "q", "type": "single", "expectedDuration": "1h",
         "roles": [{"name": "main", "image": "busybox", "resources": {"gpu": 1, "cpu": 4, "memory": "16Gi"}}]}


def add_jobs(tenants, clock, n: int, start: int) -> list[Job]:
    """n jobs of alice's, each run an hour on an H100 and charged by the ledger."""
    jobs = []
    for i in range(start, start + n):
        job = submit_quoted_job(user=tenants.alice, workspace=tenants.vision, spec=job_spec(f"load-{i}"))
        began = clock.now - timedelta(hours=3)
        Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, started=began, finished=began + timedelta(hours=1))
        Replica.objects.create(job=job, role="main", index=0, state=JobState.SUCCEEDED,
                               node=Node.objects.get(name=f"h100-0{1 + i % 2}"), gpu_indices=[i % 8],
                               slice={"kind": "whole", "gpu_milli": 1000}, started=began, ended=began + timedelta(hours=1))
        jobs.append(job)
    post_ledger(now=clock.now)
    return jobs


@pytest.fixture
def api(cluster):
    _, raw = create_api_token(cluster.alice, "load")
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def counts(client, api, job) -> dict[str, int]:
    calls = {
        "/": lambda: client.get("/"),
        "/jobs/": lambda: client.get("/jobs/"),
        "/reports/": lambda: client.get("/reports/"),
        "/jobs/<id>/": lambda: client.get(f"/jobs/{job.pk}/"),
        "/api/v1/workspaces/": lambda: api.get("/api/v1/workspaces/"),
        "/api/v1/jobs/": lambda: api.get("/api/v1/jobs/?limit=50"),
        "/api/v1/quotes/": lambda: api.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": QUOTE},
                                            content_type="application/json"),
    }
    out = {}
    for name, call in calls.items():
        with CaptureQueriesContext(connection) as captured:
            response = call()
        assert response.status_code == 200, (name, response.content[:2000])
        out[name] = len(captured)
    return out


def test_the_load_mix_costs_the_same_queries_for_n_and_2n_jobs(client, api, cluster, clock):
    client.force_login(cluster.alice)
    first = add_jobs(cluster, clock, 4, 0)
    counts(client, api, first[0])  # warm: sessions, a first post of the ledger's cursor
    few = counts(client, api, first[0])
    clock.advance(3 * 3600)  # hours the ledger has not posted yet
    add_jobs(cluster, clock, 4, 4)
    assert ChargeLine.objects.filter(workspace=cluster.vision).count() >= 8
    counts(client, api, first[0])  # warm again: a token's last use is written once per interval
    more = counts(client, api, first[0])
    assert more == few
    # and an upper bound per page, so that a new query per page shows up here (the job page reads its attempts,
    # its chain and its evictions' losses too)
    assert few["/reports/"] <= 32 and few["/jobs/"] <= 22 and few["/"] <= 20 and few["/jobs/<id>/"] <= 25
    # a quote also looks up the image's registry credential, the spec's volumes and buckets, and its queue's
    # recent eviction rate (a preemptible option's expected loss), and whether the queue's quota, its limit and
    # the workspace's budget let an option start now
    assert few["/api/v1/jobs/"] <= 6 and few["/api/v1/quotes/"] <= 33


def report_rows(html: str) -> list[str]:
    section = re.search(r'<section class="card" id="rows">(.*?)</section>', html, re.S).group(1)
    return re.findall(r"<tr[ >].*?</tr>", section.split("<tbody>")[1], re.S)


def cells(row: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td>(.*?)</td>", row, re.S)]


def test_the_ledger_lines_say_what_the_template_said_for_the_callers_workspaces_only(client, cluster, clock):
    (job,) = add_jobs(cluster, clock, 1, 0)
    Job.objects.filter(pk=job.pk).update(name="<b>bold</b>")
    ChargeLine.objects.filter(job=job).update(job_name="<b>bold</b>")
    line = ChargeLine.objects.filter(job=job).first()
    ChargeLine.objects.filter(pk=line.pk).update(provisional=True, offpeak=True)
    bobs = submit_quoted_job(user=cluster.bob, workspace=cluster.nlp, spec=job_spec("bob-secret", queue="nlp-group"))
    ChargeLine.objects.create(  # a line of the other tenant's, in the same range
        hour=line.hour, day=line.day, period=line.period, charge_start=line.charge_start, charge_end=line.charge_end,
        workspace=cluster.nlp, queue="nlp-group", job=bobs, job_name="bob-secret", gpu_model="H100-80GB",
        sharing="exclusive", allocated_gpu_hours=1, cost=1, list_cost=1, exclusive_cost=1, currency="USD",
        computed_at=line.computed_at)
    client.force_login(cluster.alice)
    html = client.get("/reports/").content.decode()
    assert "bob-secret" not in html
    rows = report_rows(html)
    assert len(rows) == ChargeLine.objects.filter(workspace=cluster.vision).count() >= 1
    mine = [r for r in rows if f'href="/jobs/{job.pk}/"' in r]
    assert mine and "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in mine[0]
    open_row = next(r for r in mine if 'class="provisional"' in r)
    assert 'title="the hour is still open"' in open_row
    fields = cells(open_row)
    line.refresh_from_db()
    assert fields[1] == "vision-lab" and fields[2] == "Usage · off-peak" and fields[6] == line.gpu_model
    assert fields[8] == f"{line.allocated_gpu_hours:.3f}" and fields[11] == f"{line.cpu_core_hours:.2f}"
    assert fields[14] == str(line.cost) and fields[15] == "USD"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", fields[0])

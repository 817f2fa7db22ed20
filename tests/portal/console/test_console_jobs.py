"""Cluster-wide jobs in the operator console: staff only (a tenant of either workspace gets 403), a list
across workspaces with checked filters, search, sorting, pages and a CSV; the operator's job page; the
four actions, each confirmed, reported and audited; and where staff land from the tenant pages."""

import csv
import io
import re
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from portal.console.models import AuditEntry
from scheduling.models import Job, JobState, Queue, ReplicaLog


@pytest.fixture
def jobs(cluster, submit, backend, clock, run):
    """alice's job running on h100 (submitted 3 h ago), bob's running on rtx4090 (2 h ago), and alice's
    preemptible one pending in community (now)."""
    from scheduling.models import Node

    Node.objects.filter(pool__name="a100-spot").update(cordoned=True)  # the community job stays pending
    vision = submit(cluster, "vision-train", gpus=2)
    clock.advance(3600)
    nlp = submit(cluster, "nlp-finetune", workspace="nlp", queue="nlp-group", pool="rtx4090")
    clock.advance(3600)
    waiting = submit(cluster, "vision-sweep", queue="community", preemptible="true", pool="a100-spot")
    run(backend, clock)
    clock.advance(5)
    run(backend, clock)
    for job in (vision, nlp, waiting):
        job.refresh_from_db()
    assert (vision.state, nlp.state, waiting.state) == (JobState.RUNNING, JobState.RUNNING, JobState.PENDING)
    return {"vision": vision, "nlp": nlp, "waiting": waiting}


def listed(response) -> list[int]:
    assert response.status_code == 200, response.content.decode()[:2000]
    return [int(pk) for pk in re.findall(r'<tr data-job="(\d+)"', response.content.decode())]


def csv_rows(client, params) -> list[dict]:
    async def fetch():
        response = await client.get("/console/jobs/export.csv", params)
        assert response.status_code == 200 and response["Content-Type"] == "text/csv; charset=utf-8"
        return b"".join([chunk async for chunk in response.streaming_content])

    return list(csv.DictReader(io.StringIO(async_to_sync(fetch)().decode())))


# --------------------------------------------------------------------------- staff only


def urls(job):
    base = f"/console/jobs/{job.pk}"
    return ["/console/jobs/", "/console/jobs/?partial=1", "/console/jobs/export.csv", f"{base}/", f"{base}/?partial=1",
            f"{base}/log/", f"{base}/cancel/", f"{base}/requeue/", f"{base}/priority/", f"{base}/move/"]


@pytest.mark.django_db
def test_only_operators_reach_the_console_jobs(client, cluster, jobs):
    for url in urls(jobs["nlp"]):
        client.logout()
        assert client.get(url).status_code == 302, url  # anonymous: to the login page
        for tenant in (cluster.alice, cluster.bob):  # another tenant's job, and the owner's own job
            client.force_login(tenant)
            assert client.get(url).status_code == 403, url
        client.force_login(cluster.admin)
        assert client.get(url).status_code == 200, url


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["cancel", "requeue", "priority", "move"])
def test_tenants_cannot_act_through_the_console(client, cluster, jobs, action):
    data = {"cancel": {}, "requeue": {}, "priority": {"priority": "90", "confirm": "1"},
            "move": {"queue": "community", "confirm": "1"}}[action]
    for tenant, job in ((cluster.alice, jobs["nlp"]), (cluster.bob, jobs["nlp"]), (cluster.alice, jobs["vision"])):
        client.force_login(tenant)
        assert client.post(f"/console/jobs/{job.pk}/{action}/", data).status_code == 403
    for job in jobs.values():
        before = job.state, job.priority, job.queue_id
        job.refresh_from_db()
        assert (job.state, job.priority, job.queue_id) == before
    assert not AuditEntry.objects.exists()


@pytest.mark.django_db
def test_a_missing_job_is_404_for_operators(admin_client, cluster):
    for url in ("/console/jobs/999999/", "/console/jobs/999999/cancel/", "/console/jobs/999999/log/"):
        assert admin_client.get(url).status_code == 404


# --------------------------------------------------------------------------- the list


@pytest.mark.django_db
def test_the_list_spans_workspaces_newest_first(admin_client, jobs):
    page = admin_client.get("/console/jobs/")
    assert listed(page) == [jobs["waiting"].pk, jobs["nlp"].pk, jobs["vision"].pk]
    html = page.content.decode()
    row = html.split(f'<tr data-job="{jobs["nlp"].pk}"')[1].split("</tr>")[0]
    assert "nlp-group" in row and "bob" in row and "rtx4090 · RTX-4090-24GB · exclusive" in row and "rtx4090-0" in row
    assert f'href="/console/jobs/{jobs["nlp"].pk}/"' in row and "/admin/scheduling" not in html
    assert f'href="/console/jobs/{jobs["nlp"].pk}/cancel/?next=/console/jobs/"' in row
    assert 'id="nav-console-jobs"' in html and 'aria-current="page">Jobs' in html


@pytest.mark.django_db
@pytest.mark.parametrize("params, expected", [
    ({"workspace": "nlp-group"}, ["nlp"]),
    ({"workspace": "vision-lab"}, ["waiting", "vision"]),
    ({"queue": "community"}, ["waiting"]),
    ({"pool": "h100"}, ["vision"]),
    ({"pool": "a100-spot"}, ["waiting"]),  # quoted there, not placed yet
    ({"node": "rtx4090-01"}, ["nlp"]),
    ({"state": "Pending"}, ["waiting"]),
    ({"state": "Running"}, ["nlp", "vision"]),
    ({"submitter": "bob"}, ["nlp"]),
    ({"gpu_model": "H100-80GB"}, ["vision"]),
    ({"sharing": "exclusive"}, ["waiting", "nlp", "vision"]),
    ({"sharing": "mig"}, []),
    ({"min_age": "90m"}, ["vision"]),
    ({"min_age": "30m"}, ["nlp", "vision"]),
    ({"max_age": "90m"}, ["waiting", "nlp"]),
    ({"min_age": "30m", "max_age": "90m"}, ["nlp"]),
    ({"q": "sweep"}, ["waiting"]),
    ({"q": "BOB"}, ["nlp"]),
    ({"q": "nlp-group"}, ["nlp"]),
    ({"workspace": "vision-lab", "state": "Running", "pool": "h100"}, ["vision"]),
])
def test_each_filter(admin_client, jobs, params, expected):
    assert listed(admin_client.get("/console/jobs/", params)) == [jobs[name].pk for name in expected]


@pytest.mark.django_db
def test_search_by_job_number(admin_client, jobs):
    assert listed(admin_client.get("/console/jobs/", {"q": f"#{jobs['nlp'].pk}"})) == [jobs["nlp"].pk]


@pytest.mark.django_db
@pytest.mark.parametrize("params, field", [
    ({"workspace": "no-such-ws"}, "workspace"),
    ({"queue": "root"}, "queue"),  # not a leaf: no job waits there
    ({"pool": "nope"}, "pool"),
    ({"node": "h100-99"}, "node"),
    ({"state": "Sleeping"}, "state"),
    ({"submitter": "mallory"}, "submitter"),
    ({"gpu_model": "TPU"}, "gpu_model"),
    ({"sharing": "halves"}, "sharing"),
    ({"min_age": "soon"}, "min_age"),
    ({"max_age": "99999w"}, "max_age"),
    ({"min_age": "2h", "max_age": "1h"}, "max_age"),
    ({"sort": "password"}, "sort"),
    ({"sort": "-spec_text"}, "sort"),
    ({"page_size": "501"}, "page_size"),
    ({"page_size": "0"}, "page_size"),
    ({"page": "two"}, "page"),
    ({"page": "-1"}, "page"),
    ({"q": "x" * 201}, "q"),
    ({"utm": "y" * 201}, ""),  # a parameter the form does not read is bounded too
])
def test_bad_filters_are_a_400_page_with_the_error_beside_the_field(admin_client, jobs, params, field):
    response = admin_client.get("/console/jobs/", params)
    html = response.content.decode()
    assert response.status_code == 400
    assert f'data-field="{field}"' in html and 'id="jobs-refused"' in html
    assert "<tr data-job=" not in html and 'id="jobs-csv"' not in html


@pytest.mark.django_db
def test_a_nul_byte_is_refused(admin_client, jobs):
    for url in ("/console/jobs/", "/console/jobs/export.csv"):
        response = admin_client.get(url, {"q": "a\x00b"})
        assert response.status_code == 400 and 'id="domain-error"' in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("sort, expected", [
    ("name", ["nlp", "waiting", "vision"]),  # nlp-finetune, vision-sweep, vision-train
    ("-name", ["vision", "waiting", "nlp"]),
    ("submitted", ["vision", "nlp", "waiting"]),
    ("workspace", ["nlp", "waiting", "vision"]),  # ties: newest first
    ("state", ["waiting", "nlp", "vision"]),
])
def test_sorting_by_a_whitelisted_column(admin_client, jobs, sort, expected):
    assert listed(admin_client.get("/console/jobs/", {"sort": sort})) == [jobs[n].pk for n in expected]


@pytest.mark.django_db
def test_sort_links_keep_the_filters_and_turn_the_order(admin_client, jobs):
    html = admin_client.get("/console/jobs/", {"workspace": "vision-lab", "sort": "name"}).content.decode()
    assert 'href="?workspace=vision-lab&amp;sort=-name"' in html and 'aria-sort="ascending"' in html
    assert 'href="?workspace=vision-lab&amp;sort=priority"' in html


@pytest.mark.django_db
def test_paging_on_the_server(admin_client, cluster, jobs):
    from tests.factories import JobFactory

    queue = Queue.objects.get(name="vision-lab")
    extra = [JobFactory(workspace=cluster.vision, queue=queue, submitted_by=cluster.alice, name=f"bulk-{i}").pk
             for i in range(4)]
    first = admin_client.get("/console/jobs/", {"page_size": "3", "sort": "id"})
    every = [jobs["vision"].pk, jobs["nlp"].pk, jobs["waiting"].pk, *extra]
    assert listed(first) == every[:3]
    html = first.content.decode()
    assert "7 jobs" in html and "page 1 of 3" in html and 'href="?page_size=3&amp;sort=id&amp;page=2"' in html
    assert listed(admin_client.get("/console/jobs/", {"page_size": "3", "sort": "id", "page": "3"})) == every[6:]
    assert listed(admin_client.get("/console/jobs/", {"page_size": "500"})) == sorted(every, reverse=True)


@pytest.mark.django_db
def test_the_csv_has_every_matching_job_with_the_same_filters(cluster, jobs):
    client = AsyncClient()
    client.force_login(cluster.admin)
    rows = csv_rows(client, {"workspace": "vision-lab", "sort": "name", "page_size": "1"})  # not paged
    assert [r["name"] for r in rows] == ["vision-sweep", "vision-train"]
    train = rows[1]
    assert train["workspace"] == "vision-lab" and train["state"] == "Running" and train["submitter"] == "alice"
    assert train["pool"] == "h100" and train["nodes"].startswith("h100-0")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", train["submitted"]) and train["cost_is_final"] == "false"
    assert [r["name"] for r in csv_rows(client, {"q": "nlp"})] == ["nlp-finetune"]


@pytest.mark.django_db
def test_a_bad_csv_filter_is_refused_before_the_first_byte(client, cluster, jobs):
    client.force_login(cluster.admin)
    response = client.get("/console/jobs/export.csv", {"state": "Sleeping"})
    assert response.status_code == 400 and response["Content-Type"].startswith("text/html")
    assert 'data-field="state"' in response.content.decode()
    client.force_login(cluster.bob)
    assert client.get("/console/jobs/export.csv").status_code == 403


@pytest.mark.django_db
def test_the_list_links_its_csv_with_the_filters(admin_client, jobs):
    html = admin_client.get("/console/jobs/", {"state": "Running", "page": "1", "page_size": "10"}).content.decode()
    assert 'href="/console/jobs/export.csv?state=Running&amp;sort=-submitted"' in html


# --------------------------------------------------------------------------- the job page


@pytest.mark.django_db
def test_the_job_page_shows_spec_events_placement_log_usage_and_cost(admin_client, jobs, clock):
    from billing.ledger.posting import post_ledger

    job = jobs["nlp"]
    clock.advance(1800)
    post_ledger(job_ids=[job.pk])
    html = admin_client.get(f"/console/jobs/{job.pk}/").content.decode()
    assert "nodePool: rtx4090" in html and 'id="job-spec"' in html  # the spec as submitted, read-only
    assert "<form" not in html.split('id="job-spec"')[1]
    events = html.split('id="events"')[1].split("</ol>")[0]
    assert "submitted" in events and "running" in events
    replica = job.replicas.get()
    placement = html.split('id="replicas-table"')[1].split("</table>")[0]
    assert replica.node.name in placement and ", ".join(map(str, replica.gpu_indices)) in placement
    assert replica.slice_label in placement
    assert 'id="job-log"' in html and f'href="/console/jobs/{job.pk}/log/?download=1"' in html
    assert "step " in html  # the live log of the running replica
    assert re.search(r'id="cost-so-far">\$[0-9]', html)  # the workspace's currency, by its symbol
    usage = re.search(r'<script type="application/json" id="usage-data">(.*?)</script>', html, re.S).group(1)
    assert '"pool": "rtx4090"' in usage and '"allocated": [' in usage
    assert all(f'id="action-{a}"' in html for a in ("cancel", "requeue", "priority"))
    assert 'id="action-move"' not in html  # only a pending job moves


@pytest.mark.django_db
def test_a_finished_jobs_page_shows_its_final_cost_and_kept_log(admin_client, cluster, jobs, clock):
    job = jobs["vision"]
    admin_client.post(f"/console/jobs/{job.pk}/cancel/")
    clock.advance(600)  # past the moments after its end when the pod's own log is read
    ReplicaLog.objects.create(job=job, role="main", index=0, node="h100-01", text="epoch 3 done\n", size=13,
                              captured_at=job.created)
    html = admin_client.get(f"/console/jobs/{job.pk}/").content.decode()
    assert 'id="final-cost"' in html and "epoch 3 done" in html
    assert 'id="action-cancel"' not in html and "takes no action" in html
    log = admin_client.get(f"/console/jobs/{job.pk}/log/?download=1")
    assert log["Content-Disposition"] == f'attachment; filename="job-{job.pk}-logs.txt"'
    assert "epoch 3 done" in log.content.decode()


@pytest.mark.django_db
def test_the_live_part_of_the_job_page(admin_client, jobs):
    html = admin_client.get(f"/console/jobs/{jobs['vision'].pk}/?partial=1").content.decode()
    assert 'id="job-state"' in html and 'id="events"' in html and "<html" not in html


# --------------------------------------------------------------------------- actions


def audit_lines(action):
    return list(AuditEntry.objects.filter(action=action, target_type="scheduling.job"))


@pytest.mark.django_db
def test_cancel_asks_then_cancels_and_audits(admin_client, jobs):
    job = jobs["nlp"]
    page = admin_client.get(f"/console/jobs/{job.pk}/cancel/")
    assert page.status_code == 200 and 'id="confirm-cancel"' in page.content.decode()
    assert "pays for the time its GPUs were held" in page.content.decode()
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and not AuditEntry.objects.exists()  # asking changes nothing

    response = admin_client.post(f"/console/jobs/{job.pk}/cancel/", {"reason": "  runaway   job "}, follow=True)
    assert response.redirect_chain[-1][0] == f"/console/jobs/{job.pk}/"
    assert f"Job nlp-finetune #{job.pk} cancelled; its replicas on rtx4090-0" in response.content.decode()
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED and job.final_cost is not None
    assert job.events.order_by("id").last().reason.startswith("cancelled by operator admin: runaway job")
    [line] = audit_lines("cancel")
    assert (line.username, line.target_id, line.changes) == ("admin", str(job.pk), {"state": ["Running", "Cancelled"]})
    assert line.message == "reason: runaway job" and line.target_repr == f"nlp-finetune #{job.pk}"


@pytest.mark.django_db
def test_cancel_goes_back_to_the_list_it_came_from(admin_client, jobs):
    job = jobs["waiting"]
    back = "/console/jobs/?state=Pending"
    response = admin_client.post(f"/console/jobs/{job.pk}/cancel/", {"next": back})
    assert response.status_code == 302 and response["Location"] == back
    evil = admin_client.post(f"/console/jobs/{jobs['nlp'].pk}/cancel/", {"next": "https://evil.example/console/jobs/"})
    assert evil["Location"] == f"/console/jobs/{jobs['nlp'].pk}/"


@pytest.mark.django_db
def test_a_finished_job_takes_no_action(admin_client, jobs):
    job = jobs["waiting"]
    admin_client.post(f"/console/jobs/{job.pk}/cancel/")
    for action, data in (("cancel", {}), ("requeue", {}), ("priority", {"priority": "9", "confirm": "1"}),
                         ("move", {"queue": "vision-lab", "confirm": "1"})):
        page = admin_client.get(f"/console/jobs/{job.pk}/{action}/").content.decode()
        assert 'id="action-blocked"' in page and "<button" not in page.split('id="action-blocked"')[1]
        assert admin_client.post(f"/console/jobs/{job.pk}/{action}/", data).status_code in (400, 409)
    job.refresh_from_db()
    assert (job.state, job.priority, job.queue.name) == (JobState.CANCELLED, 0, "community")
    assert len(AuditEntry.objects.all()) == 1  # the cancel


@pytest.mark.django_db
def test_cancelling_a_job_cancelled_meanwhile_is_a_409_that_changes_nothing(admin_client, cluster, jobs):
    from scheduling.services import cancel_job

    job = jobs["vision"]
    cancel_job(user=cluster.alice, job=job)  # after the operator opened the confirmation
    response = admin_client.post(f"/console/jobs/{job.pk}/cancel/")
    assert response.status_code == 409 and "already Cancelled" in response.content.decode()
    assert not AuditEntry.objects.exists()


@pytest.mark.django_db
def test_requeue_asks_then_requeues_and_audits(admin_client, jobs):
    job = jobs["vision"]
    page = admin_client.get(f"/console/jobs/{job.pk}/requeue/").content.decode()
    assert 'id="confirm-requeue"' in page and "although the job is not preemptible" in page
    response = admin_client.post(f"/console/jobs/{job.pk}/requeue/", {"reason": "GPU errors"}, follow=True)
    assert "requeued: its replicas on h100-0" in response.content.decode()
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.pending_code == "requeued"
    assert list(job.events.order_by("id").values_list("kind", flat=True))[-2:] == ["preempted", "requeued"]
    [line] = audit_lines("requeue")
    assert line.changes == {"state": ["Running", "Pending"]} and line.message == "reason: GPU errors"
    again = admin_client.post(f"/console/jobs/{job.pk}/requeue/")  # pending now: nothing to requeue
    assert again.status_code == 409 and len(audit_lines("requeue")) == 1


@pytest.mark.django_db
def test_priority_asks_for_a_value_then_a_confirmation(admin_client, jobs):
    job = jobs["nlp"]
    url = f"/console/jobs/{job.pk}/priority/"
    form = admin_client.get(url).content.decode()
    assert 'name="priority"' in form and 'value="0"' in form and "stays billed at priority 0" in form
    bad = admin_client.post(url, {"priority": "101"})
    assert bad.status_code == 400 and 'data-field="priority"' in bad.content.decode()
    same = admin_client.post(url, {"priority": "0"})
    assert same.status_code == 400 and "already 0" in same.content.decode()
    confirm = admin_client.post(url, {"priority": "60", "reason": "paper deadline"})
    html = confirm.content.decode()
    assert confirm.status_code == 200 and 'id="confirm-priority"' in html and "0 → 60" in html
    assert 'name="confirm" value="1"' in html and 'name="priority" value="60"' in html
    assert Job.objects.get(pk=job.pk).priority == 0 and not AuditEntry.objects.exists()
    done = admin_client.post(url, {"priority": "60", "reason": "paper deadline", "confirm": "1"}, follow=True)
    assert f"Job nlp-finetune #{job.pk}: priority 0 → 60." in done.content.decode()
    assert Job.objects.get(pk=job.pk).priority == 60
    assert job.events.filter(kind="priority-changed").exists()
    [line] = audit_lines("change priority")
    assert line.changes == {"priority": [0, 60]} and line.message == "reason: paper deadline"


@pytest.mark.django_db
def test_move_asks_for_a_queue_then_a_confirmation(admin_client, cluster, jobs, submit):
    job = submit(cluster, "vision-later", preemptible="true", pool="a100-spot")  # pending: a100-spot is cordoned
    url = f"/console/jobs/{job.pk}/move/"
    form = admin_client.get(url).content.decode()
    options = re.findall(r'<option value="([^"]*)"', form)
    assert options == ["", "community"]  # vision-lab is its queue, nlp-group is not open to vision-lab
    other = admin_client.post(url, {"queue": "nlp-group", "confirm": "1"})
    assert other.status_code == 400 and 'data-field="queue"' in other.content.decode()
    confirm = admin_client.post(url, {"queue": "community"})
    assert confirm.status_code == 200 and "vision-lab → community" in confirm.content.decode()
    assert Job.objects.get(pk=job.pk).queue.name == "vision-lab"
    done = admin_client.post(url, {"queue": "community", "confirm": "1"}, follow=True)
    assert "moved from queue vision-lab to community" in done.content.decode()
    assert Job.objects.get(pk=job.pk).queue.name == "community"
    [line] = audit_lines("move queue")
    assert line.changes == {"queue": ["vision-lab", "community"]}


@pytest.mark.django_db
def test_a_non_preemptible_job_is_not_moved_to_a_preemptible_only_queue(admin_client, cluster, submit):
    job = submit(cluster, "fixed", preemptible="false")
    response = admin_client.post(f"/console/jobs/{job.pk}/move/", {"queue": "community", "confirm": "1"})
    assert response.status_code == 400 and "preemptible work only" in response.content.decode()
    assert Job.objects.get(pk=job.pk).queue.name == "vision-lab" and not AuditEntry.objects.exists()


@pytest.mark.django_db
def test_a_running_job_does_not_move(admin_client, jobs):
    page = admin_client.get(f"/console/jobs/{jobs['vision'].pk}/move/").content.decode()
    assert 'id="action-blocked"' in page and "move applies to Pending jobs" in page
    response = admin_client.post(f"/console/jobs/{jobs['vision'].pk}/move/", {"queue": "community", "confirm": "1"})
    assert response.status_code in (400, 409) and Job.objects.get(pk=jobs["vision"].pk).queue.name == "vision-lab"


@pytest.mark.django_db
def test_billing_keeps_the_quoted_priority(admin_client, cluster, submit, backend, clock, run):
    """Two identical jobs; an operator raises one's priority: both cost the same."""
    from billing.ledger.posting import post_ledger

    raised, same = submit(cluster, "raised", gpus=1), submit(cluster, "same", gpus=1)
    run(backend, clock)
    clock.advance(5)
    run(backend, clock)
    admin_client.post(f"/console/jobs/{raised.pk}/priority/", {"priority": "100", "confirm": "1"})
    assert Job.objects.get(pk=raised.pk).priority == 100
    clock.advance(1800)
    post_ledger(job_ids=[raised.pk, same.pk])
    from billing.ledger.selectors import job_total

    assert job_total(raised.pk) == job_total(same.pk) > 0


# --------------------------------------------------------------------------- links from elsewhere


@pytest.mark.django_db
def test_console_links_open_the_operators_job_page_not_the_admin(admin_client, jobs):
    dashboard = admin_client.get("/console/?partial=1").content.decode()
    assert f'href="/console/jobs/{jobs["waiting"].pk}/"' in dashboard and "/admin/scheduling/job" not in dashboard
    cluster_map = admin_client.get("/cluster/").content.decode()
    assert f'href="/console/jobs/{jobs["vision"].pk}/"' in cluster_map and "/admin/scheduling/job" not in cluster_map


@pytest.mark.django_db
def test_staff_of_no_workspace_land_on_the_console_from_tenant_job_pages(admin_client, cluster, jobs):
    job = jobs["vision"]
    assert admin_client.get("/jobs/")["Location"] == "/console/jobs/"
    assert admin_client.get(f"/jobs/{job.pk}/")["Location"] == f"/console/jobs/{job.pk}/"
    assert admin_client.get(f"/jobs/{job.pk}/log/?download=1")["Location"] == f"/console/jobs/{job.pk}/log/?download=1"


@pytest.mark.django_db
def test_tenants_keep_their_job_pages(client, cluster, jobs):
    client.force_login(cluster.bob)
    assert client.get(f"/jobs/{jobs['vision'].pk}/").status_code == 404  # another tenant's job
    assert client.get(f"/jobs/{jobs['vision'].pk}/log/").status_code == 404
    own = client.get("/jobs/")
    assert own.status_code == 200 and f'data-job="{jobs["nlp"].pk}"' in own.content.decode()
    assert 'id="operator-jobs-link"' not in own.content.decode()


@pytest.mark.django_db
def test_staff_who_are_members_see_their_jobs_and_a_way_to_every_workspaces(client, cluster, jobs):
    from portal.models import Role
    from tests.factories import MembershipFactory

    MembershipFactory(user=cluster.admin, workspace=cluster.nlp, role=Role.MEMBER)
    client.force_login(cluster.admin)
    page = client.get("/jobs/").content.decode()
    assert f'data-job="{jobs["nlp"].pk}"' in page and f'data-job="{jobs["vision"].pk}"' not in page
    assert 'id="operator-jobs-link"' in page and 'href="/console/jobs/"' in page
    assert client.get(f"/jobs/{jobs['nlp'].pk}/").status_code == 200  # their own workspace's job page


def test_ages_are_read_in_minutes_hours_days_and_weeks():
    from django import forms

    from portal.console.job_forms import parse_age

    assert [parse_age(t) for t in ("30m", "6h", "2d", "1w", " 3 D ")] == [
        timedelta(minutes=30), timedelta(hours=6), timedelta(days=2), timedelta(weeks=1), timedelta(days=3)]
    for bad in ("", "h", "1y", "1.5h", "-1h", "1h2m", "9999999d"):
        with pytest.raises(forms.ValidationError):
            parse_age(bad)


def test_the_cluster_map_is_for_operators(client, cluster):
    """A tenant who opens the cluster map gets the portal's styled 403, not the admin's sign-in page; a
    stranger is sent to the portal's sign-in page."""
    response = client.get("/cluster/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    client.force_login(cluster.alice)
    response = client.get("/cluster/")
    assert response.status_code == 403
    page = response.content.decode()
    assert "operators (staff) only" in page and "/admin/login/" not in page

"""The capacity planner: the history it replays, its form (edits, uploads, errors beside their fields), its
Celery task, saving and comparing, the pool-against-silos figure on the dashboard, and operators only."""

import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from portal.console import planner_services as services
from portal.console.models import PlannerRun
from portal.console.planner_forms import pool_field, queue_field
from portal.console.tasks import run_planner
from scheduling.core.replay import Replay
from scheduling.history import cluster_snapshot, history_jobs, replay_jobs
from scheduling.models import Replica

TRACE = "job_id,user,num_gpu,submit_time,duration,best_effort\n1,vision-lab,8,0,3600,0\n2,vision-lab,8,0,3600,0\n" \
        "3,somebody,8,0,3600,0\n4,nlp-group,1,60,600,1\n"


@pytest.fixture
def busy_hour(cluster, clock, backend, run, submit):
    """Three 8-GPU one-hour jobs submitted at once on the two 8-GPU h100 nodes: the third waited an hour."""
    jobs = [submit(cluster, f"train-{i}", gpus=8) for i in range(3)]
    run(backend, clock)
    for _ in range(4):
        clock.advance(1800)
        run(backend, clock)
    clock.advance(3600)
    run(backend, clock)
    for job in jobs:
        job.refresh_from_db()
    assert [j.state for j in jobs] == ["Succeeded"] * 3
    return jobs


def form_data(**changes) -> dict:
    """The planner form as the page fills it for the test world's cluster, with `changes`."""
    start = services.actual_inputs(cluster_snapshot())
    data = {"days": "30", "checkpoint_min": "30", "preemption": "on", "trace_queue": ""}
    for name, p in start["pools"].items():
        for what, value in p.items():
            data[pool_field(name, what)] = str(value)
    for name, q in start["queues"].items():
        data[queue_field(name, "deserved_gpus")] = q["deserved_gpus"]
        data[queue_field(name, "limit_gpus")] = q["limit_gpus"] or ""
    data.update(changes)
    return data


def test_the_history_is_the_jobs_with_their_queue_and_run_times(busy_hour):
    history = {h.job.id: h for h in history_jobs()}
    assert set(history) == {str(j.pk) for j in busy_hour}
    for job in busy_hour:
        h = history[str(job.pk)]
        assert h.job.queue == "vision-lab" and h.pool == "h100" and h.finished
        assert h.submit == job.created.timestamp() and h.duration == pytest.approx(3600, abs=1)


def test_the_replay_decides_as_the_celery_cycle_on_the_same_snapshot(cluster, clock, backend, run, submit):
    """Pending jobs in the database: the planner's first replay cycle on its cluster binds exactly what the
    Celery cycle binds on the same jobs and cluster."""
    jobs = []
    for i, (g, p) in enumerate([(8, "h100"), (4, "h100"), (4, "h100"), (2, "a100-spot"), (8, "h100"), (1, "rtx4090")]):
        jobs.append(submit(cluster, f"j{i}", gpus=g, pool=p))
        clock.advance(1)  # submitted one after the other: the queue's order is the submission order
    replay = Replay(cluster_snapshot(), replay_jobs(history_jobs(), checkpoint_s=None), start=clock.now.timestamp())
    seen = []
    replay.on_cycle = lambda at, snapshot, decisions: seen.append(decisions)
    replay.run(max_cycles=1)
    run(backend, clock)   # the Celery cycle on the database
    placed = {(str(r.job_id), r.node.name, tuple(r.gpu_indices)) for r in Replica.objects.filter(
        job__in=jobs, node__isnull=False)}
    assert placed == {(b.job_id, b.node, b.gpus) for b in seen[0].binds}
    # in both, vision-lab's non-preemptible work stops at its 16 deserved GPUs: the first three jobs
    assert {job_id for job_id, _, _ in placed} == {str(j.pk) for j in jobs[:3]}


def test_an_operator_replays_an_edited_cluster_and_sees_the_waits_go(busy_hour, client, operator, sent_tasks,
                                                                      django_capture_on_commit_callbacks):
    client.force_login(operator)
    page = client.get("/console/planner/")
    assert page.status_code == 200 and b'id="planner-pools"' in page.content and b'id="pool-savings"' in page.content
    with django_capture_on_commit_callbacks(execute=True):
        # a third node, and the quota to use it: vision-lab's work is not preemptible, so it stays within it
        answer = client.post("/console/planner/", form_data(**{pool_field("h100", "nodes"): "3",
                                                               queue_field("vision-lab", "deserved_gpus"): "24"}))
    run = PlannerRun.objects.get()
    assert answer.status_code == 302 and answer["Location"] == f"/console/planner/runs/{run.pk}/"
    assert sent_tasks == [(services.RUN_PLANNER, [run.pk])] and run.state == "queued" and run.inputs["pools"]["h100"]["nodes"] == 3
    assert run.inputs["queues"]["vision-lab"] == {"deserved_gpus": "24", "limit_gpus": None}
    status = client.get(f"/console/planner/runs/{run.pk}/?partial=status").json()
    assert status == {"state": "queued", "progress": 0.0, "error": ""}

    assert run_planner(run.pk) is True          # what the worker runs
    assert run_planner(run.pk) is False         # a duplicate message finds it taken
    run.refresh_from_db()
    assert run.state == "done" and run.progress == 1.0
    actual, edited = run.results["actual"], run.results["edited"]
    assert actual["queues"]["vision-lab"]["wait_p95_s"] == pytest.approx(3600, abs=60)
    assert edited["queues"]["vision-lab"]["wait_p95_s"] == 0
    assert actual["pools"]["h100"]["gpus"] == 16 and edited["pools"]["h100"]["gpus"] == 24
    # three GPU-hours x 8 GPUs at 3.00 USD either way
    assert actual["total"]["gpu_hours"] == pytest.approx(24, abs=0.1) and actual["total"]["cost"] == "72.00"
    assert edited["total"]["cost"] == "72.00"
    assert edited["pools"]["h100"]["utilisation"] == pytest.approx(actual["pools"]["h100"]["utilisation"] * 16 / 24, rel=1e-3)
    alloc = actual["allocation"]   # the average GPUs held in each step of the chart
    assert sum(alloc["gpus"]) * alloc["step_s"] / 3600 == pytest.approx(24, abs=0.1)

    page = client.get(f"/console/planner/runs/{run.pk}/")
    html = page.content.decode()
    assert 'id="chart-waits"' in html and 'id="chart-allocation"' in html and 'id="planner-chart-data"' in html
    assert 'data-queue="vision-lab"' in html and "72.00" in html

    # saved under a name, then compared with another
    assert client.post(f"/console/planner/runs/{run.pk}/save/", {"name": ""}).status_code == 400
    assert client.post(f"/console/planner/runs/{run.pk}/save/", {"name": "one more h100 node"}).status_code == 302
    run.refresh_from_db()
    assert run.saved and run.name == "one more h100 node"
    other = PlannerRun.objects.create(kind="whatif", inputs=form_data(), state="queued")
    other.inputs = run.inputs | {"pools": {**run.inputs["pools"], "h100": {**run.inputs["pools"]["h100"], "nodes": 1}}}
    other.save()
    run_planner(other.pk)
    other.refresh_from_db()
    assert other.results["edited"]["pools"]["h100"]["gpus"] == 8
    compare = client.get(f"/console/planner/compare/?a={run.pk}&b={other.pk}")
    assert compare.status_code == 200 and b"one more h100 node" in compare.content
    assert client.get("/console/planner/compare/?a=x&b=1").status_code == 400
    assert client.get(f"/console/planner/compare/?a={run.pk}&b=999999").status_code == 404


def test_bad_edits_and_bad_uploads_are_refused_beside_their_field_and_nothing_runs(cluster, client, operator):
    client.force_login(operator)
    cases = [
        ({queue_field("vision-lab", "limit_gpus"): "4"}, queue_field("vision-lab", "limit_gpus"), "below the deserved"),
        ({pool_field("h100", "nodes"): "-1"}, pool_field("h100", "nodes"), "greater than or equal to 0"),
        ({"days": "0"}, "days", "greater than or equal to 1"),
        ({"trace": SimpleUploadedFile("t.csv", b"user,num_gpu\nx,1\n"), "trace_queue": "vision-lab"}, "trace",
         "lacks column"),
        ({"trace": SimpleUploadedFile("t.csv", b"\xff\xfe\x00bad"), "trace_queue": "vision-lab"}, "trace", "UTF-8"),
        ({"trace": SimpleUploadedFile("t.csv", (TRACE + "9,x,one,0,1,0\n").encode()), "trace_queue": "vision-lab"},
         "trace", "line 6: num_gpu is not a number"),
        ({"trace": SimpleUploadedFile("t.csv", TRACE.encode())}, "trace_queue", "choose the queue"),
        ({"trace_queue": "root"}, "trace_queue", "Select a valid choice"),
    ]
    for changes, field, message in cases:
        answer = client.post("/console/planner/", form_data(**changes))
        html = answer.content.decode()
        assert answer.status_code == 400, field
        assert f'data-field="{field}"' in html and message in html, (field, message)
    assert not PlannerRun.objects.exists()


def test_an_uploaded_trace_is_replayed_on_both_clusters(cluster, client, operator, clock,
                                                       django_capture_on_commit_callbacks):
    client.force_login(operator)
    with django_capture_on_commit_callbacks(execute=False):
        answer = client.post("/console/planner/", form_data(
            trace=SimpleUploadedFile("mix.csv", TRACE.encode()), trace_queue="nlp-group",
            **{pool_field("h100", "nodes"): "0"}))
    assert answer.status_code == 302
    run = PlannerRun.objects.get()
    assert run.kind == "trace" and run.inputs["trace_name"] == "mix.csv" and "somebody" in run.trace_csv
    run_planner(run.pk)
    run.refresh_from_db()
    actual = run.results["actual"]["queues"]
    # teams named like queues go there; "somebody" goes to the chosen queue
    assert actual["vision-lab"]["jobs"] == 2 and actual["nlp-group"]["jobs"] == 2
    assert run.results["jobs"] == 4 and run.results["edited"]["pools"]["h100"]["gpus"] == 0
    assert all(q["never_started"] == 0 for q in actual.values())


def test_tenants_cannot_see_the_planner(cluster, busy_hour):
    run = PlannerRun.objects.create(kind="whatif", inputs={"days": 30})
    bob = Client()
    bob.force_login(cluster.bob)
    for url in ["/console/planner/", f"/console/planner/runs/{run.pk}/", f"/console/planner/runs/{run.pk}/?partial=status",
                f"/console/planner/compare/?a={run.pk}&b={run.pk}"]:
        assert bob.get(url).status_code == 403, url
    for url in ["/console/planner/", f"/console/planner/runs/{run.pk}/save/", "/console/planner/savings/"]:
        assert bob.post(url, {"name": "mine"}).status_code == 403, url
    anonymous = Client().get("/console/planner/")
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    run.refresh_from_db()
    assert not run.saved and PlannerRun.objects.count() == 1


def test_the_dashboard_shows_the_gpus_the_pool_saved_against_silos(busy_hour, client, operator):
    client.force_login(operator)
    assert b'id="pool-savings-empty"' in client.get("/console/").content
    run = services.refresh_savings(operator)
    h100 = run.results["pools"]["h100"]
    # alone, vision-lab needs two nodes for its two jobs at once (a third waits an hour: the p95 of three jobs is
    # the slowest); as a pool nothing changes with one queue, so nothing is saved
    assert h100["silos"] == {"vision-lab": 24} and h100["pool_gpus"] == 24 and run.results["saved_gpus"] == 0
    html = client.get("/console/").content.decode()
    assert 'id="pool-saved-gpus">0<' in html and 'id="pool-silos-gpus">24<' in html


def test_two_teams_that_take_turns_share_a_pool_and_save_a_silo(cluster, clock, backend, run, submit, operator):
    """vision-lab runs an 8-GPU hour, then nlp-group does: as silos each needs a node, as one pool one node."""
    submit(cluster, "vision-hour", gpus=8)
    run(backend, clock)
    clock.advance(4000)
    run(backend, clock)
    submit(cluster, "nlp-hour", gpus=8, workspace="nlp", queue="nlp-group")
    run(backend, clock)
    clock.advance(4000)
    run(backend, clock)
    result = services.refresh_savings(operator).results
    assert result["pools"]["h100"]["silos"] == {"nlp-group": 8, "vision-lab": 8}
    assert result["silos_gpus"] == 16 and result["pool_gpus"] == 8 and result["saved_gpus"] == 8


@pytest.mark.django_db(transaction=True)
def test_a_real_celery_worker_runs_a_replay_with_progress(cluster, celery_worker_queue):
    client = Client()
    client.force_login(cluster.admin)
    run = PlannerRun.objects.create(kind="trace", inputs={"trace_queue": "vision-lab", "checkpoint_min": 30,
                                                          "preemption": True, "pools": {}, "queues": {}},
                                    trace_csv=TRACE)
    run_planner.apply_async(args=[run.pk], queue=celery_worker_queue)
    deadline = time.monotonic() + 90
    while (status := client.get(f"/console/planner/runs/{run.pk}/?partial=status").json())["state"] not in (
            "done", "failed"):
        assert time.monotonic() < deadline, status
        time.sleep(0.2)
    assert status["state"] == "done" and status["progress"] == 1.0
    run.refresh_from_db()
    assert run.results["actual"]["queues"]["vision-lab"]["jobs"] == 3

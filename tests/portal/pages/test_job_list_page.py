"""The tenant jobs list: its columns (state, submitter, GPUs and sharing, queue, age or duration, cost so
far or final, the ledger's sum), filters, search, sorting and pages on the server, scoped to one of the
caller's workspaces; and cancelling several jobs at once after a confirmation page."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from tests_job_specs import job_spec

from billing.ledger.jobs import finalize_job_cost
from billing.ledger.posting import post_ledger
from billing.models import ChargeLine
from billing.services import submit_quoted_job
from portal.models import Role
from scheduling.models import Job, JobState, Node, Replica
from tests.factories import MembershipFactory, UserFactory

FRACTION = """name: {name}
roles:
  - name: main
    image: busybox
    resources: {{gpu: 0.5, gpuMemory: 10Gi}}
    nodePool: a100-spot
"""


def submit(tenants, name, *, user=None, workspace=None, spec=None, **kwargs):
    return submit_quoted_job(user=user or tenants.alice, workspace=workspace or tenants.vision,
                             spec=spec or job_spec(name, **kwargs))


def bobs_job(tenants, name="bob-secret-run"):
    return submit(tenants, name, user=tenants.bob, workspace=tenants.nlp, queue="nlp-group")


def place(job, start, end=None, *, node="h100-01", gpus=(0,), state=None):
    """A placement of the job's replica main-0 (running while `end` is None)."""
    state = state or (JobState.RUNNING if end is None else JobState.SUCCEEDED)
    Job.objects.filter(pk=job.pk).update(state=state if end is None else job.state, started=start)
    return Replica.objects.create(job=job, role="main", index=0, state=state, node=Node.objects.get(name=node),
                                  gpu_indices=list(gpus), slice={"kind": "whole", "gpu_milli": 1000}, started=start,
                                  ended=end)


def listed(response) -> list[int]:
    assert response.status_code == 200, response.content.decode()[:3000]
    return [int(pk) for pk in re.findall(r'<tr data-job="(\d+)"', response.content.decode())]


def row_of(response, job) -> str:
    html = response.content.decode()
    match = re.search(rf'<tr data-job="{job.pk}">(.*?)</tr>', html, re.S)
    assert match, f"job {job.pk} not listed"
    return match.group(1)


def cell(row: str, field: str) -> str:
    match = re.search(rf'data-field="{field}"[^>]*>(.*?)</(td|span|div)>', row, re.S)
    assert match, f"no {field} in {row}"
    return re.sub(r"<[^>]+>", "", match.group(1)).strip()


@pytest.fixture
def viewer(cluster):
    user = UserFactory(username="dave", password="dave-pass-123")
    MembershipFactory(user=user, workspace=cluster.vision, role=Role.VIEWER)
    return user


# --------------------------------------------------------------------------- columns


def test_the_columns_say_state_submitter_gpus_queue_age_and_cost(client, cluster, clock):
    two = submit(cluster, "two-gpus", user=cluster.carol, gpus=2)
    half = submit(cluster, "half-a100", spec=FRACTION.format(name="half-a100"))
    clock.advance(90 * 60)
    client.force_login(cluster.alice)
    response = client.get("/jobs/")
    assert listed(response) == [half.pk, two.pk]  # newest first
    row = row_of(response, two)
    assert cell(row, "state") == "Pending"
    assert cell(row, "submitter") == "carol"
    assert cell(row, "gpus").startswith("2 GPUs · exclusive")
    assert cell(row, "queue") == "vision-lab"
    assert cell(row, "age") == "waiting 1 h 30 min"
    assert cell(row, "cost") == "–"  # nothing charged yet
    assert cell(row_of(response, half), "gpus").startswith("0.5 GPU · fraction")


def test_age_becomes_running_time_then_duration(client, cluster, clock):
    job = submit(cluster, "timed")
    start = clock.now
    place(job, start)
    clock.advance(2 * 3600 + 5 * 60)
    client.force_login(cluster.alice)
    assert cell(row_of(client.get("/jobs/"), job), "age") == "running 2 h 05 min"
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, finished=start + timedelta(days=1, hours=3))
    clock.advance(3 * 86400)
    assert cell(row_of(client.get("/jobs/"), job), "age") == "ran 1 d 3 h"


def test_cost_so_far_and_final_are_the_ledgers_sums(client, cluster, clock):
    running = submit(cluster, "running")
    ended = submit(cluster, "ended")
    place(running, clock.now - timedelta(hours=3))
    place(ended, clock.now - timedelta(hours=5), clock.now - timedelta(hours=2), node="h100-02")
    post_ledger(now=clock.now)
    Job.objects.filter(pk=ended.pk).update(state=JobState.SUCCEEDED, finished=clock.now - timedelta(hours=2))
    finalize_job_cost(ended.pk)
    so_far = sum(ChargeLine.objects.filter(job=running).values_list("cost", flat=True))
    final = sum(ChargeLine.objects.filter(job=ended).values_list("cost", flat=True))
    assert so_far > 0 and final > 0
    client.force_login(cluster.alice)
    response = client.get("/jobs/")
    row = row_of(response, running)
    assert Decimal(re.search(r'data-cost="([^"]+)"', row).group(1)) == so_far
    assert cell(row, "cost") == f"${so_far:.2f} so far"
    row = row_of(response, ended)
    assert Decimal(re.search(r'data-cost="([^"]+)"', row).group(1)) == final
    assert cell(row, "cost") == f"${final:.2f} final"


def test_a_finished_jobs_row_is_built_once_and_follows_the_reader(cluster, clock, monkeypatch):
    """A finished job's row is kept per process and reader: the same row again, but never another reader's
    language or zone, and a running job's row is built each time (its running time goes on)."""
    from django.utils import timezone, translation

    from portal.job_lists import job_rows
    from portal.templatetags import job_rows as tag

    ended, running = submit(cluster, "ended-kept"), submit(cluster, "running-kept")
    place(ended, clock.now - timedelta(hours=5), clock.now - timedelta(hours=2), node="h100-02")
    place(running, clock.now - timedelta(hours=1))
    Job.objects.filter(pk=ended.pk).update(state=JobState.SUCCEEDED, finished=clock.now - timedelta(hours=2))
    rows = lambda: job_rows(Job.objects.filter(pk__in=[ended.pk, running.pk]).order_by("pk"), now=clock.now)  # noqa: E731
    built = []
    real_row = tag._row

    def counted(r, *args):
        built.append(r.job.pk)
        return real_row(r, *args)

    monkeypatch.setattr(tag, "_row", counted)  # counts the real builds
    english = tag.job_table_rows(rows())
    assert tag.job_table_rows(rows()) == english
    assert built == [ended.pk, running.pk, running.pk]  # the finished one built once
    with translation.override("zh-hans"):
        chinese = tag.job_table_rows(rows())
    with timezone.override("Asia/Tokyo"):
        tokyo = tag.job_table_rows(rows())
    assert ">Succeeded<" in english and ">成功<" in chinese
    assert tokyo != english  # submitted at, in the reader's zone
    Job.objects.filter(pk=ended.pk).update(name="renamed")  # a changed value is another key
    assert "renamed" in tag.job_table_rows(rows())


def test_a_page_costs_the_same_queries_whatever_its_number_of_jobs(client, cluster, clock):
    client.force_login(cluster.alice)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/jobs/").status_code == 200
        return len(captured)

    first = submit(cluster, "first")
    place(first, clock.now - timedelta(hours=2))
    post_ledger(now=clock.now)
    few = queries()
    for n in range(8):
        job = submit(cluster, f"more-{n}")
        place(job, clock.now - timedelta(hours=1), node=f"h100-0{1 + n % 2}", gpus=(1 + n,))
    post_ledger(now=clock.now)
    assert queries() == few


# --------------------------------------------------------------------------- filters, search, sort, pages


@pytest.fixture
def several(cluster, clock):
    """alice's pending training job (3 h old), carol's running 2-GPU job (2 h old) and a fraction job
    (now); bob's job in nlp-group."""
    old = submit(cluster, "old-train")
    clock.advance(3600)
    carols = submit(cluster, "carol-sweep", user=cluster.carol, gpus=2)
    place(carols, clock.now)
    clock.advance(2 * 3600)
    frac = submit(cluster, "half-notebook", spec=FRACTION.format(name="half-notebook"))
    bob = bobs_job(cluster)
    return {"old": old, "carol": carols, "frac": frac, "bob": bob}


@pytest.mark.parametrize(("params", "expected"), [
    ({"state": "Running"}, ["carol"]),
    ({"state": "Pending"}, ["frac", "old"]),
    ({"submitter": "carol"}, ["carol"]),
    ({"sharing": "fraction"}, ["frac"]),
    ({"pool": "a100-spot"}, ["frac"]),
    ({"queue": "vision-lab"}, ["frac", "carol", "old"]),
    ({"q": "NOTEBOOK"}, ["frac"]),
    ({"q": "carol"}, ["carol"]),  # the submitter's name
    ({"min_age": "2h"}, ["carol", "old"]),
    ({"max_age": "150m"}, ["frac", "carol"]),
    ({"min_age": "2h", "max_age": "4h"}, ["carol", "old"]),
    ({"sort": "name"}, ["carol", "frac", "old"]),
    ({"sort": "-id"}, ["frac", "carol", "old"]),
], ids=lambda v: str(v))
def test_filters_and_search(client, cluster, several, params, expected):
    client.force_login(cluster.alice)
    assert listed(client.get("/jobs/", params)) == [several[name].pk for name in expected]


def test_search_by_number(client, cluster, several):
    client.force_login(cluster.alice)
    assert listed(client.get("/jobs/", {"q": f"#{several['old'].pk}"})) == [several["old"].pk]
    assert listed(client.get("/jobs/", {"q": f"#{several['bob'].pk}"})) == []


@pytest.mark.parametrize(("params", "field", "message"), [
    ({"state": "Sleeping"}, "state", "Sleeping is not a job state"),
    ({"submitter": "bob"}, "submitter", "bob has submitted no job here"),
    ({"queue": "nlp-group"}, "queue", "nlp-group is not a leaf queue"),
    ({"min_age": "soon"}, "min_age", "write a number and a unit"),
    ({"min_age": "4h", "max_age": "1h"}, "max_age", "no job is both"),
    ({"page_size": "501"}, "page_size", "less than or equal to 500"),
    ({"page": "0"}, "page", "greater than or equal to 1"),
    ({"sort": "password"}, "sort", "not a column to sort by"),
    ({"q": "x" * 201}, "q", "at most 200 characters"),
])
def test_a_bad_filter_is_a_400_beside_its_field(client, cluster, several, params, field, message):
    client.force_login(cluster.alice)
    response = client.get("/jobs/", params)
    assert response.status_code == 400
    html = response.content.decode()
    errors = re.search(rf'data-field="{field}">(.*?)</ul>', html, re.S)
    assert errors and message in errors.group(1), html[:3000]
    assert 'id="jobs-refused"' in html and "data-job=" not in html
    assert "bob-secret-run" not in html


def test_pages_on_the_server(client, cluster, clock):
    jobs = []
    for n in range(5):
        jobs.append(submit(cluster, f"job-{n}"))
        clock.advance(60)
    newest_first = [j.pk for j in reversed(jobs)]
    client.force_login(cluster.alice)
    first = client.get("/jobs/", {"page_size": "2", "state": "Pending"})
    assert listed(first) == newest_first[:2]
    html = first.content.decode()
    assert "5 jobs · rows 1–2" in html and "page 1 of 3" in html
    assert 'href="?page_size=2&amp;state=Pending&amp;page=2" rel="next"' in html  # the filters stay
    assert listed(client.get("/jobs/", {"page_size": "2", "page": "3"})) == newest_first[4:]
    assert listed(client.get("/jobs/", {"page_size": "2", "page": "99"})) == newest_first[4:]  # the last page


def test_the_live_partial_is_the_table_alone(client, cluster, several):
    client.force_login(cluster.alice)
    response = client.get("/jobs/", {"partial": "1", "state": "Running"})
    html = response.content.decode()
    assert listed(response) == [several["carol"].pk]
    assert "<html" not in html and 'id="jobs-table"' in html


# --------------------------------------------------------------------------- tenants


def test_another_tenants_jobs_are_never_listed(client, cluster, several):
    client.force_login(cluster.alice)
    for params in ({}, {"q": "bob"}, {"q": "secret"}, {"queue": "vision-lab"}, {"state": "Pending"}):
        response = client.get("/jobs/", params)
        assert response.status_code == 200
        assert several["bob"].pk not in listed(response) and "bob-secret-run" not in response.content.decode()


def test_another_workspace_slug_is_a_404(client, cluster, several):
    client.force_login(cluster.alice)
    for slug in ("nlp-group", "no-such-workspace"):
        response = client.get("/jobs/", {"workspace": slug})
        assert response.status_code == 404
        assert "bob-secret-run" not in response.content.decode()
    client.force_login(cluster.bob)
    assert listed(client.get("/jobs/", {"workspace": "nlp-group"})) == [several["bob"].pk]
    assert client.get("/jobs/", {"workspace": "vision-lab"}).status_code == 404


def test_finance_in_two_workspaces_chooses_one(client, cluster, several):
    client.force_login(cluster.finance)
    nlp = client.get("/jobs/", {"workspace": "nlp-group"})
    assert listed(nlp) == [several["bob"].pk]
    html = nlp.content.decode()
    assert '<select name="workspace"' in html and '<option value="nlp-group" selected>' in html


# --------------------------------------------------------------------------- cancel several


def test_who_sees_the_cancel_controls(client, cluster, several, viewer):
    for user, shown in ((cluster.alice, True), (cluster.carol, True), (cluster.finance, False), (viewer, False)):
        client.force_login(user)
        html = client.get("/jobs/").content.decode()
        assert ('id="bulk-cancel"' in html) is shown, user.username
        assert ('class="select-job"' in html) is shown, user.username
    client.force_login(cluster.alice)
    # jobs that ended cannot be selected
    Job.objects.filter(pk=several["old"].pk).update(state=JobState.FAILED)
    html = client.get("/jobs/").content.decode()
    assert f'value="{several["old"].pk}" form="bulk-cancel"' not in html
    assert f'value="{several["frac"].pk}" form="bulk-cancel"' in html


def test_the_confirmation_page_lists_them_and_changes_nothing(client, cluster, several):
    Job.objects.filter(pk=several["old"].pk).update(state=JobState.SUCCEEDED)
    ids = [several["frac"].pk, several["carol"].pk, several["old"].pk, several["bob"].pk, 999999]
    client.force_login(cluster.alice)
    response = client.get("/jobs/cancel/", {"job": ids, "next": "/jobs/?state=Pending"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "2 jobs will end as <strong>Cancelled</strong>" in html
    for pk in ids:
        assert f'<tr data-job="{pk}"' in html
    assert "not cancelled: already Succeeded" in html
    assert f"not cancelled: no job #{several['bob'].pk} in vision-lab" in html
    assert "bob-secret-run" not in html
    assert 'id="confirm-bulk-cancel"' in html and 'name="next" value="/jobs/?state=Pending"' in html
    assert Job.objects.filter(state=JobState.CANCELLED).count() == 0


def test_cancelling_several_skips_those_that_cannot_be(client, cluster, several):
    Job.objects.filter(pk=several["old"].pk).update(state=JobState.SUCCEEDED)
    ids = [several["frac"].pk, several["carol"].pk, several["old"].pk, several["bob"].pk, 999999]
    client.force_login(cluster.carol)  # a member may cancel alice's jobs in their workspace
    response = client.post("/jobs/cancel/", {"job": ids, "confirm": "1", "next": "/jobs/?state=Running"})
    assert response.status_code == 302 and response["Location"] == "/jobs/?state=Running"
    states = dict(Job.objects.values_list("pk", "state"))
    assert states[several["frac"].pk] == states[several["carol"].pk] == JobState.CANCELLED
    assert states[several["old"].pk] == JobState.SUCCEEDED
    assert states[several["bob"].pk] == JobState.PENDING
    page = client.get(response["Location"]).content.decode()
    assert (f"Cancelled 2 jobs: half-notebook #{several['frac'].pk}, carol-sweep #{several['carol'].pk}."
            in page)
    assert (f"Not cancelled: #{several['old'].pk} (already Succeeded); #{several['bob'].pk} (no job "
            f"#{several['bob'].pk} in vision-lab); #999999 (no job #999999 in vision-lab).") in page
    assert "bob-secret-run" not in page
    events = Job.objects.get(pk=several["frac"].pk).events.filter(kind="cancelled")
    assert events.get().reason.startswith("cancelled by carol")


def test_a_job_that_ends_between_the_pages_is_reported_not_cancelled(client, cluster, several):
    client.force_login(cluster.alice)
    ids = [several["frac"].pk, several["old"].pk]
    assert "2 jobs will end" in client.get("/jobs/cancel/", {"job": ids}).content.decode()
    Job.objects.filter(pk=several["old"].pk).update(state=JobState.FAILED)
    page = client.post("/jobs/cancel/", {"job": ids, "confirm": "1"}, follow=True).content.decode()
    assert "Cancelled 1 job: half-notebook" in page and "(already Failed)" in page


def test_a_post_without_confirm_only_asks(client, cluster, several):
    client.force_login(cluster.alice)
    response = client.post("/jobs/cancel/", {"job": [several["frac"].pk]})
    assert response.status_code == 200 and 'id="confirm-bulk-cancel"' in response.content.decode()
    assert Job.objects.get(pk=several["frac"].pk).state == JobState.PENDING


@pytest.mark.parametrize("who", ["viewer", "finance"])
def test_viewers_and_finance_are_refused(client, cluster, several, viewer, who):
    client.force_login(viewer if who == "viewer" else cluster.finance)
    ids = [several["frac"].pk, several["old"].pk]
    assert client.get("/jobs/cancel/", {"job": ids}).status_code == 403
    response = client.post("/jobs/cancel/", {"job": ids, "confirm": "1", "workspace": "vision-lab"})
    assert response.status_code == 403
    assert not Job.objects.filter(state=JobState.CANCELLED).exists()


def test_an_outsider_cancels_nothing_of_another_workspace(client, cluster, several):
    ids = [several["frac"].pk, several["old"].pk]
    client.force_login(cluster.bob)
    assert client.post("/jobs/cancel/", {"job": ids, "confirm": "1", "workspace": "vision-lab"}).status_code == 404
    response = client.post("/jobs/cancel/", {"job": ids, "confirm": "1"}, follow=True)  # his own workspace
    html = response.content.decode()
    assert "Not cancelled" in html and "no job" in html and "in nlp-group" in html
    assert "half-notebook" not in html and "old-train" not in html
    assert not Job.objects.filter(state=JobState.CANCELLED).exists()


@pytest.mark.parametrize(("jobs", "message"), [
    ([], "select at least one job to cancel"),
    (["abc"], "abc is not a job number"),
    (["1" * 19], "is not a job number"),
    ([str(n) for n in range(1, 502)], "at most 500 jobs at once"),
])
def test_a_bad_selection_is_a_400(client, cluster, several, jobs, message):
    client.force_login(cluster.alice)
    response = client.post("/jobs/cancel/", {"job": jobs, "confirm": "1"})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Job.objects.filter(state=JobState.CANCELLED).exists()


def test_back_only_to_a_jobs_page_here(client, cluster, several):
    client.force_login(cluster.alice)
    for target in ("https://evil.example/jobs/", "//evil.example/jobs/", "/console/jobs/"):
        response = client.post("/jobs/cancel/", {"job": [several["frac"].pk], "confirm": "1", "next": target})
        assert response["Location"] == "/jobs/?workspace=vision-lab"


def test_an_empty_list_says_whether_a_filter_hid_the_jobs(client, cluster):
    client.force_login(cluster.alice)
    assert "No jobs yet." in client.get("/jobs/", {"workspace": "vision-lab"}).content.decode()
    submit(cluster, "only-one")
    html = client.get("/jobs/", {"state": "Running"}).content.decode()
    assert "No job matches." in html and "0 jobs" in html
    assert 'id="jobs-refused"' not in html


def test_the_operators_list_with_no_match_is_not_refused(client, cluster):
    client.force_login(cluster.admin)
    html = client.get("/console/jobs/", {"state": "Running"}).content.decode()
    assert "No job matches." in html and 'id="jobs-refused"' not in html


def test_the_submitter_filter_offers_the_people_who_submitted_not_every_member(client, cluster, several):
    client.force_login(cluster.alice)
    html = client.get("/jobs/").content.decode()
    select = re.search(r'<select[^>]*name="submitter".*?</select>', html, re.S).group(0)
    offered = re.findall(r'<option value="([^"]+)"', select)
    assert offered == ["alice", "carol"]  # finance is a member who submitted nothing; bob is another tenant's
    response = client.get("/jobs/", {"submitter": "finance"})
    assert response.status_code == 400 and "finance has submitted no job here" in response.content.decode()

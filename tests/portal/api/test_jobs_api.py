"""Jobs API for two tenants: submit (YAML, JSON object), list, detail, events, cancel, errors."""


from scheduling import clock
from scheduling.models import Job, JobEvent
from scheduling.spec.examples import CLEAN_YAML, SEED_YAML


def submit(api, workspace, spec):
    return api.post("/api/v1/jobs/", {"workspace": workspace, "spec": spec}, format="json")


def test_alice_submits_seed_and_clean_yaml_and_sees_them_pending(cluster, api_as):
    alice = api_as(cluster.alice)
    seed = submit(alice, "vision-lab", SEED_YAML)
    assert seed.status_code == 201, seed.json()
    body = seed.json()
    assert body["name"] == "training1" and body["state"] == "Pending" and body["workspace"] == "vision-lab"
    assert body["queue"] == "vision-lab" and body["type"] == "mpi" and body["replicas"] == []
    assert body["pending_reason"]
    clean = submit(alice, "vision-lab", CLEAN_YAML)
    assert clean.status_code == 201, clean.json()
    listed = alice.get("/api/v1/jobs/", {"workspace": "vision-lab", "state": "Pending"}).json()
    assert sorted(j["name"] for j in listed["results"]) == ["bert-finetune", "training1"]
    events = alice.get(f"/api/v1/jobs/{body['id']}/events/").json()
    assert [e["kind"] for e in events] == ["submitted"]


def test_spec_as_json_object(cluster, api_as):
    spec = {"name": "tiny", "roles": [{"name": "main", "image": "busybox", "resources": {"gpu": 1}}]}
    response = submit(api_as(cluster.alice), "vision-lab", spec)
    assert response.status_code == 201, response.json()
    assert Job.objects.get().spec_text.startswith("name: tiny")


def test_bob_sees_none_of_alices_jobs(cluster, api_as):
    job_id = submit(api_as(cluster.alice), "vision-lab", CLEAN_YAML).json()["id"]
    bob = api_as(cluster.bob)
    assert bob.get("/api/v1/jobs/").json()["results"] == []
    assert bob.get(f"/api/v1/jobs/{job_id}/").status_code == 404
    assert bob.get(f"/api/v1/jobs/{job_id}/events/").status_code == 404
    assert bob.post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 404
    assert bob.get("/api/v1/jobs/", {"workspace": "vision-lab"}).status_code == 404
    assert submit(bob, "vision-lab", CLEAN_YAML).status_code == 404
    assert Job.objects.get(pk=job_id).state == "Pending"


def test_errors_name_line_column_and_field_and_store_nothing(cluster, api_as):
    bad = SEED_YAML.replace("MaxReplicas: 50", "MaxReplicas: 5")
    response = submit(api_as(cluster.alice), "vision-lab", bad)
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert any(e["field"] == "MaxReplicas" and "less than MinReplicas" in e["message"] and e["line"] == 8
               for e in errors), errors
    assert not Job.objects.exists() and not JobEvent.objects.exists()


def test_queue_the_workspace_may_not_use_is_refused(cluster, api_as):
    spec = CLEAN_YAML.replace("queue: vision-lab", "queue: nlp-group")
    response = submit(api_as(cluster.alice), "vision-lab", spec)
    assert response.status_code == 422  # a spec that is well formed but could never run here
    assert any(e["field"] == "queue" for e in response.json()["errors"])


def test_community_queue_takes_preemptible_work_only(cluster, api_as):
    spec = CLEAN_YAML.replace("queue: vision-lab", "queue: community").replace("preemptible: true", "preemptible: false")
    response = submit(api_as(cluster.alice), "vision-lab", spec)
    assert response.status_code == 400
    assert "preemptible work only" in response.json()["errors"][0]["message"]
    ok = submit(api_as(cluster.alice), "vision-lab", CLEAN_YAML.replace("queue: vision-lab", "queue: community"))
    assert ok.status_code == 201 and ok.json()["queue"] == "community"


def test_missing_fields_and_bad_types(cluster, api_as):
    alice = api_as(cluster.alice)
    response = alice.post("/api/v1/jobs/", {"spec": CLEAN_YAML}, format="json")
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "workspace"
    response = submit(alice, "vision-lab", 42)
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "spec"
    assert alice.get("/api/v1/jobs/", {"state": "Sleeping"}).status_code == 400


def test_cancel(cluster, api_as):
    alice = api_as(cluster.alice)
    job_id = submit(alice, "vision-lab", CLEAN_YAML).json()["id"]
    response = alice.post(f"/api/v1/jobs/{job_id}/cancel/")
    assert response.status_code == 200 and response.json()["state"] == "Cancelled"
    assert alice.post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 409
    kinds = [e["kind"] for e in alice.get(f"/api/v1/jobs/{job_id}/events/").json()]
    assert kinds == ["submitted", "cancelled"]


def test_finance_role_reads_but_may_not_submit(cluster, api_as):
    finance = api_as(cluster.finance)
    response = submit(finance, "vision-lab", CLEAN_YAML)
    assert response.status_code == 403
    assert not Job.objects.exists()


def test_a_pending_job_names_its_currency_before_it_has_a_cost(cluster, api_as):
    alice = api_as(cluster.alice)
    job_id = submit(alice, "vision-lab", CLEAN_YAML).json()["id"]
    job = Job.objects.get(pk=job_id)
    assert job.currency == "" and job.quote["currency"]
    body = alice.get(f"/api/v1/jobs/{job_id}/").json()
    assert body["state"] == "Pending" and body["currency"] == job.quote["currency"]
    listed = alice.get("/api/v1/jobs/", {"workspace": "vision-lab"}).json()["results"]
    assert [j["currency"] for j in listed] == [job.quote["currency"]]


def test_the_job_list_gives_a_running_jobs_cost_so_far_from_one_ledger_query(cluster, api_as,
                                                                            django_assert_max_num_queries):
    from tests.billing.reports.tests_reports_helpers import charge

    alice = api_as(cluster.alice)
    ids = [submit(alice, "vision-lab", CLEAN_YAML.replace("bert-finetune", f"run-{n}")).json()["id"]
           for n in range(3)]
    running = Job.objects.filter(pk__in=ids[:2])
    running.update(state="Running", started=clock.now())
    for job in running:
        charge(job, "1.25")
        charge(job, "0.50", when=clock.now().replace(minute=0, second=0, microsecond=0))
    listed = {j["id"]: j for j in alice.get("/api/v1/jobs/", {"workspace": "vision-lab"}).json()["results"]}
    assert [listed[i]["cost_so_far"] for i in ids] == ["1.75", "1.75", None]
    with django_assert_max_num_queries(12):
        alice.get("/api/v1/jobs/", {"workspace": "vision-lab"})


def test_the_job_list_rows_are_the_serializers_json(cluster, api_as):
    """The list's rows are built without DRF's serializer (portal.api.job_rows): the same JSON as
    JobListOutput, key for key, for pending, running (replicas on a node, a MIG slice) and ended jobs, in
    another time zone and language too."""
    from decimal import Decimal

    from django.utils import timezone, translation
    from rest_framework.renderers import JSONRenderer

    from billing.api import job_totals
    from portal.api.job_rows import job_row
    from portal.api.jobs import JobListOutput
    from scheduling.models import Node, Replica
    from tests.billing.reports.tests_reports_helpers import charge

    alice = api_as(cluster.alice)
    ids = [submit(alice, "vision-lab", CLEAN_YAML.replace("bert-finetune", f"run-{n}")).json()["id"]
           for n in range(4)]
    now = clock.now()
    Job.objects.filter(pk=ids[0]).update(state="Running", started=now)
    Replica.objects.create(job_id=ids[0], role="main", index=0, state="Running", node=Node.objects.first(),
                           gpu_indices=[0, 1], started=now)
    Replica.objects.create(job_id=ids[0], role="worker", index=1, state="Preempted", slice={"mig": "1g.10gb"},
                           started=now, ended=now, lost_gpu_hours=Decimal("0.12345"))
    charge(Job.objects.get(pk=ids[0]), "1.25")
    Job.objects.filter(pk=ids[1]).update(state="Succeeded", started=now, finished=now, final_cost=Decimal("3.456"),
                                         currency="EUR")
    Job.objects.filter(pk=ids[2]).update(state="Running", started=now)  # nothing charged yet
    listed = alice.get("/api/v1/jobs/", {"workspace": "vision-lab"}).json()["results"]
    assert sorted(j["id"] for j in listed) == sorted(ids)
    assert [j["cost_so_far"] for j in sorted(listed, key=lambda j: j["id"])] == ["1.25", None, "0.00", None]
    jobs = list(Job.objects.filter(pk__in=ids).select_related("workspace", "queue").prefetch_related("replicas__node"))
    totals = job_totals(j.pk for j in jobs if j.started and not j.is_final)
    for zone, language in (("UTC", "en"), ("Asia/Shanghai", "zh-hans")):
        with timezone.override(zone), translation.override(language):
            expected = JSONRenderer().render(JobListOutput(jobs, many=True, context={"running_totals": totals}).data)
            assert JSONRenderer().render([job_row(job, totals) for job in jobs]) == expected
    by_id = {j.pk: job_row(j, totals) for j in jobs}
    assert by_id[ids[0]]["replicas"][1]["lost_gpu_hours"] in ("0.1234", "0.1235")  # four places, as stored
    assert JSONRenderer().render(listed) == JSONRenderer().render([by_id[j["id"]] for j in listed])


def test_the_api_says_which_jobs_take_ssh_by_their_kind(cluster, api_as):
    """`ssh` comes from the kind object (a service runs no SSH server), in the list and the detail, so that
    `gpuctl ssh-config` lists what the gateway reaches without a table of kinds of its own."""
    alice = api_as(cluster.alice)
    ids = [submit(alice, "vision-lab", CLEAN_YAML.replace("bert-finetune", f"run-{n}")).json()["id"] for n in range(3)]
    for job_id, kind in zip(ids, ("training", "notebook", "inference"), strict=True):
        Job.objects.filter(pk=job_id).update(kind=kind)
    listed = {j["id"]: j["ssh"] for j in alice.get("/api/v1/jobs/", {"workspace": "vision-lab"}).json()["results"]}
    assert [listed[i] for i in ids] == [True, True, False]
    assert [alice.get(f"/api/v1/jobs/{i}/").json()["ssh"] for i in ids] == [True, True, False]

"""A pool the console creates or keeps cannot break submission: an empty pool, an unpriced pool and a
pool whose offer cannot be built are left out of quotes with a reason, for every tenant."""

import logging

import pytest
from rest_framework.test import APIClient

NEW_POOL = {"name": "b200", "vendor": "nvidia", "gpu_model": "B200-180GB", "gpu_memory_mib": "184320",
            "placement": "binpack", "sharing": "standard", "timeslice_replicas": "4", "mig_layout": ""}
ANY_GPU = """\
name: q
roles:
  - name: main
    image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
    resources: {gpu: 1, cpu: 4, memory: 16Gi}
"""
B200 = ANY_GPU.replace("    resources:", "    nodePool: b200\n    resources:")


def api_for(user):
    api = APIClient()
    api.force_authenticate(user)
    return api


@pytest.fixture
def empty_b200(admin_client, cluster, clock):
    """The b200 pool as the console creates it: no nodes yet, and no price for its GPUs."""
    done = admin_client.post("/console/pools/", NEW_POOL, follow=True)
    assert done.status_code == 200
    return done


@pytest.mark.django_db
def test_an_empty_pool_leaves_every_tenants_quotes_jobs_and_submit_page_working(empty_b200, cluster):
    from django.test import Client

    for user, workspace in ((cluster.alice, "vision-lab"), (cluster.bob, "nlp-group")):
        api = api_for(user)
        quoted = api.post("/api/v1/quotes/", {"workspace": workspace, "spec": ANY_GPU}, format="json")
        assert quoted.status_code == 200, quoted.content
        body = quoted.json()
        assert "b200" not in {o["pool"] for o in body["options"]}
        codes = {c["params"]["pool"]: c["code"] for c in body["unavailable_codes"]}
        assert codes["b200"] == "pool_has_no_nodes"
        assert any(line.startswith("b200: ") and "no nodes" in line for line in body["unavailable"])
        job = api.post("/api/v1/jobs/", {"workspace": workspace, "spec": ANY_GPU}, format="json")
        assert job.status_code == 201, job.content
        client = Client()
        client.force_login(user)
        page = client.post("/submit/", {"workspace": workspace, "spec": ANY_GPU, "duration_hours": "2"})
        assert page.status_code == 200 and 'id="quote-table"' in page.content.decode()


@pytest.mark.django_db
def test_a_job_pinned_to_the_empty_pool_is_refused_with_4xx_naming_why(empty_b200, cluster):
    api = api_for(cluster.alice)
    quoted = api.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": B200}, format="json")
    assert quoted.status_code == 422, quoted.content
    assert "b200: the pool has no nodes" in quoted.json()["detail"]
    job = api.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": B200}, format="json")
    assert job.status_code == 422, job.content


@pytest.mark.django_db
def test_the_demo_load_task_submits_with_an_empty_pool_present(empty_b200, cluster):
    from portal.tasks import demo_load
    from scheduling.models import Job

    ids = [demo_load.apply(kwargs={}).get() for _ in range(3)]
    assert all(ids) and Job.objects.filter(pk__in=ids).count() == 3


@pytest.mark.django_db
def test_a_pool_whose_offer_cannot_be_built_is_left_out_and_logged_once(cluster, clock, caplog, monkeypatch):
    from billing import faults
    from tests.factories import NodeFactory, NodePoolFactory

    monkeypatch.setattr(faults, "LOGGED", set())
    broken = NodePoolFactory(name="broken", gpu_memory_mib=0)  # a row no form would save
    NodeFactory(pool=broken, name="broken-01", gpus=2)
    with caplog.at_level(logging.ERROR):
        for user, workspace in ((cluster.alice, "vision-lab"), (cluster.bob, "nlp-group"), (cluster.alice, "vision-lab")):
            quoted = api_for(user).post("/api/v1/quotes/", {"workspace": workspace, "spec": ANY_GPU}, format="json")
            assert quoted.status_code == 200, quoted.content
            assert "broken" not in {o["pool"] for o in quoted.json()["options"]}
            assert {o["pool"] for o in quoted.json()["options"]} >= {"h100", "a100-spot"}
    logged = [r for r in caplog.records if r.name == "billing.selectors"]
    assert len(logged) == 1 and "broken" in logged[0].getMessage() and logged[0].exc_info is not None
    # the scheduler's snapshot refuses the row too: the quotes keep their own starts, said once
    assert len([r for r in caplog.records if r.name == "billing.starts"]) == 1


@pytest.mark.django_db
def test_the_console_warns_on_saving_a_pool_without_nodes_or_price_and_shows_why(admin_client, empty_b200, cluster):
    page = empty_b200.content.decode()
    assert "Pool b200 is not offered in quotes: the pool has no nodes yet" in page
    assert "Pool b200 is not offered in quotes: no rate for nvidia B200-180GB in the USD price table" in page
    row = page.split('data-pool="b200"')[1].split("</tr>")[0]
    assert 'data-reason="pool_has_no_nodes"' in row and 'data-reason="pool_not_priced"' in row
    h100 = page.split('data-pool="h100"')[1].split("</tr>")[0]
    assert "data-reason" not in h100
    detail = admin_client.get("/console/pools/b200/").content.decode()
    assert 'id="pool-problems"' in detail and 'data-reason="pool_not_priced"' in detail
    saved = admin_client.post("/console/pools/h100/", {"placement": "spread", "sharing": "standard",
                                                      "timeslice_replicas": "4", "mig_layout": ""}, follow=True)
    assert "not offered in quotes" not in saved.content.decode()


@pytest.mark.django_db
def test_an_unpriced_pool_with_nodes_is_left_out_of_quotes_as_not_priced(admin_client, empty_b200, cluster):
    from scheduling.models import NodePool
    from tests.factories import NodeFactory

    NodeFactory(pool=NodePool.objects.get(name="b200"), name="b200-01", gpus=8)
    page = admin_client.get("/console/pools/").content.decode().split('data-pool="b200"')[1].split("</tr>")[0]
    assert 'data-reason="pool_has_no_nodes"' not in page and 'data-reason="pool_not_priced"' in page
    for user, workspace in ((cluster.alice, "vision-lab"), (cluster.bob, "nlp-group")):
        body = api_for(user).post("/api/v1/quotes/", {"workspace": workspace, "spec": ANY_GPU}, format="json").json()
        assert {c["params"]["pool"]: c["code"] for c in body["unavailable_codes"]}["b200"] == "not_priced"


@pytest.mark.django_db
def test_the_console_deletes_an_empty_pool_after_confirmation_and_refuses_one_with_nodes(
        admin_client, empty_b200, cluster):
    from django.test import Client

    from portal.console.models import AuditEntry
    from scheduling.models import NodePool

    tenant = Client()
    tenant.force_login(cluster.alice)
    assert tenant.post("/console/pools/b200/delete/").status_code == 403
    confirm = admin_client.get("/console/pools/b200/delete/").content.decode()
    assert 'id="confirm-delete"' in confirm and NodePool.objects.filter(name="b200").exists()
    done = admin_client.post("/console/pools/b200/delete/", follow=True)
    assert "Pool b200 deleted." in done.content.decode() and not NodePool.objects.filter(name="b200").exists()
    assert AuditEntry.objects.get(action="delete", target_type="scheduling.nodepool").changes["name"] == ["b200", None]
    refused_page = admin_client.get("/console/pools/h100/delete/").content.decode()
    assert 'id="delete-refused"' in refused_page and "2 nodes belong to it" in refused_page
    refused = admin_client.post("/console/pools/h100/delete/")
    assert refused.status_code == 400 and NodePool.objects.filter(name="h100").exists()

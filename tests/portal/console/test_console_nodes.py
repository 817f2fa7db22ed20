"""Nodes from the console: add one to a pool (not ready until its agent reports), label it, issue its
agent token (shown once, kept hashed), remove it (refused while replicas run there); and
`manage.py issue_node_token`."""

import io

import pytest
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

NEW_NODE = {"name": "h100-09", "pool": "", "cpu_milli": "128000", "memory_mib": "1048576", "gpus": "4",
            "labels": "rack=r12, zone=eu-1"}


def new_node(**changes):
    from scheduling.models import NodePool

    return {**NEW_NODE, "pool": str(NodePool.objects.get(name="h100").pk), **changes}


def heartbeat(raw, node, gpus=4):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api.post("/api/v1/agent/heartbeat", {"node": node, "gpus": [
        {"index": i, "uuid": f"GPU-real-{node}-{i}", "memory_mib": 81920} for i in range(gpus)]}, format="json")


@pytest.mark.django_db
def test_a_node_added_from_the_console_gets_its_token_and_reports(admin_client, cluster, clock):
    from billing.models import NodeToken
    from portal.console.models import AuditEntry
    from scheduling.health import update_agent_silence
    from scheduling.models import Node

    page = admin_client.get("/console/nodes/").content.decode()
    assert 'id="new-node-form"' in page
    done = admin_client.post("/console/nodes/", new_node(), follow=True)
    assert "Node h100-09 added to h100" in done.content.decode()
    node = Node.objects.get(name="h100-09")
    assert node.labels == {"rack": "r12", "zone": "eu-1"} and node.gpus.count() == 4 and not node.is_ready
    assert AuditEntry.objects.get(action="create", target_type="scheduling.node").changes["gpus"] == [None, 4]

    issued = admin_client.post("/console/nodes/h100-09/token/")
    text = issued.content.decode()
    raw = text.split('<pre id="raw-token">')[1].split("</pre>")[0]
    assert raw.startswith("gpn_") and NodeToken.objects.filter(node=node, digest=NodeToken.digest_of(raw)).exists()
    assert not NodeToken.objects.filter(digest=raw).exists()  # only the hash is kept
    assert raw not in admin_client.get("/console/nodes/").content.decode()  # shown once
    assert heartbeat(raw, "h100-09").status_code == 200
    assert heartbeat(raw, "h100-01").status_code == 403  # its own node only
    assert sorted(node.gpus.values_list("uuid", flat=True)) == [f"GPU-real-h100-09-{i}" for i in range(4)]
    update_agent_silence()
    node.refresh_from_db()
    assert node.is_ready


@pytest.mark.django_db
def test_a_refused_node_says_why_beside_the_field_and_tenants_cannot_add(admin_client, cluster):
    from scheduling.models import Node

    bad = admin_client.post("/console/nodes/", new_node(name="H100 bad", gpus="99", labels="no-equals"))
    assert bad.status_code == 400
    text = bad.content.decode()
    for field in ("name", "gpus", "labels"):
        assert f'data-field="{field}"' in text.split(f'data-field-row="{field}"')[1].split("</div>")[0]
    assert admin_client.post("/console/nodes/", new_node(name="h100-01")).status_code == 400  # taken
    tenant = Client()
    tenant.force_login(cluster.bob)
    assert tenant.post("/console/nodes/", new_node()).status_code == 403
    assert tenant.post("/console/nodes/h100-01/token/").status_code == 403
    assert not Node.objects.filter(name="h100-09").exists()


@pytest.mark.django_db
def test_labels_are_edited_and_a_bad_one_changes_nothing(admin_client, cluster):
    from scheduling.models import Node

    admin_client.post("/console/nodes/h100-01/labels/", {"labels": "rack=r1\nssd=true"})
    assert Node.objects.get(name="h100-01").labels == {"rack": "r1", "ssd": "true"}
    page = admin_client.get("/console/nodes/").content.decode()
    assert 'data-label="rack"' in page.split('data-node="h100-01"')[1].split("</tr>")[0]
    done = admin_client.post("/console/nodes/h100-01/labels/", {"labels": "=oops"}, follow=True)
    assert "not saved" in done.content.decode()
    assert Node.objects.get(name="h100-01").labels == {"rack": "r1", "ssd": "true"}


@pytest.mark.django_db
def test_a_node_running_replicas_is_not_removed_until_drained_and_empty(admin_client, cluster, submit, backend,
                                                                        clock, run):
    from scheduling.models import ACTIVE_STATES, Node, Replica

    job = submit(cluster, "busy", gpus=1, pool="h100")
    run(backend, clock)
    replica = Replica.objects.filter(job=job, state__in=ACTIVE_STATES).first()
    assert replica is not None and replica.node is not None
    name = replica.node.name
    page = admin_client.get(f"/console/nodes/{name}/remove/").content.decode()
    assert 'id="remove-refused"' in page and "drain it first" in page
    assert admin_client.post(f"/console/nodes/{name}/remove/").status_code == 400
    assert Node.objects.filter(name=name).exists()
    # an idle node goes, with its GPUs and tokens
    admin_client.post("/console/nodes/", new_node(name="spare-01"))
    admin_client.post("/console/nodes/spare-01/token/")
    assert 'id="confirm-remove"' in admin_client.get("/console/nodes/spare-01/remove/").content.decode()
    done = admin_client.post("/console/nodes/spare-01/remove/", follow=True)
    assert "Node spare-01 removed." in done.content.decode() and not Node.objects.filter(name="spare-01").exists()


@pytest.mark.django_db
def test_issue_node_token_prints_a_token_once_and_rotate_revokes_the_others(cluster):
    from billing.models import NodeToken

    out = io.StringIO()
    call_command("issue_node_token", "h100-01", stdout=out)
    first = out.getvalue().strip()
    assert first.startswith("gpn_") and heartbeat(first, "h100-01", gpus=8).status_code == 200
    out, err = io.StringIO(), io.StringIO()
    call_command("issue_node_token", "h100-01", "--rotate", stdout=out, stderr=err)
    second = out.getvalue().strip()
    assert second != first and "revoked 1" in err.getvalue()
    assert heartbeat(first, "h100-01", gpus=8).status_code == 401
    assert heartbeat(second, "h100-01", gpus=8).status_code == 200
    assert NodeToken.objects.filter(node__name="h100-01", revoked__isnull=True).count() == 1
    with pytest.raises(Exception, match="no node named"):
        call_command("issue_node_token", "nope")

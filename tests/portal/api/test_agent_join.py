"""Join tokens: `manage.py create_join_token --pool P --ttl T` prints one (kept hashed); an agent posts it
with its node name to /api/v1/agent/join and receives that node's own token, for nodes of that pool only,
until it expires."""

import io

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient


def create_join_token(pool="h100", ttl="1h") -> str:
    out, err = io.StringIO(), io.StringIO()
    call_command("create_join_token", "--pool", pool, "--ttl", ttl, stdout=out, stderr=err)
    assert f"join token for pool {pool}" in err.getvalue()
    return out.getvalue().strip()


def join(token, node):
    return APIClient().post("/api/v1/agent/join", {"token": token, "node": node}, format="json")


def heartbeat(raw, node):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api.post("/api/v1/agent/heartbeat", {"node": node, "gpus": [
        {"index": 0, "uuid": f"GPU-{node}-0", "memory_mib": 81920}]}, format="json")


@pytest.mark.django_db
def test_an_agent_joins_a_new_node_and_reports_with_its_own_token_only(cluster, clock):
    from billing.models import JoinToken, NodeToken
    from scheduling.models import Node

    raw_join = create_join_token()
    assert raw_join.startswith("gpj_") and not JoinToken.objects.filter(digest=raw_join).exists()
    joined = join(raw_join, "gpu-node-7")
    assert joined.status_code == 201, joined.content
    body = joined.json()
    assert body["node"] == "gpu-node-7" and body["pool"] == "h100" and body["token"].startswith("gpn_")
    node = Node.objects.get(name="gpu-node-7")
    assert node.pool.name == "h100" and not node.is_ready  # until its agent reports
    assert NodeToken.objects.filter(node=node, digest=NodeToken.digest_of(body["token"])).exists()
    assert heartbeat(body["token"], "gpu-node-7").status_code == 200
    assert heartbeat(body["token"], "h100-01").status_code == 403
    assert heartbeat(raw_join, "gpu-node-7").status_code == 401  # the join token is no node token

    again = join(raw_join, "gpu-node-7")  # a restarted agent joins again: its earlier token stops working
    assert again.status_code == 200 and again.json()["token"] != body["token"]
    assert heartbeat(body["token"], "gpu-node-7").status_code == 401
    assert heartbeat(again.json()["token"], "gpu-node-7").status_code == 200


@pytest.mark.django_db
def test_a_join_token_claims_nodes_of_its_pool_only_and_expires(cluster, clock):
    raw_join = create_join_token(ttl="30m")
    other_pool = join(raw_join, "a100-spot-01")
    assert other_pool.status_code == 403 and "another pool" in other_pool.json()["detail"]
    assert join(raw_join, "h100-01").status_code == 200  # an existing node of its pool
    bad = join(raw_join, "Not A Node Name")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "node"
    assert join("gpj_wrong", "h100-02").status_code == 401
    assert join(raw_join, "").status_code == 400
    clock.advance(31 * 60)
    expired = join(raw_join, "h100-02")
    assert expired.status_code == 401 and expired["Content-Type"] == "application/problem+json"


@pytest.mark.django_db
def test_create_join_token_refuses_an_unknown_pool_or_ttl(cluster):
    with pytest.raises(CommandError, match="no pool named"):
        create_join_token(pool="nope")
    for ttl in ("0h", "soon", "-1h", "400d"):
        with pytest.raises(CommandError):
            create_join_token(ttl=ttl)

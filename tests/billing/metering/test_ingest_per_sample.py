"""Ingest is per sample: one bad sample is refused in the ack (with its index), the rest are stored;
a node's token reports only for pods bound to that node; its last use is written at most once a minute."""

import uuid

import pytest
from rest_framework.test import APIClient

from billing.metering.tokens import create_node_token
from billing.models import NodeToken, UsageSample
from billing.services import submit_quoted_job
from portal.models import ApiToken
from portal.services import create_api_token
from scheduling import clock as platform_clock
from scheduling.models import JobState, Node, Replica

pytestmark = pytest.mark.usefixtures("clock")  # samples are checked against the platform clock

SPEC = "name: m\nroles:\n  - name: main\n    image: busybox\n    resources: {gpu: 1}\n    nodePool: h100\n"


def sample(**overrides):
    body = {"id": str(uuid.uuid4()), "node": "h100-01", "ts": platform_clock.now().isoformat(), "gpu_uuid": "GPU-h100-01-0",
            "gpu_index": 0, "pod_uid": None, "gpu_util_pct": 42.5, "mem_used_mib": 1000, "interval_s": 10.0}
    body.update(overrides)
    return body


@pytest.fixture
def agent(cluster):
    token, raw = create_node_token(Node.objects.get(name="h100-01"))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    api.token = token
    return api


def post(api, samples):
    return api.post("/api/v1/agent/usage", {"node": "h100-01", "samples": samples}, format="json")


@pytest.mark.parametrize("bad", [
    {"gpu_uuid": "GPU-\x00"}, {"pod_uid": "pod\x00"}, {"node": "h100-01\x00"}, {"id": "\x00"},
    {"gpu_index": True}, {"gpu_index": 10**40}, {"mem_used_mib": 10**400}, {"interval_s": "10"},
    {"gpu_uuid": "G" * 500}, {"ts": "9999-12-31T23:59:59+00:00"}, {"ts": "\x00"},
])
def test_one_bad_sample_is_refused_and_the_others_are_stored(agent, bad):
    good = [sample(), sample()]
    refused = sample(**bad)
    response = post(agent, [good[0], refused, good[1]])
    assert response.status_code == 200, response.content[:300]
    body = response.json()
    assert sorted(body["accepted"]) == sorted(s["id"] for s in good)
    assert len(body["rejected"]) == 1
    assert body["rejected"][0]["index"] == 1 and body["rejected"][0]["reason"]
    assert "\x00" not in body["rejected"][0]["reason"]
    assert sorted(str(i) for i in UsageSample.objects.values_list("id", flat=True)) == sorted(s["id"] for s in good)


def test_a_sample_that_is_not_an_object_is_refused_with_its_index(agent):
    body = post(agent, [sample(), "nope", None]).json()
    assert [r["index"] for r in body["rejected"]] == [1, 2] and len(body["accepted"]) == 1


def test_usage_for_a_pod_bound_to_another_node_is_refused(agent, cluster):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC)
    elsewhere = Replica.objects.create(job=job, role="main", index=0, state=JobState.RUNNING,
                                       node=Node.objects.get(name="h100-02"), gpu_indices=[0])
    here = Replica.objects.create(job=job, role="main", index=1, state=JobState.RUNNING,
                                  node=Node.objects.get(name="h100-01"), gpu_indices=[0])
    theirs, ours = sample(pod_uid=str(elsewhere.uid)), sample(pod_uid=str(here.uid))
    body = post(agent, [theirs, ours]).json()
    assert body["accepted"] == [ours["id"]]
    assert body["rejected"][0]["id"] == theirs["id"] and body["rejected"][0]["index"] == 0
    assert "h100-01" in body["rejected"][0]["reason"]
    assert list(UsageSample.objects.values_list("replica_id", flat=True)) == [here.pk]


def test_node_token_last_used_is_written_at_most_once_a_minute(agent, clock):
    post(agent, [sample()])
    first = NodeToken.objects.get(pk=agent.token.pk).last_used
    assert first == clock.now
    clock.advance(30)
    post(agent, [sample()])
    assert NodeToken.objects.get(pk=agent.token.pk).last_used == first
    clock.advance(31)
    post(agent, [sample()])
    assert NodeToken.objects.get(pk=agent.token.pk).last_used == clock.now


def test_api_token_last_used_is_written_at_most_once_a_minute(cluster, clock):
    token, raw = create_api_token(cluster.alice, "ci")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.get("/api/v1/workspaces/").status_code == 200
    first = ApiToken.objects.get(pk=token.pk).last_used
    assert first == clock.now
    clock.advance(30)
    api.get("/api/v1/workspaces/")
    assert ApiToken.objects.get(pk=token.pk).last_used == first
    clock.advance(31)
    api.get("/api/v1/workspaces/")
    assert ApiToken.objects.get(pk=token.pk).last_used == clock.now

"""A secret's value and a registry password are found nowhere but where the replica reads them: not in the
database (dumpdata, and every table's raw rows), not in the kept or live logs (masked as ****, even though the
job printed it), not in the CSV and JSON exports, the audit lines, the quote, the schema, nor any API answer or
page about a job that used the secret."""

from __future__ import annotations

import base64
import io

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.db import connection
from rest_framework.test import APIClient

from billing.ledger.posting import post_ledger
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import JobState, ReplicaLog

pytestmark = pytest.mark.django_db
VALUE, PASSWORD = "hf_s3cr3t-Value-0123456789", "pull-pass-77-xyz"
FORMS = (VALUE, PASSWORD, base64.b64encode(VALUE.encode()).decode(), base64.b64encode(PASSWORD.encode()).decode())
SPEC = """name: uses-secret
queue: vision-lab
expectedDuration: 1h
roles:
  - name: main
    image: registry.example.com/team/train:1
    env:
      HF_TOKEN: {secret: hf-token}
      EPOCHS: 3
    resources: {gpu: 8}
    nodePool: h100
"""


def leaks(text: str) -> list[str]:
    return [form for form in FORMS if form in text]


def every_table() -> str:
    out = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')  # noqa: S608 - the database's own table names
            out.append(repr(cursor.fetchall()))
    return "\n".join(out)


def test_the_value_is_nowhere_but_where_the_replica_reads_it(cluster, clock, run, monkeypatch):
    alice = APIClient()
    alice.force_authenticate(cluster.alice)
    answers: list[str] = []

    def keep(response):
        answers.append(body_of(response))
        return response

    keep(alice.post("/api/v1/workspaces/vision-lab/secrets/", {"name": "hf-token", "value": VALUE}, format="json"))
    keep(alice.post("/api/v1/workspaces/vision-lab/registries/", {
        "server": "registry.example.com", "username": "robot", "password": PASSWORD}, format="json"))
    keep(alice.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": SPEC}, format="json"))
    submitted = keep(alice.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": SPEC}, format="json"))
    assert submitted.status_code == 201, submitted.content
    job_id = submitted.json()["id"]

    # the job prints its token: what it writes is its own business, what the platform keeps and shows is masked
    printed = SimulatedBackend._pod_log
    monkeypatch.setattr(SimulatedBackend, "_pod_log",
                        lambda self, pod, key, tail: printed(self, pod, key, tail) + f"token is {VALUE}\n")
    backend = SimulatedBackend(speedup=60, failure_rate=0, clock=clock)
    launched = []
    monkeypatch.setattr(backend, "launch_many", lambda replicas, real=backend.launch_many: (
        launched.extend(replicas), real(replicas))[1])
    run(backend, clock)
    clock.advance(2)
    run(backend, clock)
    assert launched and launched[0].secret_values == {"hf-token": VALUE}  # the replica does get it
    assert launched[0].pull_secret == "registry.example.com" and PASSWORD in launched[0].pull_config
    assert not leaks(repr(launched[0]))
    live = keep(alice.get(f"/api/v1/jobs/{job_id}/logs/"))
    assert "token is ****" in live.content.decode()
    clock.advance(61)
    run(backend, clock)
    assert ReplicaLog.objects.filter(job_id=job_id).exists()
    assert all("token is ****" in log.text for log in ReplicaLog.objects.filter(job_id=job_id))

    for path in (f"/api/v1/jobs/{job_id}/", f"/api/v1/jobs/{job_id}/events/", f"/api/v1/jobs/{job_id}/logs/",
                 "/api/v1/jobs/", "/api/v1/costs/", "/api/v1/workspaces/vision-lab/secrets/",
                 "/api/v1/workspaces/vision-lab/registries/", "/api/schema/"):
        response = keep(alice.get(path))
        assert response.status_code == 200, (path, response.status_code)
    keep(alice.post(f"/api/v1/jobs/{job_id}/cancel/"))  # refused (it ended): the refusal is an answer too
    post_ledger(now=clock.now)
    client = alice_pages(cluster)
    for path in (f"/jobs/{job_id}/", f"/jobs/{job_id}/log/", "/reports/export.csv", "/w/vision-lab/secrets/",
                 "/submit/?from=" + str(job_id)):
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code)
        keep(response)
    assert "uses-secret" in answers[-3]  # the CSV export has the job's ledger lines

    assert JobState.SUCCEEDED == alice.get(f"/api/v1/jobs/{job_id}/").json()["state"]
    dump = io.StringIO()
    call_command("dumpdata", stdout=dump)
    for where, text in [("answers", "\n".join(answers)), ("dumpdata", dump.getvalue()), ("tables", every_table())]:
        assert not leaks(text), where
    assert "hf-token" in every_table()  # the name is there: the check above reads the right rows


def body_of(response) -> str:
    if not response.streaming:
        return response.content.decode()
    if response.is_async:  # an ASGI stream (the CSV export)
        async def whole(chunks):
            return b"".join([chunk async for chunk in chunks])

        return async_to_sync(whole)(response.streaming_content).decode()
    return b"".join(response.streaming_content).decode()


def alice_pages(cluster):
    from django.test import Client

    client = Client()
    client.force_login(cluster.alice)
    return client


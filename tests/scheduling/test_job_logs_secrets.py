"""Kept logs mask the workspace's secret values as ****: when the log is kept, and again when it is read (a value
stored after the log was kept is hidden too); another workspace's values are not its business."""

from __future__ import annotations

import pytest

from scheduling import logs, secrets
from scheduling.models import JobState, Replica, ReplicaLog
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db
VALUE, LATER = "hf_s3cr3t-Value-0123456789", "stored-after-the-log-42"


class NoBackend:
    def logs(self, key, tail_lines=200):
        raise AssertionError("a kept log is read from the database")


def ended_replica(workspace):
    job = JobFactory(workspace=workspace, state=JobState.SUCCEEDED, roles=[{"name": "main", "max_replicas": 1}])
    return Replica.objects.create(job=job, role="main", index=0, state=JobState.SUCCEEDED)


def test_a_kept_log_masks_the_values_known_then_and_a_read_those_known_now(tenants, clock):
    secrets.set_secret(tenants.alice, tenants.vision, "hf-token", VALUE)
    secrets.set_registry(tenants.alice, tenants.vision, "registry.example.com", "robot", "pull-pass-77")
    secrets.set_secret(tenants.bob, tenants.nlp, "theirs", "nlp-value-1234")
    replica = ended_replica(tenants.vision)
    printed = f"token {VALUE}\nlogin pull-pass-77\nlater {LATER}\nnot ours nlp-value-1234\n"
    kept = logs.store_replica_log(replica, printed)
    assert kept.text == f"token ****\nlogin ****\nlater {LATER}\nnot ours nlp-value-1234\n"
    assert kept.size == len(kept.text.encode())
    secrets.set_secret(tenants.alice, tenants.vision, "later", LATER)
    shown = logs.job_log_text(replica.job, NoBackend())
    assert LATER not in shown and "later ****" in shown and VALUE not in shown
    assert ReplicaLog.objects.get().text == kept.text  # the kept copy is not rewritten

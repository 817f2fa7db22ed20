"""A new workload kind is one object registered with scheduling.kinds: this test adds one that no module
of the platform knows by name (batch-eval, with its own launch and its own idle rule), submits a job of it
through the normal service, and runs it end to end on the simulated backend. A module that still branched
on a kind's name would send it down another kind's path (a notebook's server, a service's scale) or fail
to find it in a table keyed by name."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
from django.core import mail
from django.utils.translation import gettext_lazy, gettext_noop

from billing.idle.services import check_idle_gpus
from billing.ledger.posting import post_ledger
from billing.models import ChargeLine, UsageSample
from billing.services import quote_for_workspace, submit_quoted_job
from scheduling import kinds
from scheduling.backends.base import BATCH
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.kinds.base import Kind
from scheduling.models import Job, JobState, SimulatedPod
from scheduling.spec import parse_job_spec_obj, roles_to_dict, spec_to_dict
from scheduling.spec.kinds import read_roles

EVAL_SUITE = ("EVAL_SUITE", "mmlu")


class BatchEvalKind(Kind):
    """Evaluation runs: written with roles as training is, launched with the suite to run, and cancelled
    at the first idle notice whatever its pool's policy (an idle evaluation is a stuck one)."""

    name = "batch-eval"
    label = gettext_lazy("Batch evaluation")
    noun = gettext_noop("a batch evaluation")
    resource_type = "Batch evaluation"

    def read(self, r):
        return read_roles(r, self.name)

    def to_dict(self, spec) -> dict[str, Any]:
        return {"kind": self.name, **roles_to_dict(spec)}

    def launch_fields(self, job) -> dict[str, Any]:
        env = dict(job.roles[0]["env"])
        env.update([EVAL_SUITE])
        return {**super().launch_fields(job), "env": tuple(sorted(env.items()))}

    def idle_may_stop(self, pool) -> bool:
        return True

    def idle_stop_at(self, notified: datetime, pool) -> datetime:
        return notified


SPEC = """kind: batch-eval
name: eval-llama
queue: vision-lab
expectedDuration: 1h
roles:
  - name: main
    image: busybox:1.36
    nodePool: h100
    resources: {gpu: 1, cpu: 1, memory: 4Gi}
"""


@pytest.fixture
def batch_eval():
    kind = kinds.register(BatchEvalKind())
    yield kind
    kinds.unregister(kind.name)


class RecordingBackend(SimulatedBackend):
    """The simulated cluster, remembering what it was asked to launch."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.launched = []

    def launch_many(self, replicas):
        self.launched += replicas
        super().launch_many(replicas)


@pytest.fixture
def backend(clock):
    return RecordingBackend(speedup=60, failure_rate=0, clock=clock)  # its hour runs a minute


def test_a_kind_registered_in_a_test_is_read_quoted_scheduled_run_finished_and_metered(
        batch_eval, cluster, backend, clock, run):
    parsed = parse_job_spec_obj({"kind": "batch-eval", **roles_to_dict(parse_job_spec_obj(
        {"name": "x", "roles": [{"name": "main", "image": "busybox:1.36"}]}))})
    assert parsed.kind == "batch-eval" and parse_job_spec_obj(spec_to_dict(parsed)) == parsed

    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC)
    assert (job.kind, job.get_kind_display()) == ("batch-eval", "Batch evaluation")
    _, quote = quote_for_workspace(cluster.vision, SPEC)
    assert any(o.id.endswith(".off-peak") for o in quote.options)  # batch work: it may wait for cheap hours
    assert run(backend, clock).binds == 1
    job.refresh_from_db()
    assert job.state == JobState.SCHEDULED

    [launch] = backend.launched
    assert (launch.kind, launch.shape, launch.token, launch.home_mib, launch.server) == ("batch-eval", BATCH, "", 0, "")
    assert EVAL_SUITE in launch.env  # its own launch
    pod = SimulatedPod.objects.get(job_id=job.pk)
    assert (pod.kind, pod.process) == ("batch-eval", False)  # a modelled pod that runs its duration, no server

    clock.advance(2)
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.started is not None
    clock.advance(61)
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED
    assert [e.kind for e in job.events.order_by("id")] == ["submitted", "scheduled", "running", "succeeded"]
    assert job.final_cost is not None and abs(job.final_cost - Decimal(job.quote["estimate_low"])) < Decimal("0.10")

    post_ledger(now=clock.now)
    held = sum(ChargeLine.objects.filter(job=job).values_list("allocated_gpu_hours", flat=True), Decimal(0))
    assert Decimal("0.9") < held <= Decimal("1.1")  # one GPU for its simulated hour


def report(replica, clock, percent: float, *, minutes: int) -> None:
    """The node agent's samples for the replica's GPU, one a minute for `minutes` up to now."""
    for _ in range(minutes):
        clock.advance(60)
        for index in replica.gpu_indices:
            UsageSample.objects.create(
                id=uuid.uuid4(), node=replica.node, ts=clock.now, gpu_uuid=f"GPU-{replica.node.name}-{index}",
                gpu_index=index, pod_uid=str(replica.uid), replica=replica, gpu_util_pct=percent, interval_s=60)


def test_its_own_idle_rule_cancels_it_where_the_pool_only_notifies(
        batch_eval, cluster, clock, run, django_capture_on_commit_callbacks):
    backend = SimulatedBackend(speedup=1, failure_rate=0, clock=clock)
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC.replace("1h", "10h"))
    run(backend, clock)
    clock.advance(1)
    run(backend, clock)
    replica = job.replicas.get(state=JobState.RUNNING)
    assert replica.node.pool.idle_action == "notify"  # a training job here would only be told

    report(replica, clock, 1.0, minutes=32)
    with django_capture_on_commit_callbacks(execute=True):
        result = check_idle_gpus(now=clock.now)
    assert result.flagged == [replica] and result.stopped == [replica.job]
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED  # cancelled (its kind's idle action), not stopped to start again
    assert "stopped by policy" in job.events.get(kind="cancelled").reason
    [notice] = mail.outbox
    assert "holds idle GPUs" in notice.subject  # the GPU rule's notice, not a notebook's


def test_unregistered_it_is_a_kind_no_spec_may_name(cluster):
    from scheduling.spec import SpecError

    with pytest.raises(SpecError, match="batch-eval"):
        parse_job_spec_obj({"kind": "batch-eval", "name": "x", "roles": [{"name": "main", "image": "busybox"}]})
    assert "batch-eval" not in kinds.names() and not Job.objects.filter(kind="batch-eval").exists()

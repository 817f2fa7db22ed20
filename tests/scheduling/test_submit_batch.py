"""Many submits at once (scheduling.services.submit_jobs): each item checked as submit_job checks it, the good
ones stored together with their submitted events, each refused one answered with its own error; the workspace's
queues and the cluster's pools read once, whatever the number of items."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling.errors import DomainError
from scheduling.models import Job, JobEvent, JobState, Queue
from scheduling.services import NotSubmitter, SubmitItem, submit_job, submit_jobs
from scheduling.spec import SpecError, SpecNeverRuns
from tests.factories import QueueAccessFactory, QueueFactory

TRAINING = "name: {name}\nqueue: vision-lab\nroles:\n  - name: main\n    image: busybox:1.36\n    resources: {{gpu: 1}}\n"
NOTEBOOK = "kind: notebook\nname: scratch\nqueue: vision-lab\nresources: {gpu: 0.5, gpuMemory: 10Gi}\n"


def training(name: str) -> str:
    return TRAINING.format(name=name)


def test_good_items_are_stored_and_bad_ones_answered_in_order(cluster, clock):
    items = [
        training("a"),
        "name: [unclosed",
        training("b"),
        training("c").replace("queue: vision-lab", "queue: nlp-group"),  # not a queue vision-lab may use
        {
            "name": "d",
            "queue": "vision-lab",
            "roles": [{"name": "main", "image": "busybox", "resources": {"gpu": 1}}],
        },
    ]
    out = submit_jobs(user=cluster.alice, workspace=cluster.vision, items=items)
    assert [isinstance(o, Job) for o in out] == [True, False, True, False, True]
    assert isinstance(out[1], SpecError) and isinstance(out[3], SpecError)
    assert "queue" in {issue.field for issue in out[3].errors}
    stored = Job.objects.filter(workspace=cluster.vision).order_by("pk")
    assert [j.name for j in stored] == ["a", "b", "d"] and [o.pk for o in out if isinstance(o, Job)] == [
        j.pk for j in stored
    ]
    assert {j.state for j in stored} == {JobState.PENDING}
    assert {j.pending_code for j in stored} == {"waiting_for_cycle"}
    assert {j.queue.name for j in stored} == {"vision-lab"}
    assert set(JobEvent.objects.filter(kind="submitted").values_list("job__name", flat=True)) == {
        "a",
        "b",
        "d",
    }
    # a batch's job is the same row a single submit stores
    single = submit_job(user=cluster.alice, workspace=cluster.vision, spec=training("a"))
    batch = Job.objects.get(name="a", pk=out[0].pk)
    for field in (
        "queue_id",
        "kind",
        "priority",
        "roles",
        "spec",
        "spec_text",
        "pending_reason",
        "max_runtime_s",
        "topology",
        "state",
    ):
        assert getattr(batch, field) == getattr(single, field), field


def test_a_queues_limit_refuses_only_the_items_past_it(cluster, clock):
    small = QueueFactory(
        name="small-team",
        parent=Queue.objects.get(name="root"),
        deserved_gpus=Decimal(8),
        limit_gpus=Decimal(4),
    )
    QueueAccessFactory(queue=small, workspace=cluster.vision)
    spec = "name: {name}\nqueue: small-team\nroles:\n  - name: main\n    image: busybox\n    resources: {{gpu: {gpus}}}\n"
    out = submit_jobs(
        user=cluster.alice,
        workspace=cluster.vision,
        items=[spec.format(name="fits", gpus=4), spec.format(name="never", gpus=8)],
    )
    assert isinstance(out[0], Job) and isinstance(out[1], SpecNeverRuns)
    assert "small-team" in str(out[1]) and list(Job.objects.values_list("name", flat=True)) == ["fits"]


def test_one_live_notebook_per_name_holds_within_the_batch(cluster, clock):
    out = submit_jobs(user=cluster.alice, workspace=cluster.vision, items=[NOTEBOOK, NOTEBOOK])
    assert isinstance(out[0], Job) and isinstance(out[1], SpecError)
    assert "scratch" in str(out[1])
    assert Job.objects.filter(kind="notebook", name="scratch").count() == 1


def test_a_role_that_may_not_submit_refuses_the_whole_batch(cluster, clock):
    with pytest.raises(NotSubmitter):
        submit_jobs(user=cluster.finance, workspace=cluster.vision, items=[training("a")])
    assert not Job.objects.exists()


def test_another_tenants_queue_is_not_open_to_the_batch(cluster, clock):
    out = submit_jobs(
        user=cluster.bob,
        workspace=cluster.nlp,
        items=[training("mine").replace("vision-lab", "nlp-group"), training("theirs")],
    )
    assert isinstance(out[0], Job) and isinstance(out[1], DomainError)
    assert out[0].workspace == cluster.nlp and not Job.objects.filter(workspace=cluster.vision).exists()


def test_the_shared_reads_are_made_once(cluster, clock):
    def queries(n: int) -> int:
        with CaptureQueriesContext(connection) as captured:
            submit_jobs(
                user=cluster.alice,
                workspace=cluster.vision,
                items=[SubmitItem(training(f"q{n}-{i}")) for i in range(n)],
            )
        return len(captured)

    assert queries(20) == queries(2)


def _alike(name) -> dict:
    spec = {"queue": "vision-lab", "priority": 7, "expectedDuration": "2h",
            "roles": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "echo hi"],
                       "env": {"MODE": "sweep", "RATE": "0.1"}, "resources": {"gpu": 1}}]}
    return spec if name is None else {"name": name, **spec}


def test_specs_alike_but_for_their_name_are_read_once_and_stored_as_one_by_one(cluster, clock, monkeypatch):
    """A job array written out: one read of the spec, and rows, texts and errors as single submits give."""
    from scheduling import services

    names = ["arr-0", "arr-1", "123", "true", "Not_A_Label", None, "arr-2", 5, "x" * 70]
    items = [_alike(name) for name in names] + [{**_alike("other"), "priority": 8}]
    reads = []
    real = services.parse_job_spec_obj
    monkeypatch.setattr(services, "parse_job_spec_obj", lambda obj, **kw: reads.append(obj) or real(obj, **kw))
    out = submit_jobs(user=cluster.alice, workspace=cluster.vision, items=items)
    # read whole: the first, the bad names (each refused as alone) and the other spec
    assert [item.get("name") for item in reads] == ["arr-0", "Not_A_Label", None, 5, "x" * 70, "other"]
    monkeypatch.setattr(services, "parse_job_spec_obj", real)
    assert [isinstance(o, Job) for o in out] == [True, True, True, True, False, False, True, False, False, True]

    columns = [f.attname for f in Job._meta.concrete_fields if f.attname not in ("id", "created")]
    for item, batch in zip(items, out, strict=True):
        try:
            single = submit_job(user=cluster.alice, workspace=cluster.vision, spec=item)
        except SpecError as error:
            assert isinstance(batch, SpecError) and str(batch) == str(error) and batch.errors == error.errors
            continue
        alone, together = (Job.objects.filter(pk=pk).values(*columns).get() for pk in (single.pk, batch.pk))
        assert together == alone, item.get("name")
    assert Job.objects.get(pk=out[2].pk).spec_text.startswith("name: '123'\n")


def test_a_spec_text_written_from_another_with_its_name_put_in_is_the_text_written_whole():
    from scheduling.spec import dict_to_yaml
    from scheduling.spec.templates import PLACEHOLDER, SpecTemplates

    templates = SpecTemplates()
    out = {"name": "first", "type": "single", "roles": [{"name": "main", "image": "busybox", "env": {"A": "b"}}]}
    for name in ("first", "a-b", "123", "true", "null", "on", "0x1f", "1e5", "y", "2024-1-1", "1-1", "0o17", "1-0",
                 "x" * 63, PLACEHOLDER):
        assert templates.yaml({**out, "name": name}) == dict_to_yaml({**out, "name": name}), name
    elsewhere = {**out, "roles": [{"name": "main", "image": PLACEHOLDER}]}   # the placeholder in another field
    assert templates.yaml({**elsewhere, "name": "z"}) == dict_to_yaml({**elsewhere, "name": "z"})

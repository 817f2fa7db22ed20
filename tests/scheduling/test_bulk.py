"""update_rows saves the named fields of many rows, and only those (PostgreSQL's path in CI's run)."""

from datetime import timedelta

import pytest
from django.db import IntegrityError

from scheduling import clock
from scheduling.bulk import update_rows
from scheduling.models import Job, JobState
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db


def test_named_fields_of_every_row_are_saved_and_no_other():
    jobs = [JobFactory(state=JobState.PENDING, pending_code="waiting_for_cycle", name=f"bulk-{n}") for n in range(3)]
    now = clock.now()
    for n, job in enumerate(jobs):
        job.state, job.started = JobState.RUNNING, now + timedelta(seconds=n)
        job.pending_params = {"free": n, "pools": ["h100", "a100"], "note": None}
        job.pending_code = ""
        job.name = "not saved"
    update_rows(jobs[:2], ["state", "started", "pending_params", "pending_code"])
    rows = {j.pk: j for j in Job.objects.filter(pk__in=[j.pk for j in jobs])}
    for n, job in enumerate(jobs[:2]):
        row = rows[job.pk]
        assert (row.state, row.started, row.pending_code) == (JobState.RUNNING, now + timedelta(seconds=n), "")
        assert row.pending_params == {"free": n, "pools": ["h100", "a100"], "note": None}
        assert row.name == f"bulk-{n}"
    untouched = rows[jobs[2].pk]
    assert (untouched.state, untouched.started, untouched.pending_code) == (JobState.PENDING, None, "waiting_for_cycle")
    update_rows([], ["state"])   # nothing to do
    jobs[0].started = None
    update_rows(jobs[:1], ["started"])
    assert Job.objects.get(pk=jobs[0].pk).started is None


def test_inserted_rows_keep_every_field_and_a_conflict_is_skipped_when_asked(clock):
    from scheduling.bulk import insert_rows
    from scheduling.models import JobEvent, SimulatedPod

    job = JobFactory(state=JobState.PENDING, name="events")
    insert_rows([JobEvent(job=job, kind="scheduled", state=JobState.SCHEDULED, reason=f"r{n}",
                          said={"key": "placed", "params": {"n": n}}, data={"nodes": ["a", "b"], "n": n})
                 for n in range(3)])
    rows = list(job.events.order_by("id").values_list("kind", "reason", "said", "data", "time"))
    assert rows == [("scheduled", f"r{n}", {"key": "placed", "params": {"n": n}}, {"nodes": ["a", "b"], "n": n},
                     clock.now) for n in range(3)]

    def pod(index, node):
        return SimulatedPod(job_id=job.pk, role="main", index=index, node=node, gpus=[index], launched=clock.now,
                            job_started=clock.now, run_seconds=60.0)

    insert_rows([pod(0, "first")])
    insert_rows([pod(0, "second"), pod(1, "second")], ignore_conflicts=True)   # index 0 is there already
    assert sorted(SimulatedPod.objects.values_list("index", "node", "gpus")) == [(0, "first", [0]),
                                                                                (1, "second", [1])]
    with pytest.raises(IntegrityError):
        insert_rows([pod(1, "third")])


def test_rows_set_to_the_same_values_are_saved_as_one_by_one_would_save_them():
    jobs = [JobFactory(state=JobState.PENDING, pending_code="waiting_for_cycle", name=f"same-{n}") for n in range(6)]
    now = clock.now()
    for job in jobs[:4]:   # one group of equal values
        job.state, job.pending_code, job.pending_params, job.started = JobState.SCHEDULED, "", {}, now
    jobs[4].state, jobs[4].pending_code, jobs[4].pending_params = JobState.SCHEDULED, "", {"n": 4}
    jobs[5].state, jobs[5].pending_code, jobs[5].pending_params = JobState.SCHEDULED, "", {"n": 5}
    update_rows(jobs, ["state", "pending_code", "pending_params", "started"])
    rows = dict(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("pk", "pending_params"))
    assert [rows[j.pk] for j in jobs] == [{}, {}, {}, {}, {"n": 4}, {"n": 5}]
    assert list(Job.objects.filter(pk__in=[j.pk for j in jobs]).order_by("pk").values_list("state", "started")) == [
        (JobState.SCHEDULED, now)] * 4 + [(JobState.SCHEDULED, None)] * 2


def test_inserted_rows_hold_what_bulk_create_stores(clock):
    """Values Django converts on the way (a whole number for a float, text for a Decimal, a lazy text) are
    converted as bulk_create converts them; the others are taken as they are."""
    from decimal import Decimal

    from django.utils.functional import lazy

    from scheduling.bulk import insert_rows
    from scheduling.models import Replica
    from tests.factories import NodeFactory

    job, node = JobFactory(name="rows"), NodeFactory(name="rows-node")
    lazy_text = lazy(lambda: "lazy reason", str)

    def replicas(role):
        return [Replica(job=job, role=role, index=n, state=JobState.SCHEDULED, node=node, gpu_indices=[n, n + 1],
                        slice={"kind": "whole", "gpu_milli": 1000}, clock_scale=2 if n else 1.5,
                        lost_gpu_hours="1.25" if n else Decimal("0.5"), end_reason=lazy_text() if n else "",
                        started=clock.now, attempt=n, revision=None if n else 3) for n in range(3)]

    Replica.objects.bulk_create(replicas("orm"))
    insert_rows(replicas("copy"))
    columns = [f.attname for f in Replica._meta.concrete_fields if f.attname not in ("id", "uid", "role")]

    def stored(role):
        return list(Replica.objects.filter(role=role).order_by("index").values_list(*columns))

    assert stored("copy") == stored("orm")
    assert [row[columns.index("clock_scale")] for row in stored("copy")] == [1.5, 2.0, 2.0]

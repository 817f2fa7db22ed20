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

"""Two workers fire the same due schedule at the same moment, each in its own transaction on its own connection:
one run is made, one fire time recorded. On PostgreSQL (DATABASE_URL=postgres://...), where rows lock; SQLite
serialises its writers, so the race this test makes cannot happen there."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections

from billing.services import submit_quoted_schedule
from scheduling.models import Job, ScheduleFiring
from scheduling.schedules import fire_due_schedules

pytestmark = pytest.mark.django_db(transaction=True)

SPEC = """\
name: hourly
queue: vision-lab
roles: [{name: main, image: busybox, resources: {gpu: 1}}]
schedule: {cron: "0 * * * *", concurrency: Allow}
"""


@pytest.mark.skipif(connection.vendor != "postgresql", reason="needs PostgreSQL's row locks (DATABASE_URL)")
def test_two_workers_firing_at_once_make_one_run(cluster, clock):
    schedule = submit_quoted_schedule(user=cluster.alice, workspace=cluster.vision, spec=SPEC)
    clock.now = schedule.next_fire_at + timedelta(seconds=1)
    start = threading.Barrier(2)
    reports, errors = [], []

    def worker():
        try:
            start.wait()
            reports.append(fire_due_schedules())
        except Exception as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert sorted(len(r.started) for r in reports) == [0, 1]
    assert Job.objects.filter(schedule=schedule).count() == 1 and ScheduleFiring.objects.count() == 1

"""The cycle's pending reasons at scale: new reasons at once, moving figures within a bound per
cycle, and the reasons a worker keeps between cycles never hiding a row someone else rewrote."""

import pytest
from django.db import transaction

from scheduling.core.reasons import CODES, Reason, reason_text
from scheduling.cycle import pending
from scheduling.cycle.pending import PendingReasons, set_pending_reasons
from scheduling.models import Job, JobState
from scheduling.services import release_suspended
from tests.factories import JobFactory, QueueFactory, WorkspaceFactory

pytestmark = pytest.mark.django_db


def short(free: int) -> Reason:
    return Reason("gpus_short", {"gpus": 8, "free": free, "pool": "h100"})


def cycle(jobs, reason_of, kept):
    """One cycle's reasons for `jobs`, committed (the worker keeps them only on commit)."""
    reasons = {str(job.pk): reason_of(job) for job in jobs}
    with transaction.atomic():
        set_pending_reasons(reasons, {pk: r.text for pk, r in reasons.items()}, kept)


def stored(jobs):
    rows = dict(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("pk", "pending_params"))
    return [rows[j.pk].get("free") for j in jobs]


@pytest.fixture
def waiting():
    workspace = WorkspaceFactory()
    queue = QueueFactory()
    return [JobFactory(workspace=workspace, queue=queue, state=JobState.PENDING, pending_code="waiting_for_cycle",
                       pending_reason=reason_text("waiting_for_cycle", {})) for _ in range(5)]


def test_moving_figures_are_rewritten_a_bounded_number_per_cycle_oldest_first(waiting, monkeypatch,
                                                                             django_capture_on_commit_callbacks):
    monkeypatch.setattr(pending, "FIGURES_PER_CYCLE", 2)
    kept = PendingReasons()
    with django_capture_on_commit_callbacks(execute=True):
        cycle(waiting, lambda job: short(0), kept)
    # a new reason (waiting for a cycle -> GPUs short) is news: every row at once, one event each
    assert stored(waiting) == [0] * 5
    assert all(job.events.filter(kind="pending").count() == 1 for job in waiting)

    with django_capture_on_commit_callbacks(execute=True):
        cycle(waiting, lambda job: short(3), kept)
    assert stored(waiting) == [3, 3, 0, 0, 0]
    with django_capture_on_commit_callbacks(execute=True):
        cycle(waiting, lambda job: short(3), kept)
    assert stored(waiting) == [3, 3, 3, 3, 0]
    with django_capture_on_commit_callbacks(execute=True):
        cycle(waiting, lambda job: short(4), kept)
    # the rows written longest ago first (the last one, written in the first cycle), then by key
    assert stored(waiting) == [4, 3, 3, 3, 4]
    # figures are no news: still one event each, and the text matches the code and figures
    assert all(job.events.filter(kind="pending").count() == 1 for job in waiting)
    for job in Job.objects.filter(pk__in=[j.pk for j in waiting]):
        assert job.pending_reason == reason_text(job.pending_code, job.pending_params)


def test_a_new_reason_is_written_at_once_past_the_bound(waiting, monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.setattr(pending, "FIGURES_PER_CYCLE", 1)
    kept = PendingReasons()
    with django_capture_on_commit_callbacks(execute=True):
        cycle(waiting, lambda job: short(0), kept)
    over = Reason("queue_over_limit", {"queue": "q", "limit_milli": 8000, "used_milli": 8000, "need_milli": 8000})
    with django_capture_on_commit_callbacks(execute=True):
        cycle(waiting, lambda job: over, kept)
    assert set(Job.objects.filter(pk__in=[j.pk for j in waiting]).values_list("pending_code", flat=True)) == {
        "queue_over_limit"}
    assert all(job.events.filter(kind="pending").count() == 2 for job in waiting)


def test_a_row_rewritten_between_cycles_is_read_again(waiting, django_capture_on_commit_callbacks):
    kept = PendingReasons()
    with django_capture_on_commit_callbacks(execute=True):
        cycle(waiting, lambda job: short(0), kept)
    # a budget hold and its release between two cycles: the row says "waiting for the next cycle"
    Job.objects.filter(pk=waiting[0].pk).update(pending_code="budget_suspended", pending_params={"until": "x"})
    assert release_suspended(waiting[0].workspace) == 1
    with django_capture_on_commit_callbacks(execute=True):
        cycle(waiting, lambda job: short(0), kept)   # the same reason as the worker kept
    row = Job.objects.get(pk=waiting[0].pk)
    assert (row.pending_code, row.pending_params) == ("gpus_short", short(0).params)
    assert row.pending_reason == short(0).text


def test_a_cycle_rolled_back_keeps_nothing(waiting, django_capture_on_commit_callbacks):
    kept = PendingReasons()
    with django_capture_on_commit_callbacks(execute=True):
        cycle(waiting, lambda job: short(0), kept)
    with pytest.raises(RuntimeError), transaction.atomic():
        reasons = {str(job.pk): short(5) for job in waiting}
        set_pending_reasons(reasons, {pk: r.text for pk, r in reasons.items()}, kept)
        raise RuntimeError("lost the lock")
    assert stored(waiting) == [0] * 5
    with django_capture_on_commit_callbacks(execute=True):
        cycle(waiting, lambda job: short(5), kept)
    assert stored(waiting) == [5] * 5


def test_shortages_of_room_are_one_piece_of_news(waiting, django_capture_on_commit_callbacks):
    """"8 free, at most 7 on a node" and "only 7 free" flip with every bind: the row follows, the events do not."""
    assert pending.ROOM_SHORT <= CODES
    kept = PendingReasons()
    scattered = Reason("gpus_not_on_one_node", {"gpus": 8, "free": 8, "most": 7, "pool": "h100"})
    for reason in (short(7), scattered, short(7), scattered):
        with django_capture_on_commit_callbacks(execute=True):
            cycle(waiting[:1], lambda job, reason=reason: reason, kept)
        row = Job.objects.get(pk=waiting[0].pk)
        assert (row.pending_code, row.pending_reason) == (reason.code, reason.text)
    assert list(waiting[0].events.filter(kind="pending").values_list("reason", flat=True)) == [short(7).text]
    over = Reason("queue_over_limit", {"queue": "q", "limit_milli": 8000, "used_milli": 8000, "need_milli": 8000})
    with django_capture_on_commit_callbacks(execute=True):
        cycle(waiting[:1], lambda job: over, kept)
    assert waiting[0].events.filter(kind="pending").count() == 2

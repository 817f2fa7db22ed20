"""What scheduling tells the layers above it, without importing them.

The portal turns job events into live page updates, and billing prices a job that ended; each
connects these signals in its AppConfig.ready.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from django.dispatch import Signal

# Sent after commit with `events`: a list of (job, message) in the order they were recorded.
job_events_committed = Signal()

# Sent inside the transaction that ends a job (`job`, its final state already set). A receiver
# may return a short note for the job's final event (billing returns the final cost).
job_finished = Signal()

# Sent inside the transaction that marks nodes silent or ready again (scheduling.health), with
# `changes`: a list of ReadinessChange. The console records them in its audit log.
node_readiness_changed = Signal()

# Sent with `now` when the scheduler needs to know whether cheap-hours work may run; billing,
# which keeps the off-peak windows on its price tables, answers with an OffPeak.
off_peak_asked = Signal()


@dataclass(frozen=True)
class OffPeak:
    now: bool
    next_start: str  # "HH:MM UTC": in the platform's time zone, named; "" when there is no window


NEVER_OFF_PEAK = OffPeak(now=False, next_start="")


def off_peak_at(now: datetime) -> OffPeak:
    answers = [answer for _, answer in off_peak_asked.send(sender=None, now=now) if answer is not None]
    return answers[0] if answers else NEVER_OFF_PEAK


# Sent with `now` and {job id: workspace id} of the ReduceCost jobs: billing answers, for those whose
# workspace pays in another currency than the platform's, the OffPeak of that currency's price table.
job_off_peak_asked = Signal()


def job_off_peak_at(now: datetime, workspaces: dict[int, int]) -> dict[int, OffPeak]:
    """Job id -> its own OffPeak, for the jobs whose window is not `off_peak_at`'s."""
    if not workspaces:
        return {}
    found: dict[int, OffPeak] = {}
    for _, answer in job_off_peak_asked.send(sender=None, now=now, workspaces=workspaces):
        found.update(answer or {})
    return found


_batch = threading.local()


@contextmanager
def batched():
    """Send every job event committed inside the block in one signal at its end: a scheduling
    cycle raises thousands, and one send for all of them costs what one costs alone."""
    if getattr(_batch, "events", None) is not None:  # already batching: the outer block sends
        yield
        return
    _batch.events = []
    try:
        yield
    finally:
        events, _batch.events = _batch.events, None
        if events:
            job_events_committed.send(sender=None, events=events)


def send_committed(events: list) -> None:
    if getattr(_batch, "events", None) is not None:
        _batch.events.extend(events)
    elif events:
        job_events_committed.send(sender=None, events=events)


def finish_notes(job) -> list[str]:
    """Tell the layers above that `job` ended; the notes they return go on its final event."""
    return [note for _, note in job_finished.send(sender=None, job=job) if note]

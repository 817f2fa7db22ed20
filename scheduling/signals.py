"""What scheduling tells the layers above it, without importing them.

The portal turns job events into live page updates, and billing prices a job that ended; each
connects these signals in its AppConfig.ready. The off-peak calendar is not asked for here: billing
writes it into scheduling's tables (scheduling.offpeak_calendar).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

from django.dispatch import Signal

from scheduling import history_catalogue as texts
from scheduling.history_texts import said

# Sent after commit with `events`: a list of (job, message) in the order they were recorded.
job_events_committed = Signal()

# Sent inside the transaction that ends a job (`job`, its final state already set). Receivers return
# nothing: billing writes the job's final cost on its row, and the final event says what is there.
job_finished = Signal()

# Sent inside the transaction that marks nodes silent or ready again (scheduling.health), with
# `changes`: a list of ReadinessChange. The console records them in its audit log.
node_readiness_changed = Signal()

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


def finish_notes(job) -> list:
    """Tell the layers above that `job` ended; the notes for its final event say what they wrote on
    its row (the final cost, once billing has fixed it)."""
    job_finished.send(sender=None, job=job)
    job.refresh_from_db(fields=["final_cost", "currency"])
    if job.final_cost is None:
        return []
    return [said(texts.FINAL_COST, cost=f"{job.final_cost:.2f}",
                 currency=job.currency)]

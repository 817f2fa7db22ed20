"""When each quote option is expected to start, from the cluster's state now.

A ``now`` option's start is the scheduler's answer (``scheduling.starts.expected_starts``: now when
its MinReplicas find room together, else the forecast of its queue, None beyond the horizon); an
``off-peak`` option is expected when its window opens. When the cluster cannot be read as a
consistent snapshot, or not at all (a pool row the scheduler refuses: logged once per cause), each option
keeps the quote's own guess.
"""

from __future__ import annotations

import logging

from billing.faults import exception_once
from billing.quotes import (
    DEADLINE,
    NOW,
    Note,
    Quote,
    budget_note,
    quota_note,
    with_expected_starts,
    with_preemptible_variants,
)
from scheduling.api import JobSpec, start_outlook

logger = logging.getLogger(__name__)

def with_cluster_starts(quote: Quote, spec: JobSpec, queue: str | None = None, *,
                        budget_blocks: bool = False, snapshot=None) -> Quote:
    """Each option's expected start; those that must wait are forecast in ``queue`` (None: not). A ``now``
    option is now only when its queue's quota, its pool's free GPUs and the workspace's budget (``budget_blocks``:
    spent, and its owner blocks new work) all allow it; one held by its queue's deserved quota that would start
    now as preemptible work gets that variant beside it. `snapshot`: the cluster as read once for a batch."""
    now = quote.quoted_at
    started = (NOW, DEADLINE)  # a deadline option is forecast as the job would start from now
    asked = {o.id: o.to_json() for o in quote.options if o.when in started}
    quota_held = {o.id for o in quote.options if o.when == NOW}
    try:
        found = start_outlook(spec, asked, queue, now, quota_held, snapshot=snapshot) if asked else {}
    except Exception as error:  # noqa: BLE001 (the quote stands without the scheduler's starts)
        exception_once(logger, ("cluster starts", type(error).__name__),
                       "quotes keep their own expected starts: the cluster cannot be read")
        found = None
    starts = {o.id: o.starts_at if o.when not in started else (o.expected_start if found is None else found[o.id].start)
              for o in quote.options}
    held: dict[str, Note] = {}
    variants: dict[str, str] = {}
    for option_id in quota_held:
        outlook = found.get(option_id) if found else None
        if budget_blocks:
            held[option_id] = budget_note()
            starts[option_id] = None
        elif outlook is not None and outlook.held is not None:
            held[option_id] = quota_note(outlook.held.code, outlook.held.params)
            if outlook.preemptible_now and queue:
                variants[option_id] = queue
    quote = with_expected_starts(quote, starts, held)
    return with_preemptible_variants(quote, variants) if variants else quote

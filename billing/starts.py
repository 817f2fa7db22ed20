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
from billing.quotes import NOW, Quote, with_expected_starts
from scheduling.api import JobSpec, expected_starts

logger = logging.getLogger(__name__)

def with_cluster_starts(quote: Quote, spec: JobSpec, queue: str | None = None) -> Quote:
    """Each option's expected start; those that must wait are forecast in ``queue`` (None: not)."""
    now = quote.quoted_at
    asked = {o.id: o.to_json() for o in quote.options if o.when == NOW}
    try:
        found = expected_starts(spec, asked, queue, now) if asked else {}
    except Exception as error:  # noqa: BLE001 (the quote stands without the scheduler's starts)
        exception_once(logger, ("cluster starts", type(error).__name__),
                       "quotes keep their own expected starts: the cluster cannot be read")
        found = None
    starts = {o.id: o.starts_at if o.when != NOW else (o.expected_start if found is None else found[o.id])
              for o in quote.options}
    return with_expected_starts(quote, starts)

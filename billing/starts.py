"""When each quote option is expected to start, from the cluster's state now.

A ``now`` option starts now when every role's MinReplicas find room together on the free capacity
of its pool's nodes, as the scheduler would place them (``core.session.Session.find_spot``, which
applies ``core/fit.py`` and the placement rules). Otherwise it waits in its queue: its expected start
is the earliest of the forward simulation that gives pending jobs theirs (``scheduling/forecast.py``
``forecast_new_jobs``: the jobs ahead, the running jobs' ends, shares and reclaim, through the
scheduler core), or None beyond its horizon. An ``off-peak`` option is expected when its window opens.
"""

from __future__ import annotations

from datetime import datetime

from billing.quotes import NOW, Quote, QuoteOption, with_expected_starts
from scheduling.core.session import Session
from scheduling.cycle.snapshot import build_snapshot, core_job, core_request, core_roles
from scheduling.forecast import forecast_new_jobs
from scheduling.spec import JobSpec
from scheduling.spec.requests import role_requests


def cluster_now(now: datetime) -> Session | None:
    """The scheduler's session over the cluster as it stands; None when the state cannot be read
    as a consistent snapshot (the next cycle repairs it), so starts fall back to the quote's guess."""
    try:
        return Session.build(build_snapshot(now))
    except ValueError:
        return None


def fits_now(session: Session, spec: JobSpec, option: QuoteOption) -> bool:
    """Whether the whole job at MinReplicas finds room now in the option's pool; nothing is kept."""
    if option.pool not in session.pool_mask:
        return False
    requests = [core_request(role) for role in role_requests(spec, option.to_json())
                for _ in range(role["min_replicas"])]
    return session.all_fit(requests, option.pool)


def expected_start(option: QuoteOption, spec: JobSpec, session: Session | None, now: datetime) -> datetime | None:
    """The instant ``option`` is expected to start if it fits now: ``now``, its off-peak window's
    start, None when it has to wait (``with_cluster_starts`` then asks the forecast)."""
    if option.when != NOW:
        return option.starts_at
    if session is None:
        return option.expected_start
    return now if fits_now(session, spec, option) else None


def _candidate(spec: JobSpec, option: QuoteOption, queue: str, now: datetime):
    roles = core_roles(role_requests(spec, option.to_json()))
    return core_job(0, queue, roles, spec.priority, spec.preemptible, spec.reduce_cost, now), spec.expected_duration_s


def with_cluster_starts(quote: Quote, spec: JobSpec, queue: str | None = None) -> Quote:
    """Each option's expected start; those that must wait are forecast in ``queue`` (None: not)."""
    now = quote.quoted_at
    session = cluster_now(now)
    starts = {o.id: expected_start(o, spec, session, now) for o in quote.options}
    waiting = [o for o in quote.options if o.when == NOW and starts[o.id] is None]
    if waiting and queue and session is not None:
        windows = forecast_new_jobs({o.id: _candidate(spec, o, queue, now) for o in waiting}, now)
        starts.update({name: w.earliest for name, w in windows.items()})
    return with_expected_starts(quote, starts)

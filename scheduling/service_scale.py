"""A service's stored replica range (ServiceScale): made when the service is submitted, reset
when a member starts it again, and the scheduler's roles it bounds (`with_bounds`)."""

from __future__ import annotations

from datetime import datetime

from scheduling import clock
from scheduling.models import Job, ServiceScale
from scheduling.spec import SpecError, parse_job_spec_obj
from scheduling.spec.kinds import service_bounds


def create_scale(job: Job) -> ServiceScale | None:
    """A submitted service's range: the one its spec declares (its role's scale_min..scale_max). Its kind
    (scheduling.kinds.inference) and the autoscaler call it, for services only."""
    if not job.roles:
        return None
    role = job.roles[0]
    low, high = role.get("scale_min", role["min_replicas"]), role.get("scale_max", role["max_replicas"])
    serving = _declared(job)
    # remembered as a recommendation: a new service keeps its first replica for a whole scale-down delay
    return ServiceScale.objects.create(job=job, min_replicas=low, max_replicas=high, desired=role["max_replicas"],
                                       reason="",
                                       recommendations=[[job.created.timestamp(), role["max_replicas"]]],
                                       requests_per_minute=getattr(serving, "requests_per_minute", None),
                                       tokens_per_minute=getattr(serving, "tokens_per_minute", None))


def _declared(job: Job):
    """The service's spec as declared (its inference part), None when it cannot be read."""
    try:
        return parse_job_spec_obj(job.spec).inference
    except (SpecError, TypeError, ValueError):
        return None


def with_bounds(roles: list[dict], scale: ServiceScale, desired: int, *, surge: int = 0) -> list[dict]:
    """The roles the scheduler places for a service wanting `desired` replicas (its minimum when it
    wants none: a stopped service is not scheduled, and its roles say what a wake asks for); `surge`
    replicas may go above its max while a new revision starts."""
    high = scale.max_replicas + surge
    bounds = service_bounds(scale.min_replicas, high, desired) or service_bounds(scale.min_replicas, high, 1)
    return [{**role, "scale_min": scale.min_replicas, "scale_max": scale.max_replicas,
             "min_replicas": bounds[0], "max_replicas": bounds[1]} for role in roles]


def restarted(job: Job, now: datetime | None = None) -> None:
    """A member started a stopped service (the caller holds its lock): it asks for its minimum (one at
    least) and keeps it for a whole scale-down delay, as a new service does."""
    now = now or clock.now()
    scale = ServiceScale.objects.select_for_update().filter(job=job).first()
    if scale is None:
        return
    scale.desired = max(1, scale.min_replicas)
    scale.reason, scale.recommendations = "started", [[now.timestamp(), scale.desired]]
    scale.save(update_fields=["desired", "reason", "recommendations"])
    job.roles = with_bounds(job.roles, scale, scale.desired)
    job.save(update_fields=["roles"])

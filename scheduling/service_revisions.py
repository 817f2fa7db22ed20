"""An inference service's revisions and its traffic split.

A change of a service's model or image (`create_revision`) makes the next revision: the service's spec
(`Job.spec`) becomes the new one's and `ServiceScale.revision` names it, so replicas placed from then on
launch it (each placement remembers its revision, `Replica.revision`), while the replicas already running
keep serving the old one. The endpoint splits requests between revisions by `ServiceScale.traffic`
(`traffic_split`; empty: all to the current revision), and a revision with no ready replica leaves its share
to the others. Each autoscaler evaluation rolls out (`rollout`): a revision that takes traffic and has no
replica gets one more than the autoscaler asks for (a surge), and once it has a ready replica the replicas of
revisions that take no traffic end (replaced), one evaluation after the new one is ready.

Promote (all traffic to one revision, which new replicas launch) and roll back (promote the revision before
the current one) are the two ways to end a split.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from scheduling import clock, kinds
from scheduling import history_catalogue as texts
from scheduling.errors import Conflict, DomainError
from scheduling.history_texts import said
from scheduling.models import Job, JobState, Replica, ServiceRevision, ServiceScale
from scheduling.services import read_spec, record_event, require_submitter
from scheduling.spec import parse_job_spec_obj, spec_to_dict

MAX_SPLIT = 4  # revisions one split may name


def _model_of(spec: Mapping[str, Any]) -> str:
    model = spec.get("model") or {}
    if not isinstance(model, Mapping):
        return ""
    return str(model.get("path") or model.get("registry") or model.get("name") or "")[:300]


def first_revision(job: Job) -> ServiceRevision:
    """The service's revision 1 (made now for a service that has none yet: its spec as submitted)."""
    revision, created = ServiceRevision.objects.get_or_create(
        job=job,
        number=1,
        defaults={
            "spec": job.spec,
            "model": _model_of(job.spec),
            "image": str(job.spec.get("image") or "")[:300],
            "created": job.created,
            "created_by": job.submitted_by,
        },
    )
    if created:
        Replica.objects.filter(job=job, revision__isnull=True).update(revision=1)
    return revision


def revisions_of(job: Job) -> list[ServiceRevision]:
    revisions = list(job.service_revisions.order_by("number"))
    return revisions or [first_revision(job)]


def traffic_split(job: Job) -> list[tuple[int, int]]:
    """[(revision, percent)] the endpoint draws a revision from; one pair (the current revision, 100) without
    a split; empty for a job that is not a service."""
    scale = ServiceScale.objects.filter(job_id=job.pk).values("revision", "traffic").first()
    if scale is None:
        return []
    split = [(int(t["revision"]), int(t["percent"])) for t in scale["traffic"] or () if t.get("percent")]
    return split or [(scale["revision"], 100)]


def check_traffic(traffic: Any, numbers: set[int]) -> list[dict[str, int]]:
    """A split as given ([{revision, percent}]), checked: known revisions, each once, whole percents that add up
    to 100. Raises DomainError (field `traffic`) naming what is wrong."""
    if not isinstance(traffic, list) or not 1 <= len(traffic) <= MAX_SPLIT:
        raise DomainError(
            f"traffic must be a list of 1 to {MAX_SPLIT} {{revision, percent}}", field="traffic"
        )
    out: list[dict[str, int]] = []
    for item in traffic:
        revision = item.get("revision") if isinstance(item, Mapping) else None
        percent = item.get("percent") if isinstance(item, Mapping) else None
        if (
            not all(isinstance(v, int) and not isinstance(v, bool) for v in (revision, percent))
            or not 0 <= percent <= 100
        ):
            raise DomainError(
                "each traffic entry needs a revision number and a whole percent from 0 to 100",
                field="traffic",
            )
        if revision not in numbers:
            raise DomainError(
                f"the service has no revision {revision} (it has {sorted(numbers)})", field="traffic"
            )
        if any(o["revision"] == revision for o in out):
            raise DomainError(f"revision {revision} is named twice", field="traffic")
        out.append({"revision": revision, "percent": percent})
    if sum(o["percent"] for o in out) != 100:
        raise DomainError(
            f"the percents add up to {sum(o['percent'] for o in out)}, not 100", field="traffic"
        )
    return out


def _locked(user, job: Job) -> tuple[Job, ServiceScale]:
    require_submitter(user, job.workspace)
    job = Job.objects.select_for_update().select_related("workspace").get(pk=job.pk)
    kinds.kind_of(job).check_scaled(job)
    if job.is_final:
        raise Conflict(f"service {job.pk} is already {job.state}", field="state")
    scale = ServiceScale.objects.select_for_update().get(job=job)
    return job, scale


def _split_words(traffic: list[dict[str, int]]) -> str:
    return ", ".join(f"r{t['revision']} {t['percent']}%" for t in traffic)


REVISED_KEYS = ("image", "model", "command", "server", "port", "healthPath")


@transaction.atomic
def create_revision(user, job: Job, changes: Mapping[str, Any], *, traffic: Any = None) -> ServiceRevision:
    """A member who may submit changes the service's model or image (or its server's command, port or health
    path: `changes`, in the spec's clean form): the next revision, which new replicas launch; the current one
    keeps serving until the new one has a ready replica. `traffic` (optional) splits the requests between
    them meanwhile, e.g. [{revision: 3, percent: 90}, {revision: 4, percent: 10}]."""
    job, scale = _locked(user, job)
    unknown = sorted(set(changes) - set(REVISED_KEYS))
    if unknown:
        raise DomainError(
            f"a revision changes only {', '.join(REVISED_KEYS)}; not {', '.join(unknown)}", field=unknown[0]
        )
    spec = {**job.spec, **changes}
    parsed = read_spec(job.workspace, spec)
    new_spec = spec_to_dict(parsed)
    if {k: new_spec.get(k) for k in REVISED_KEYS} == {k: job.spec.get(k) for k in REVISED_KEYS}:
        raise DomainError(
            "the change leaves the model and the image as they are: no new revision", field="model"
        )
    revisions = revisions_of(job)
    previous = scale.revision
    revision = ServiceRevision.objects.create(
        job=job,
        number=revisions[-1].number + 1,
        spec=new_spec,
        model=_model_of(new_spec),
        image=str(new_spec.get("image") or "")[:300],
        created=clock.now(),
        created_by=user,
    )
    numbers = {r.number for r in revisions} | {revision.number}
    scale.traffic = check_traffic(traffic, numbers) if traffic is not None else []
    scale.revision = revision.number
    scale.scraped_at = None  # evaluated again at the next cycle: the new revision's replica starts then
    scale.save(update_fields=["traffic", "revision", "scraped_at"])
    _set_spec(job, new_spec)
    record_event(
        job,
        "revised",
        reason=said(
            texts.REVISION_MADE,
            number=revision.number,
            model=revision.model or revision.image,
            previous=previous,
            user=user.username,
        ),
        data={"revision": revision.number, "traffic": scale.traffic},
    )
    return revision


@transaction.atomic
def set_traffic(user, job: Job, traffic: Any) -> ServiceScale:
    """Split the service's requests between its revisions, e.g. 90 % on 3 and 10 % on 4."""
    job, scale = _locked(user, job)
    scale.traffic = check_traffic(traffic, {r.number for r in revisions_of(job)})
    scale.scraped_at = None
    scale.save(update_fields=["traffic", "scraped_at"])
    record_event(
        job,
        "traffic",
        reason=said(texts.TRAFFIC_SET, split=_split_words(scale.traffic), user=user.username),
        data={"traffic": scale.traffic},
    )
    return scale


def _set_spec(job: Job, spec: dict) -> None:
    """The service's spec becomes `spec`, and its stored role the image and command that new placements launch
    (a launch reads those from the role, the model from the spec)."""
    [role] = parse_job_spec_obj(spec).roles
    job.spec = spec
    job.roles = [{**r, "image": role.image, "command": list(role.command)} for r in job.roles]
    job.save(update_fields=["spec", "roles"])


def _make_current(job: Job, scale: ServiceScale, revision: ServiceRevision) -> None:
    scale.revision, scale.traffic, scale.scraped_at = revision.number, [], None
    scale.save(update_fields=["revision", "traffic", "scraped_at"])
    _set_spec(job, revision.spec)


@transaction.atomic
def promote(user, job: Job, number: int) -> ServiceScale:
    """All the service's traffic to revision `number`, which new replicas launch from now on; the other
    revisions' replicas are replaced once it has a ready one."""
    job, scale = _locked(user, job)
    revision = next((r for r in revisions_of(job) if r.number == number), None)
    if revision is None:
        raise DomainError(f"the service has no revision {number}", field="revision")
    _make_current(job, scale, revision)
    record_event(
        job,
        "promoted",
        reason=said(texts.REVISION_PROMOTED, number=number, user=user.username),
        data={"revision": number},
    )
    return scale


@transaction.atomic
def rollback(user, job: Job) -> ServiceScale:
    """Promote the revision before the current one."""
    job, scale = _locked(user, job)
    earlier = [r for r in revisions_of(job) if r.number < scale.revision]
    if not earlier:
        raise Conflict(
            f"revision {scale.revision} is the service's first: there is nothing to roll back to",
            field="revision",
        )
    _make_current(job, scale, earlier[-1])
    record_event(
        job,
        "rolled-back",
        reason=said(texts.REVISION_ROLLED_BACK, number=earlier[-1].number, user=user.username),
        data={"revision": earlier[-1].number},
    )
    return scale


# --------------------------------------------------------------------------- the rollout, each evaluation


@dataclass(frozen=True)
class Rollout:
    at_least: (
        int  # replicas to keep wanted (by index): one of each revision that takes traffic, a new one's surge
    )
    replaced: tuple[Replica, ...] = ()  # stale replicas to end now


def rollout(scale: ServiceScale, active: list[Replica], ready: set[int]) -> Rollout:
    """What the revisions ask of this evaluation: `active` are the service's placements, `ready` the primary keys
    of those whose server answered ready. Revisions that take traffic are wanted and keep one replica each; the
    current one (which new placements launch) gets one more than there are while it has none (a surge); once
    every wanted revision has a ready replica, the replicas of the others are replaced."""
    wanted = {int(t["revision"]) for t in scale.traffic or () if t.get("percent")} or {scale.revision}

    def revision_of(replica: Replica) -> int:
        return replica.revision or 1

    first: dict[int, int] = {}
    for replica in active:
        number = revision_of(replica)
        if number in wanted:
            first[number] = min(first.get(number, replica.index), replica.index)
    keep = max(first.values(), default=-1) + 1
    stale = tuple(r for r in active if revision_of(r) not in wanted)
    if scale.revision in wanted and scale.revision not in first:
        return Rollout(max(keep, len(active) + 1))  # the new revision's first replica, beside the old ones
    serving = {revision_of(r) for r in active if r.pk in ready and r.state == JobState.RUNNING}
    replacement_ready = scale.revision in serving if scale.revision in wanted else bool(wanted & serving)
    if not stale or not replacement_ready:
        return Rollout(keep)  # the new one is starting: the old ones serve meanwhile
    return Rollout(keep, stale)


def replace(job: Job, replicas: tuple[Replica, ...], now: datetime, ready_revision: int) -> None:
    """End the stale replicas of a rollout (the caller holds the service's lock)."""
    if not replicas:
        return
    for replica in replicas:
        replica.state, replica.ended, replica.end_reason = JobState.STOPPED, now, "replaced"
    Replica.objects.bulk_update(list(replicas), ["state", "ended", "end_reason"])
    record_event(
        job,
        "replaced",
        reason=said(
            texts.REPLICAS_REPLACED,
            count=len(replicas),
            revisions=", ".join(sorted({str(r.revision or 1) for r in replicas})),
            ready=ready_revision,
        ),
        data={"replaced": [str(r) for r in replicas]},
    )


def current_revision(job_id: int) -> int | None:
    return ServiceScale.objects.filter(job_id=job_id).values_list("revision", flat=True).first()
